"""Every table shape, crashed at every point of its load, converges on the next run.

For a table whose days go by another column (``CAPTURES``), an append-only one (``EVENTS``,
an id cursor) and one without a change stamp (``PRICES``, compared whole), each load
crash point of ``core/crash.py`` is hit in a run that has something to write: a row
moved to another day, a late commit within the lookback, a change with no stamp, a
delete (a range load's, or the whole comparison's). What a user relies on:

- a run that died before its commit left nothing of itself: the warehouse's rows, the
  watermark and the ledger are as before it;
- the next run ends exactly where a run that never crashed ends (a second warehouse,
  loaded the same way without a crash, is the oracle), the ledger holds each batch once,
  the watermark never went back, and ``verify`` finds the warehouse equal to the source.

Raised in this process on every backend (the `finally` blocks run, as after a lost
connection), and killed for real with SIGKILL before and after the commit
(:mod:`.killed`, a process of its own).
"""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa

from pipeline_assets.core.crash import POINTS, SimulatedCrash
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.db.schema import warehouse_table
from pipeline_assets.core.db.state import batches, id_holes, of_table
from pipeline_assets.core.verify import DIFFERS_FROM_SOURCE
from pipeline_assets.core.warehouse import watermark as wm

from .killed import run as killed_run
from .support import RUNS_IN_PROCESS, crashing_at, database_urls
from .table_sources import TableSource, check, load, stamp
from .tables import CAPTURES, EVENTS, PRICES

SHAPES = {"day_column": CAPTURES, "ids": EVENTS, "whole": PRICES}
LOAD_POINTS = sorted(p for p in POINTS if p.startswith("load_") and p != "load_after_alter")
DELETE_POINTS = {"load_before_delete", "load_after_delete"}
# Every point on SQLite; on the servers three, which reach each part of the batch (the
# stage, the delete step, the commit), at a fraction of the cost of all eight
ON_SERVERS = ("load_after_stage", "load_after_delete", "load_after_commit")
CASES = [pytest.param("sqlite", p, id=f"sqlite-{p}") for p in LOAD_POINTS] + [
    pytest.param(backend, p, marks=mark, id=f"{backend}-{p}")
    for backend, mark in (("postgresql", pytest.mark.postgres), ("mariadb", pytest.mark.mysql))
    for p in ON_SERVERS
]


def at(day: int, hour: int = 10):
    return stamp(f"2026-01-{day:02}T{hour:02}:00")


def first_rows(app: TableSource) -> None:
    """Rows 1–4, each on the day of its number (an id cursor: 1, 2, 3 and 5; 4 not
    committed yet)."""
    for n in (1, 2, 3, 5) if app.spec.counts_ids else (1, 2, 3, 4):
        app.put(n, at(n))


def app_changes(app: TableSource, point: str) -> tuple[str, str] | None:
    """What the app does before the crashed run; the range ``[start, end)`` the run loads
    (None: an incremental run, or a whole comparison)."""
    if app.spec.counts_ids:
        app.put(4, at(4))  # committed late, inside lookback_ids
        app.put(6, at(6))
    elif app.spec.compares_whole:
        app.put(2, at(2), version=1)  # no stamp changes
        app.put(3, at(6))  # moved to the 6th
        app.put(7, at(7))
    else:
        app.put(2, at(20), day=at(6))  # edited on the 20th, moved to the 6th
        app.put(5, at(21))
    if point in DELETE_POINTS or app.spec.compares_whole:
        app.delete(1)  # only a range load or a whole comparison deletes
    if point in DELETE_POINTS and not app.spec.compares_whole:
        return "2026-01-01", "2026-02-01"
    return None


def stored(warehouse, spec) -> list[tuple]:
    table = warehouse_table(spec)
    with warehouse.connect() as conn:
        return sorted(tuple(r) for r in conn.execute(sa.select(table)))


def ledger(warehouse, spec) -> list[str]:
    with warehouse.connect() as conn:
        return (
            conn.execute(sa.select(batches.c.batch_id).where(of_table(batches.c.table_name, spec)))
            .scalars()
            .all()
        )


