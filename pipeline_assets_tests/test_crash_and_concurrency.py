"""Crashes at every step of the load, and concurrent runs, with real processes.

A load killed with SIGKILL at any named point (a real `dagster asset materialize`),
then rerun, must leave the warehouse equal to the source, each batch once in the
ledger, and the watermark at the newest row loaded. Two loads at once must not lose a
watermark advance or apply a batch twice; two overlapping range backfills must leave
files and manifests that agree.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from pipeline_assets.core import demo
from pipeline_assets.core import watermark as wm
from pipeline_assets.core.daily_files import describe_days, read_committed_day
from pipeline_assets.core.db import batches, make_engine, orders, watermark_history
from pipeline_assets.core.load import load_orders
from pipeline_assets.core.source import inspect_source, read_window
from pipeline_assets.core.times import UTC, from_canonical, to_instant

from .conftest import NOW

BIN = Path(sys.executable).parent
LOAD_POINTS = ["load_after_read", "load_after_watermark", "load_before_commit",
               "load_after_commit"]


def source_rows(source) -> list[tuple]:
    src = inspect_source(source)
    return [o.stored for chunk in read_window(source, src, UTC, None, None) for o in chunk]


def warehouse_rows(warehouse) -> list[tuple]:
    with warehouse.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.select(orders).order_by(orders.c.order_id))]


def assert_invariants(source, warehouse):
    """Warehouse = source, each batch once, watermark = newest row, history monotone."""
    assert warehouse_rows(warehouse) == source_rows(source)
    with warehouse.connect() as conn:
        ids = conn.execute(sa.select(batches.c.batch_id)).scalars().all()
        history = conn.execute(
            sa.select(watermark_history.c.old_value, watermark_history.c.new_value)
            .where(watermark_history.c.kind == "load").order_by(watermark_history.c.id)).all()
    assert len(ids) == len(set(ids))
    newest = max(from_canonical(r[3]) for r in source_rows(source))
    assert wm.current(warehouse) == newest
    for (_, new), (next_old, _) in zip(history, history[1:], strict=False):
        assert next_old == new, "a watermark advance was lost"  # each starts where one ended
    for old, new in history:
        assert old is None or new > old


@pytest.fixture
def env_for(tmp_path):
    def make(urls: dict, **extra) -> dict:
        (tmp_path / "home").mkdir(exist_ok=True)
        (tmp_path / "data").mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_CRASH")}
        return {**env, "DAGSTER_HOME": str(tmp_path / "home"),
                "PIPELINE_DATA_DIR": str(tmp_path / "data"),
                "SOURCE_DATABASE_URL": urls["source"],
                "WAREHOUSE_DATABASE_URL": urls["warehouse"], **extra}
    return make


def materialize(env, cwd, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "dagster"), "asset", "materialize", "-m", "pipeline_assets.definitions",
         *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.e2e
@pytest.mark.parametrize("point", LOAD_POINTS)
def test_a_load_killed_at_any_point_then_rerun_loses_and_doubles_nothing(
        db_urls, engines, env_for, tmp_path, point):
    source, warehouse = engines
    demo.init(source)
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    demo.set_order(source, 105, status="paid", amount="22.00", updated_at="2026-01-25", tz=UTC)
    demo.set_order(source, 186, status="paid", amount="30.00", updated_at="2026-01-24", tz=UTC)
    before = warehouse_rows(warehouse)

    killed = materialize(env_for(db_urls, PIPELINE_CRASH_AT=point), tmp_path,
                         "--select", "orders")
    assert killed.returncode != 0
    committed = point == "load_after_commit"
    if committed:
        assert wm.current(warehouse) == to_instant("2026-01-25", UTC)
        assert len(warehouse_rows(warehouse)) == 7
    else:  # the transaction died with the process: nothing of it is visible
        assert warehouse_rows(warehouse) == before
        assert wm.current(warehouse) == to_instant("2026-01-21", UTC)

    rerun = materialize(env_for(db_urls), tmp_path, "--select", "orders")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert_invariants(source, warehouse)


def _load_repeatedly(urls: dict, times: int, barrier) -> None:
    source = make_engine(urls["source"], role="source")
    warehouse = make_engine(urls["warehouse"], role="warehouse")
    barrier.wait()
    for _ in range(times):
        load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)


def _app_writes(urls: dict, barrier) -> None:
    source = make_engine(urls["source"], role="source")
    barrier.wait()
    start = to_instant("2026-01-22", UTC)
    for n in range(40):  # an hour apart, as an app writes them: all within the lookback
        demo.set_order(source, 1000 + n, status="paid", amount=f"{n}.00",
                       updated_at=(start + timedelta(hours=n)).isoformat(), tz=UTC)


def test_concurrent_loads_lose_no_advance_and_apply_no_batch_twice(db_urls, engines):
    source, warehouse = engines
    demo.init(source)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    workers = [ctx.Process(target=_load_repeatedly, args=(db_urls, 6, barrier)),
               ctx.Process(target=_load_repeatedly, args=(db_urls, 6, barrier)),
               ctx.Process(target=_app_writes, args=(db_urls, barrier))]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=240)
        assert w.exitcode == 0
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)  # catch the last writes
    assert_invariants(source, warehouse)


@pytest.mark.e2e
def test_overlapping_range_backfills_leave_files_and_manifests_that_agree(
        db_urls, engines, env_for, tmp_path):
    source, warehouse = engines
    demo.init(source)
    demo.generate(source, orders=300, days=10, start=to_instant("2026-01-10", UTC).date(),
                  seed=3)
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    env = env_for(db_urls)
    args = [[str(BIN / "dagster"), "asset", "materialize", "-m", "pipeline_assets.definitions",
             "--select", "paid_orders,daily_revenue", "--partition-range", r]
            for r in ("2026-01-08...2026-01-16", "2026-01-12...2026-01-20")]
    # Dagster creates a new DAGSTER_HOME's storage on first use; two first uses at once
    # race in its migrations (Dagster's, not ours), so the instance is made first.
    subprocess.run([str(BIN / "dagster"), "instance", "migrate"], cwd=tmp_path, env=env,
                   check=True, capture_output=True, timeout=120)
    runs = [subprocess.Popen(a, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for a in args]
    for run in runs:
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err[-2000:]
    folder = tmp_path / "data" / "paid_orders"
    days = [f"2026-01-{d:02d}" for d in range(8, 21)]
    assert all(s.committed for s in describe_days(folder, days))
    manifests = [json.loads(p.read_text()) for p in folder.glob("_manifest_*.json")]
    assert len(manifests) == 2 and sorted(m["sequence"] for m in manifests) == [1, 2]
    for day in days:  # the newest manifest listing the day vouches for the file on disk
        newest = max((m for m in manifests if day in m["files"]), key=lambda m: m["sequence"])
        assert newest["files"][day]["rows"] == len(read_committed_day(folder, day))
