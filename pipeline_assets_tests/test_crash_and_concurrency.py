"""Crashes at every step of the load, and concurrent runs, with real processes.

A load killed with SIGKILL at any named point (a process of its own running the load,
:mod:`.killed`; the Dagster run around it is killed through the real CLI in
test_dagster_cli.py), then rerun, must leave the warehouse equal to the source, each
batch once in the ledger, and the watermark at the newest row loaded. Two loads at once
must not lose a watermark advance or apply a batch twice; two overlapping range
backfills must leave files and manifests that agree.

The oracle is the test's own: both databases are read with the plain driver
(:mod:`.plain`), and a source row becomes the row the warehouse must hold by the rules
in :mod:`.model`, never through the package's reader.
"""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import queue
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from pipeline_assets import demo
from pipeline_assets.core.crash import POINTS
from pipeline_assets.core.daily_files import describe_days, read_committed_day
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, to_instant
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets_tests.orders import load_orders

from . import plain
from .conftest import NOW
from .killed import run as killed_run
from .model import canonical, instant_of
from .plain import source_rows, warehouse_rows
from .support import RUNS_IN_PROCESS, database_urls

BIN = Path(sys.executable).parent
LOAD_POINTS = [
    "load_after_stage",
    "load_after_compare",
    "load_before_delete",
    "load_after_delete",
    "load_after_merge",
    "load_after_watermark",
    "load_before_commit",
    "load_after_commit",
]


def assert_invariants(urls: dict, warehouse, rows: int, batches: int | None = None):
    """Warehouse = source, each batch once, watermark = newest row, history monotone."""
    expected = source_rows(urls["source"], UTC)
    assert len(expected) == rows  # the scenario fixes how many orders the app wrote
    assert warehouse_rows(urls["warehouse"]) == expected
    ids = [r[0] for r in plain.query(urls["warehouse"], "SELECT batch_id FROM pipeline_batches")]
    history = plain.query(
        urls["warehouse"],
        "SELECT old_value, new_value FROM pipeline_watermark_history "
        "WHERE kind = 'load' ORDER BY id",
    )
    assert len(ids) == len(set(ids))
    if batches is not None:
        assert len(ids) == batches
    newest = max(instant_of(r[3], UTC) for r in plain.source_orders(urls["source"]))
    assert wm.current(warehouse, table=ORDERS.name) == newest
    assert plain.query(urls["warehouse"], "SELECT value FROM pipeline_watermark") == [
        (canonical(newest),)
    ]
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
        return {
            **env,
            "DAGSTER_HOME": str(tmp_path / "home"),
            "PIPELINE_DATA_DIR": str(tmp_path / "data"),
            "SOURCE_DATABASE_URL": urls["source"],
            "WAREHOUSE_DATABASE_URL": urls["warehouse"],
            **RUNS_IN_PROCESS,
            **extra,
        }

    return make


def test_every_load_crash_point_is_killed_for_real():
    """Each load crash point of core/crash.py has its SIGKILL case below, but the one only a
    changed declaration reaches (orders' never changes here), killed in
    test_schema_changes.py."""
    assert set(LOAD_POINTS) | {"load_after_alter"} == {p for p in POINTS if p.startswith("load_")}


# Every point on both warehouses; with a MariaDB source three of them, which reach each part
# of the batch (the scan, the delete step, the commit): the state machine raises at every
# point with a MariaDB source too (test_stateful.py), at a fraction of a real kill's cost.
KILLS = (
    [pytest.param("sqlite", point, id=f"sqlite-{point}") for point in LOAD_POINTS]
    + [
        pytest.param("postgresql", point, marks=pytest.mark.postgres, id=f"postgresql-{point}")
        for point in LOAD_POINTS
    ]
    + [
        pytest.param("mariadb", point, marks=pytest.mark.mysql, id=f"mariadb-{point}")
        for point in ("load_after_stage", "load_after_delete", "load_after_commit")
    ]
)