def state(warehouse, spec) -> tuple:
    """Rows, watermark, ledger and (an id cursor's) remembered holes."""
    with warehouse.connect() as conn:
        holes = conn.execute(
            sa.select(id_holes.c.id, id_holes.c.seen_at).where(id_holes.c.table_name == spec.name)
        ).all()
    mark = wm.current(warehouse, table=spec.name)
    return stored(warehouse, spec), mark, ledger(warehouse, spec), sorted(holes)


def oracle(app: TableSource, tmp_path, span) -> tuple:
    """The rows and watermark of a warehouse loaded the same way, never crashed."""
    warehouse = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}", role="warehouse")
    try:
        load(app, warehouse)
        load(app, warehouse, *(span or ()), allow=True)
        return stored(warehouse, app.spec), wm.current(warehouse, table=app.spec.name)
    finally:
        warehouse.dispose()


def converged(app: TableSource, warehouse, tmp_path, span, before: tuple) -> None:
    """The rows are the oracle's; the watermark too, or (a range load) as before it; the
    ledger holds each batch once, those before the crash among them."""
    rows, mark, ids, _ = state(warehouse, app.spec)
    want_rows, want_mark = oracle(app, tmp_path, span)
    assert (rows, mark) == (want_rows, before[1] if span else want_mark)
    before_ledger = before[2]
    assert len(ids) == len(set(ids)) and set(before_ledger) <= set(ids)
    problems = check(app, warehouse, tmp_path / "files").problems
    assert [p for p in problems if p.kind == DIFFERS_FROM_SOURCE] == []


@pytest.mark.parametrize("backend, point", CASES)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_run_crashed_at_any_point_leaves_nothing_and_the_next_converges(
    shape, backend, point, tmp_path, request
):
    urls = database_urls(backend, tmp_path, request)
    source = make_engine(urls["source"], role="app")
    warehouse = make_engine(urls["warehouse"], role="warehouse")
    request.addfinalizer(source.dispose)
    request.addfinalizer(warehouse.dispose)
    app = TableSource(source, SHAPES[shape])
    app.create()
    first_rows(app)
    load(app, warehouse)
    span = app_changes(app, point)
    before = state(warehouse, app.spec)
    with crashing_at(point), pytest.raises(SimulatedCrash):
        load(app, warehouse, *(span or ()), allow=True)
    after = state(warehouse, app.spec)
    if point == "load_after_commit":  # the acknowledgement was lost, not the batch
        assert after[0] == oracle(app, tmp_path, span)[0]
        assert len(after[2]) == len(before[2]) + 1
    else:
        assert after == before
    rerun = load(app, warehouse, *(span or ()), allow=True)
    # the same window (a range, or the whole table unchanged since) is the same batch
    same = span is not None or app.spec.compares_whole
    assert rerun.skipped == (point == "load_after_commit" and same)
    converged(app, warehouse, tmp_path, span, before)


@pytest.mark.e2e
@pytest.mark.parametrize(
    "shape, point",
    [(shape, "load_before_commit") for shape in sorted(SHAPES)] + [("ids", "load_after_commit")],
)
def test_a_run_killed_for_real_then_rerun_converges(shape, point, tmp_path, request):
    """SIGKILL in a process of its own: the transaction dies with it, or has committed
    (then the rerun reads a new window; the other shapes' commit is raised above)."""
    urls = database_urls("sqlite", tmp_path, request)
    source = make_engine(urls["source"], role="app")
    warehouse = make_engine(urls["warehouse"], role="warehouse")
    request.addfinalizer(source.dispose)
    request.addfinalizer(warehouse.dispose)
    spec = SHAPES[shape]
    app = TableSource(source, spec)
    app.create()
    first_rows(app)
    load(app, warehouse)
    app_changes(app, point)
    before = state(warehouse, spec)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_CRASH")}
    args = ["load-table", spec.name, urls["source"], urls["warehouse"]]
    killed = killed_run(*args, env={**env, **RUNS_IN_PROCESS, "PIPELINE_CRASH_AT": point})
    assert killed.returncode == -9, killed.stderr[-2000:]
    after = state(warehouse, spec)
    if point == "load_after_commit":
        assert after[:2] == oracle(app, tmp_path, None)
    else:
        assert after == before
    rerun = killed_run(*args, env={**env, **RUNS_IN_PROCESS})
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    converged(app, warehouse, tmp_path, None, before)
