"""The real ``dagster`` command line, as a user types it, in a subprocess.

Includes a run killed with SIGKILL right after its commit (the lost acknowledgement,
for real): the rerun must store nothing twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from pipeline_assets.core import demo
from pipeline_assets.core import watermark as wm
from pipeline_assets.core.db import make_engine
from pipeline_assets.core.times import UTC, to_instant

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent


@pytest.fixture
def workdir(tmp_path: Path, db_urls):
    (tmp_path / "home").mkdir()
    (tmp_path / "data").mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"),
           "PIPELINE_DATA_DIR": str(tmp_path / "data"),
           "SOURCE_DATABASE_URL": db_urls["source"],
           "WAREHOUSE_DATABASE_URL": db_urls["warehouse"]}
    for key in ("PIPELINE_CRASH_AT", "PIPELINE_CRASH_MODE", "PIPELINE_CRASH_ONCE_FILE"):
        env.pop(key, None)
    source = make_engine(db_urls["source"], role="source")
    warehouse = make_engine(db_urls["warehouse"], role="warehouse")
    demo.init(source)
    yield tmp_path, env, source, warehouse
    source.dispose()
    warehouse.dispose()


def dagster(env, cwd, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "dagster"), "asset", "materialize", "-m", "pipeline_assets.definitions",
         *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def count(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM orders")).scalar()


def test_materialize_orders_from_the_command_line(workdir):
    tmp_path, env, source, warehouse = workdir
    done = dagster(env, tmp_path, "--select", "orders")
    assert done.returncode == 0, done.stderr[-2000:]
    assert count(warehouse) == 6
    assert wm.current(warehouse) == to_instant("2026-01-21", UTC)


def test_a_run_killed_after_its_commit_is_rerun_without_doubles(workdir):
    tmp_path, env, source, warehouse = workdir
    assert dagster(env, tmp_path, "--select", "orders").returncode == 0
    demo.set_order(source, 105, status="paid", amount="22.00", updated_at="2026-01-25", tz=UTC)
    demo.set_order(source, 186, status="paid", amount="30.00", updated_at="2026-01-24", tz=UTC)

    crash_env = {**env, "PIPELINE_CRASH_AT": "load_after_commit"}
    killed = subprocess.run(
        [str(BIN / "dagster"), "asset", "materialize", "-m", "pipeline_assets.definitions",
         "--select", "orders"], cwd=tmp_path, env=crash_env, capture_output=True, text=True,
        timeout=300)
    # the step's process was killed (SIGKILL): the run fails, as after a lost pod
    assert killed.returncode != 0 and "Materialization failed" in killed.stderr
    assert count(warehouse) == 7  # the commit had landed before the kill
    assert wm.current(warehouse) == to_instant("2026-01-25", UTC)

    rerun = dagster(env, tmp_path, "--select", "orders")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    with warehouse.connect() as conn:
        rows = conn.execute(sa.text("SELECT order_id FROM orders")).scalars().all()
    assert sorted(rows) == [101, 102, 103, 104, 105, 106, 186]
    assert wm.current(warehouse) == to_instant("2026-01-25", UTC)