@pytest.mark.e2e
@pytest.mark.parametrize("backend, point", KILLS)
def test_a_load_killed_at_any_point_then_rerun_loses_and_doubles_nothing(
    backend, point, env_for, tmp_path, request
):
    """An incremental load after the story's two changes; at the delete step's points, a
    range load of January after the app erased order 103 (only a range load deletes)."""
    db_urls = database_urls(backend, tmp_path, request)
    source = make_engine(db_urls["source"], role="app")
    warehouse = make_engine(db_urls["warehouse"], role="warehouse")
    request.addfinalizer(source.dispose)
    request.addfinalizer(warehouse.dispose)
    demo.init(source)
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    demo.set_order(source, 105, status="paid", amount="22.00", updated_at="2026-01-25", tz=UTC)
    demo.set_order(source, 186, status="paid", amount="30.00", updated_at="2026-01-24", tz=UTC)
    before = warehouse_rows(db_urls["warehouse"])
    assert len(before) == 6
    args = ["load", db_urls["source"], db_urls["warehouse"]]
    if "delete" in point:
        load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)  # the story, in
        with source.begin() as conn:
            conn.exec_driver_sql("DELETE FROM orders WHERE order_id = 103")
        before = warehouse_rows(db_urls["warehouse"])
        args += ["2026-01-01", "2026-02-01"]  # a range load: only one deletes

    killed = killed_run(*args, env=env_for(db_urls, PIPELINE_CRASH_AT=point))
    assert killed.returncode == -9, killed.stderr[-2000:]  # SIGKILL, at the point
    if "delete" in point:  # the transaction died: 103 is still there, nothing else moved
        assert warehouse_rows(db_urls["warehouse"]) == before and 103 in [r[0] for r in before]
        rerun = killed_run(*args, env=env_for(db_urls))
        assert rerun.returncode == 0, rerun.stderr[-2000:]
        # 103 deleted, once
        assert warehouse_rows(db_urls["warehouse"]) == source_rows(db_urls["source"], UTC)
        assert_invariants(db_urls, warehouse, rows=6, batches=3)
        return
    committed = point == "load_after_commit"
    if committed:
        assert wm.current(warehouse, table=ORDERS.name) == to_instant("2026-01-25", UTC)
        assert len(warehouse_rows(db_urls["warehouse"])) == 7
        assert warehouse_rows(db_urls["warehouse"]) == source_rows(db_urls["source"], UTC)
    else:  # the transaction died with the process: nothing of it is visible
        assert warehouse_rows(db_urls["warehouse"]) == before
        assert wm.current(warehouse, table=ORDERS.name) == to_instant("2026-01-21", UTC)

    rerun = killed_run(*args, env=env_for(db_urls))
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    # the first load, the killed one if it committed, and the rerun (a new window after a
    # committed kill: recorded, with nothing to write)
    assert_invariants(db_urls, warehouse, rows=7, batches=3 if committed else 2)


def _load_repeatedly(urls: dict, times: int, barrier, in_flight, overlapped, spans) -> None:
    """``times`` loads, and more until the other loader has been seen mid-load (bounded)."""
    source = make_engine(urls["source"], role="app")
    warehouse = make_engine(urls["warehouse"], role="warehouse")
    barrier.wait()
    deadline = time.monotonic() + 120
    done = 0
    while done < times or (not overlapped.value and time.monotonic() < deadline):
        with in_flight.get_lock():  # the span's ends are taken under the shared lock
            in_flight.value += 1
            overlapped.value |= in_flight.value == 2
            started = time.monotonic_ns()  # CLOCK_MONOTONIC: one clock for all processes
        load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
        with in_flight.get_lock():
            in_flight.value -= 1
            spans.put((os.getpid(), started, time.monotonic_ns()))
        done += 1


def _app_writes(urls: dict, barrier) -> None:
    source = make_engine(urls["source"], role="app")
    barrier.wait()
    start = to_instant("2026-01-22", UTC)
    for n in range(40):  # an hour apart, as an app writes them: all within the lookback
        demo.set_order(
            source,
            1000 + n,
            status="paid",
            amount=f"{n}.00",
            updated_at=(start + timedelta(hours=n)).isoformat(),
            tz=UTC,
        )


