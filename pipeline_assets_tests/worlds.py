"""One small world for the executor tests: a demo source with a late and a moved order,
its settings, the real ``dagster job execute`` that runs a job on it, and the warehouse
tables as plain values to compare two worlds with.

The multiprocess executor (``test_deploy.py``) and the Celery executor
(``test_celery.py``) each build one world in process and one on their executor, and
require the same day files and the same warehouse.

And the world of one test in this process, :class:`Pipeline`: its source, warehouse and
day files, run through core (``test_verify.py``) or as Dagster jobs
(``test_daily_assets.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from datetime import date
from functools import cached_property
from pathlib import Path

import sqlalchemy as sa

from pipeline_assets import demo
from pipeline_assets.core.daily_files import write_day_files
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC
from pipeline_assets.core.verify import verify
from pipeline_assets.settings import from_env
from pipeline_assets_tests.orders import load_orders, paid_orders_by_day

from .conftest import NOW, ROOT
from .devserver import BIN
from .stores import all_files

# a range backfill of paid_orders and daily_revenue: one run over 25 days
RANGE_TAGS = {
    "dagster/asset_partition_range_start": "2026-01-01",
    "dagster/asset_partition_range_end": "2026-01-26",
}
DAILY = ("daily_job", {"dagster/partition": "2026-01-25"})
BACKFILL = ("daily_files_job", RANGE_TAGS)
# what a job run of a world never inherits from the test run's environment
CALLERS = (
    "PIPELINE_",
    "SOURCE_DATABASE",
    "WAREHOUSE_DATABASE",
    "PAID_ORDERS",
    "CELERY_",
    "DAGSTER_",
)


def psycopg2_url(url: str) -> str:
    """The same database for dagster-postgres, which needs psycopg2 (a bare postgresql://
    means psycopg 3 to SQLAlchemy 2.1, and dagster-postgres's NOTIFY fails under it)."""
    return (
        sa.engine.make_url(url)
        .set(drivername="postgresql+psycopg2")
        .render_as_string(hide_password=False)
    )


def on_celery(root: Path, module: str, urls: Mapping[str, str], broker_url: str):
    """A user's project (code location ``module``) on the production stack: its runs' and
    its Celery worker's environments, ``(env, homes)``, the run's being ``env |
    homes["run"]`` and the worker's ``env | homes["worker"]``. Source, warehouse and the
    instance (``deploy/dagster.yaml``) on PostgreSQL at ``urls``; each side a home and a
    data folder of its own under ``root``, so nothing reaches the worker through a shared
    local disk."""
    production = (ROOT / "deploy" / "dagster.yaml").read_text()
    env = {key: value for key, value in os.environ.items() if not key.startswith(CALLERS)}
    env |= {
        "SOURCE_DATABASE_URL": urls["source"],
        "WAREHOUSE_DATABASE_URL": urls["warehouse"],
        "PIPELINE_AUTOMATION": "off",
        "DAGSTER_POSTGRES_URL": psycopg2_url(urls["instance"]),
        "PIPELINE_EXECUTOR": "celery",
        "CELERY_BROKER_URL": broker_url,
        "CELERY_WORKER_MODULE": module,
    }
    homes = {}
    for side in ("run", "worker"):
        (root / side / "home").mkdir(parents=True)
        (root / side / "home" / "dagster.yaml").write_text(production)
        homes[side] = {
            "DAGSTER_HOME": str(root / side / "home"),
            "PIPELINE_DATA_DIR": str(root / side / "data"),
        }
    return env, homes


def demo_world(
    data: Path,
    source_url: str | None = None,
    warehouse_url: str | None = None,
    paid_orders_url: str | None = None,
) -> dict[str, str]:
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
    source = make_engine(source_url or f"sqlite:///{data / 'app.db'}", role="app")
    try:
        demo.init(source)
        demo.set_order(source, 105, status="paid", amount="22.00", updated_at="2026-01-25", tz=UTC)
        demo.set_order(source, 186, status="paid", amount="30.00", updated_at="2026-01-24", tz=UTC)
    finally:
        source.dispose()
    return env


def execute_job(
    job: str, tags: Mapping[str, str], env: Mapping[str, str], cwd: Path
) -> subprocess.CompletedProcess:
    """``dagster job execute`` of ``job`` with ``tags``; fails the test unless it succeeds."""
    done = subprocess.run(
        [
            str(BIN / "dagster"),
            "job",
            "execute",
            "-m",
            "pipeline_assets.definitions",
            "-j",
            job,
            "--tags",
            json.dumps(dict(tags)),
        ],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def warehouse_tables(url: str) -> dict[str, list[tuple]]:
    """The warehouse's orders, daily totals and watermark as text, whatever the database."""
    engine = make_engine(url, role="warehouse")
    try:
        with engine.connect() as conn:
            return {
                query: [tuple(str(v) for v in r) for r in conn.execute(sa.text(query))]
                for query in (
                    "SELECT order_id, status, amount, updated_at FROM orders ORDER BY order_id",
                    "SELECT * FROM daily_revenue ORDER BY day",
                    "SELECT name, value FROM pipeline_watermark ORDER BY name",
                )
            }
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
        assert (
            defs.resolve_job_def(DAILY[0])
            .execute_in_process(instance=instance, partition_key=DAILY[1]["dagster/partition"])
            .success
        )
        assert (
            defs.resolve_job_def(BACKFILL[0])
            .execute_in_process(instance=instance, tags=BACKFILL[1])
            .success
        )
    files = {
        name: data
        for name, data in all_files(data / "paid_orders").items()
        if name.startswith("2026-")
    }
    return files, warehouse_tables(f"sqlite:///{data / 'warehouse.db'}")


class Pipeline:
    """The demo source, the warehouse and the day files of one test, with the settings
    ``from_env`` makes of their environment: the data folder ``data``, the two URLs when
    given (default: SQLite files in ``data``) and ``settings`` (``PIPELINE_TIMEZONE``,
    ``PAID_ORDERS_URL`` for a bucket, ...). Driven through core as the assets do it
    (:meth:`load`, :meth:`build`, :meth:`verify`), or as Dagster runs its jobs on
    ``instance`` (:meth:`run_orders_job`, :meth:`run_daily_files_job`)."""

    def __init__(
        self,
        data: Path,
        source_url: str | None = None,
        warehouse_url: str | None = None,
        *,
        instance=None,
        **settings: str,
    ):
        data.mkdir(parents=True, exist_ok=True)
        self.environ = {"PIPELINE_DATA_DIR": str(data), **settings}
        if source_url:  # in the environment: the definitions name it (EnvVar), read at run time
            self.environ["SOURCE_DATABASE_URL"] = source_url
        if warehouse_url:
            self.environ["WAREHOUSE_DATABASE_URL"] = warehouse_url
        self.settings = from_env(self.environ, cwd=data)
        self.data, self.tz, self.instance = data, self.settings.tz, instance
        self.folder = self.settings.paid_orders_dir  # <data>/paid_orders, or PAID_ORDERS_URL
        self.source_url, self.warehouse_url = self.settings.source_url, self.settings.warehouse_url
        self.source = make_engine(self.source_url, role="app")
        self.warehouse = make_engine(self.warehouse_url, role="warehouse")
        self.runs = 0

    def env(self) -> dict[str, str]:
        """The settings' environment, for the command line or a ``dagster`` subprocess."""
        return dict(self.environ)

    def app_set(self, order_id, status, amount, updated_at):
        demo.set_order(
            self.source, order_id, status=status, amount=amount, updated_at=updated_at, tz=self.tz
        )

    # --- through core ---

    def load(self):
        return load_orders(self.source, self.warehouse, tz=self.tz, lookback_days=2, now=NOW)

    def build(self, days):
        """One ``paid_orders`` run over ``days``, as the asset and its IO manager do it."""
        self.runs += 1
        by_day = paid_orders_by_day(self.warehouse, days, self.tz)
        write_day_files(
            self.folder,
            by_day,
            run_id=f"run-{self.runs}",
            written_at=NOW,
            watermark=NOW,
            spec=ORDERS,
        )

    def verify(self, **options):
        return verify(
            self.source,
            self.warehouse,
            self.folder,
            tz=self.tz,
            today=NOW.astimezone(self.tz).date(),
            partitions_start=date(2026, 1, 1),
            **{"spec": ORDERS, **options},
        )

    # --- as Dagster runs it ---

    @cached_property
    def defs(self):
        from pipeline_assets.definitions import build_definitions

        return build_definitions(self.settings)

    def run_orders_job(self) -> list[str]:
        """``orders_job`` in this process: the days its load touched."""
        result = self.defs.resolve_job_def("orders_job").execute_in_process(instance=self.instance)
        assert result.success
        (event,) = result.get_asset_materialization_events()
        return event.materialization.metadata["days_touched"].value

    def run_daily_files_job(self, partition: str | None = None, tags: dict | None = None):
        result = self.defs.resolve_job_def("daily_files_job").execute_in_process(
            instance=self.instance, partition_key=partition, tags=tags
        )
        assert result.success
        return result

    def file(self, day: str) -> bytes:
        return (self.folder / f"{day}.json").read_bytes()

    def manifests(self) -> list[dict]:
        return [json.loads(p.read_text()) for p in sorted(self.folder.glob("_manifest_*.json"))]

    def close(self):
        self.source.dispose()
        self.warehouse.dispose()
