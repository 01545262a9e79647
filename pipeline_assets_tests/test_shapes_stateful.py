"""Random histories of every table shape, crashed anywhere, against a twin never crashed.

For a table whose days go by another column (``CAPTURES``), an append-only one
(``EVENTS``) and one without a change stamp (``PRICES``), a Hypothesis state machine
plays the app (rows inserted, changed, moved to another day, stamped late or backdated,
ids committed out of order, deletes) and runs incremental and range loads, each
crashed (raised) at any load crash point or none, then retried or not.

Every load runs against two warehouses: the one under test, and a twin that runs a load
exactly when the one under test committed one (a run that died before its commit never
happened; one that died after it did). After every step both must hold the same rows,
the same watermark and the same ledger (each batch once, same ids, same counts): a
crash leaves nothing of itself, and a retry or the next run ends where an uncrashed
history ends. Which rows each run must read, and what ``verify`` then repairs, are the
property tests of each shape (``test_day_column.py``, ``test_append_only.py``,
``test_whole_table.py``); the day files' crash points, shape-blind, are
``test_stateful.py``'s.

Budget: ``PIPELINE_STATEFUL_EXAMPLES`` histories a shape (default 12) of
``PIPELINE_STATEFUL_STEPS`` steps (default 12), on SQLite files.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pipeline_assets.core.crash import SimulatedCrash
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.errors import DeleteRefused

from .support import crashing_at
from .table_sources import TableSource, load, stamp
from .tables import CAPTURES, EVENTS, PRICES
from .test_shapes_crashes import LOAD_POINTS, state

EXAMPLES = int(os.environ.get("PIPELINE_STATEFUL_EXAMPLES", "0")) or 12
STEPS = int(os.environ.get("PIPELINE_STATEFUL_STEPS", "0")) or 12
START = stamp("2026-01-05T00:00")  # the app's clock at the start of each history

rows = st.integers(1, 12)
days = st.integers(1, 9)  # January 1st…9th
crashes = st.one_of(st.none(), st.sampled_from(LOAD_POINTS))


class ShapeHistories(RuleBasedStateMachine):
    spec = CAPTURES

    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="pa-shapes-"))
        urls = [f"sqlite:///{self.tmp / n}.db" for n in ("app", "warehouse", "twin")]
        self.source = make_engine(urls[0], role="app")
        self.warehouse = make_engine(urls[1], role="warehouse")
        self.twin = make_engine(urls[2], role="warehouse")
        self.app = TableSource(self.source, self.spec)
        self.app.create()
        self.held: dict[int, int] = {}  # row: its version, as the source holds it
        self.clock = START
        for warehouse in (self.warehouse, self.twin):  # an empty first load makes the table
            load(self.app, warehouse)

    def teardown(self):
        for engine in (self.source, self.warehouse, self.twin):
            engine.dispose()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- the app --------------------------------------------------------------------

    @rule(n=rows, day=days, filed=st.booleans(), late_hours=st.sampled_from([0, 0, 30, 200]))
    def app_writes(self, n, day, filed, late_hours):
        """A row inserted or changed: a new version, on a day, stamped now or (an app's
        clock, a slow transaction) hours back. An id cursor: an id never seen is
        committed, whatever ids were read before; a seen one is updated in place."""
        self.clock += timedelta(hours=1)
        version = self.held.get(n, -1) + 1
        at = self.clock - timedelta(hours=late_hours)
        self.app.put(n, at, filed=filed, version=version, day=stamp(f"2026-01-{day:02}T08:00"))
        self.held[n] = version

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def app_deletes(self, data):
        n = data.draw(st.sampled_from(sorted(self.held)))
        self.app.delete(n)
        del self.held[n]

    # --- the runs -------------------------------------------------------------------

    def _both(self, bounds: tuple, allow: bool, point: str | None) -> None:
        """One run against the warehouse under test, crashed at ``point``; the twin runs
        it too when it committed. A refusal (too many deletes) must be the twin's too."""
        try:
            with crashing_at(point) if point else nullcontext():
                load(self.app, self.warehouse, *bounds, allow=allow)
        except SimulatedCrash:
            if point != "load_after_commit":
                return  # it never happened: the twin does not run it
        except DeleteRefused:
            with pytest.raises(DeleteRefused):
                load(self.app, self.twin, *bounds, allow=allow)
            return
        load(self.app, self.twin, *bounds, allow=allow)

    @rule(point=crashes, retry=st.booleans())
    def incremental_load(self, point, retry):
        self._both((), False, point)
        if point and retry:
            self._both((), False, None)

    @rule(
        first=days,
        length=st.integers(1, 4),
        point=crashes,
        retry=st.booleans(),
        allow=st.booleans(),
    )
    def range_load(self, first, length, point, retry, allow):
        bounds = (f"2026-01-{first:02}T00:00", f"2026-01-{first + length:02}T00:00")
        self._both(bounds, allow, point)
        if point and retry:
            self._both(bounds, allow, None)

    # --- the invariant --------------------------------------------------------------

    @invariant()
    def the_warehouse_is_its_uncrashed_twin(self):
        rows_, mark, ledger, holes = state(self.warehouse, self.spec)
        twin_rows, twin_mark, twin_ledger, twin_holes = state(self.twin, self.spec)
        assert (rows_, mark, holes) == (twin_rows, twin_mark, twin_holes)
        assert len(ledger) == len(set(ledger))
        assert sorted(ledger) == sorted(twin_ledger)


def _run(spec) -> None:
    machine = type(f"{spec.name.title()}Histories", (ShapeHistories,), {"spec": spec})
    machine.TestCase.settings = settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    machine.TestCase().runTest()


@pytest.mark.long
@pytest.mark.parametrize("spec", [CAPTURES, EVENTS, PRICES], ids=lambda s: s.name)
def test_any_history_crashed_anywhere_ends_as_its_uncrashed_twin(spec):
    _run(spec)