@pytest.mark.e2e
def test_concurrent_loads_lose_no_advance_and_apply_no_batch_twice(db_urls, engines):
    source, warehouse = engines
    demo.init(source)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    in_flight, overlapped, spans = ctx.Value("i", 0), ctx.Value("b", False), ctx.Queue()
    loaders = [
        ctx.Process(
            target=_load_repeatedly, args=(db_urls, 6, barrier, in_flight, overlapped, spans)
        )
        for _ in range(2)
    ]
    workers = [*loaders, ctx.Process(target=_app_writes, args=(db_urls, barrier))]
    for w in workers:
        w.start()
    done = []
    deadline = time.monotonic() + 300
    while len(done) < 12 or any(w.is_alive() for w in loaders):
        try:  # drained while they run, so that no worker blocks on a full queue
            done.append(spans.get(timeout=1))
        except queue.Empty:
            assert all(w.exitcode in (None, 0) for w in workers), "a worker failed"
            assert time.monotonic() < deadline, "the loaders did not finish in 300 s"
    for w in workers:
        w.join(timeout=240)
        assert w.exitcode == 0
    while not spans.empty():
        done.append(spans.get())
    # The two loaders really ran at once: a load of one began before a load of the other
    # had ended (they were serialized by the watermark lock, not by luck of timing).
    by_pid: dict[int, list[tuple[int, int]]] = {}
    for pid, start, end in done:
        by_pid.setdefault(pid, []).append((start, end))
    assert len(by_pid) == 2 and all(len(v) >= 6 for v in by_pid.values())
    first, second = by_pid.values()
    assert any(a0 < b1 and b0 < a1 for a0, a1 in first for b0, b1 in second), (
        "the two loaders never overlapped"
    )
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)  # catch the last writes
    assert_invariants(db_urls, warehouse, rows=46)


@pytest.mark.e2e
def test_overlapping_range_backfills_leave_files_and_manifests_that_agree(
    db_urls, engines, env_for, tmp_path
):
    source, warehouse = engines
    demo.init(source)
    demo.generate(source, orders=300, days=10, start=to_instant("2026-01-10", UTC).date(), seed=3)
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    env = env_for(db_urls)
    args = [
        [
            str(BIN / "dagster"),
            "asset",
            "materialize",
            "-m",
            "pipeline_assets.definitions",
            "--select",
            "paid_orders,daily_revenue",
            "--partition-range",
            r,
        ]
        for r in ("2026-01-08...2026-01-16", "2026-01-12...2026-01-20")
    ]
    # Dagster creates a new DAGSTER_HOME's storage on first use; two first uses at once
    # race in its migrations (Dagster's, not ours), so the instance is made first.
    subprocess.run(
        [str(BIN / "dagster"), "instance", "migrate"],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    # Both runs must be in flight at once: the writers' lock on the folder (the reader
    # protocol's .lock) is held here until Dagster records both runs as started, so
    # neither can finish before the other has begun.
    folder = tmp_path / "data" / "paid_orders"
    folder.mkdir(parents=True)
    lock = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        # output to files: a pipe nobody reads while the run waits could fill and block it
        logs = [(tmp_path / f"run{n}.log").open("w") for n in range(len(args))]
        runs = [
            subprocess.Popen(a, cwd=tmp_path, env=env, stdout=log, stderr=log)
            for a, log in zip(args, logs, strict=True)
        ]
        with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
            deadline = time.monotonic() + 240
            while (
                len(instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.STARTED]))) < 2
            ):
                ended = [r.args[-1] for r in runs if r.poll() is not None]
                assert not ended, f"{ended} ended while the folder was locked"
                assert time.monotonic() < deadline, "both runs never started"
                time.sleep(0.2)  # polling for the condition, with a deadline
    finally:
        os.close(lock)  # releases the lock: the runs write one after the other
    for run, log in zip(runs, logs, strict=True):
        run.wait(timeout=300)
        log.close()
        assert run.returncode == 0, Path(log.name).read_text()[-2000:]
    assert (
        len(source_rows(db_urls["source"], UTC)) == 306 == len(warehouse_rows(db_urls["warehouse"]))
    )
    days = [f"2026-01-{d:02d}" for d in range(8, 21)]
    assert all(s.committed for s in describe_days(folder, days))
    manifests = [json.loads(p.read_text()) for p in folder.glob("_manifest_*.json")]
    assert len(manifests) == 2 and sorted(m["sequence"] for m in manifests) == [1, 2]
    for day in days:  # the newest manifest listing the day vouches for the file on disk
        newest = max((m for m in manifests if day in m["files"]), key=lambda m: m["sequence"])
        assert newest["files"][day]["rows"] == len(read_committed_day(folder, day))
