"""One small world for the executor tests: a demo source with a late and a moved order,
its settings, the real ``dagster job execute`` that runs a job on it, and the warehouse
tables as plain values to compare two worlds with.

The multiprocess executor (``test_deploy.py``) and the Celery executor
(``test_celery.py``) each build one world in process and one on their executor, and
require the same day files and the same warehouse.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path

import sqlalchemy as sa

from pipeline_assets.core import demo
from pipeline_assets.core.db import make_engine
from pipeline_assets.core.times import UTC

from .devserver import BIN
from .stores import all_files

# a range backfill of paid_orders and daily_revenue: one run over 25 days
RANGE_TAGS = {"dagster/asset_partition_range_start": "2026-01-01",
              "dagster/asset_partition_range_end": "2026-01-26"}
DAILY = ("daily_job", {"dagster/partition": "2026-01-25"})
BACKFILL = ("daily_files_job", RANGE_TAGS)
# what a job run of a world never inherits from the test run's environment
CALLERS = ("PIPELINE_", "SOURCE_DATABASE", "WAREHOUSE_DATABASE", "PAID_ORDERS",
           "CELERY_", "DAGSTER_")


def psycopg2_url(url: str) -> str:
    """The same database for dagster-postgres, which needs psycopg2 (a bare postgresql://
    means psycopg 3 to SQLAlchemy 2.1, and dagster-postgres's NOTIFY fails under it)."""
    return sa.engine.make_url(url).set(drivername="postgresql+psycopg2").render_as_string(
        hide_password=False)


def demo_world(data: Path, source_url: str | None = None, warehouse_url: str | None = None,
               paid_orders_url: str | None = None) -> dict[str, str]:
    """The demo's orders with 105 paid late (the 25th) and 186 moved to the 24th, in
    ``source_url`` (default: a SQLite file in ``data``); the settings that reach it, with
    the automations off."""
    data.mkdir(parents=True, exist_ok=True)
    env = {"PIPELINE_DATA_DIR": str(data), "PIPELINE_AUTOMATION": "off"}
    if source_url:
        env["SOURCE_DATABASE_URL"] = source_url
    if warehouse_url:
        env["WAREHOUSE_DATABASE_URL"] = warehouse_url
    if paid_orders_url:
        env["PAID_ORDERS_URL"] = paid_orders_url
    source = make_engine(source_url or f"sqlite:///{data / 'app.db'}", role="source")
    try:
        demo.init(source)
        demo.set_order(source, 105, status="paid", amount="22.00", updated_at="2026-01-25",
                       tz=UTC)
        demo.set_order(source, 186, status="paid", amount="30.00", updated_at="2026-01-24",
                       tz=UTC)
    finally:
        source.dispose()
    return env


def execute_job(job: str, tags: Mapping[str, str], env: Mapping[str, str],
                cwd: Path) -> subprocess.CompletedProcess:
    """``dagster job execute`` of ``job`` with ``tags``; fails the test unless it succeeds."""
    done = subprocess.run(
        [str(BIN / "dagster"), "job", "execute", "-m", "pipeline_assets.definitions",
         "-j", job, "--tags", json.dumps(dict(tags))],
        cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def warehouse_tables(url: str) -> dict[str, list[tuple]]:
    """The warehouse's orders, daily totals and watermark as text, whatever the database."""
    engine = make_engine(url, role="warehouse")
    try:
        with engine.connect() as conn:
            return {query: [tuple(str(v) for v in r) for r in conn.execute(sa.text(query))]
                    for query in (
                        "SELECT order_id, status, amount, updated_at FROM orders "
                        "ORDER BY order_id",
                        "SELECT * FROM daily_revenue ORDER BY day",
                        "SELECT name, value FROM pipeline_watermark ORDER BY name")}
    finally:
        engine.dispose()


def in_process(root: Path) -> tuple[dict[str, bytes], dict[str, list[tuple]]]:
    """The daily job, then the range backfill, in this process on a world under ``root``:
    its day files (name → bytes) and its warehouse tables, the reference to compare with."""
    from dagster import DagsterInstance

    from pipeline_assets.definitions import build_definitions
    from pipeline_assets.settings import from_env

    data = root / "data"
    defs = build_definitions(from_env(demo_world(data)))
    with DagsterInstance.ephemeral() as instance:
        assert defs.resolve_job_def(DAILY[0]).execute_in_process(
            instance=instance, partition_key=DAILY[1]["dagster/partition"]).success
        assert defs.resolve_job_def(BACKFILL[0]).execute_in_process(
            instance=instance, tags=BACKFILL[1]).success
    files = {name: data for name, data in all_files(data / "paid_orders").items()
             if name.startswith("2026-")}
    return files, warehouse_tables(f"sqlite:///{data / 'warehouse.db'}")
