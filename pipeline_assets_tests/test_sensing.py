"""The sensors' decisions as tables of cases, and the observation on real sources.

A sensor that misses a change leaves a row unloaded until something else runs; one that
sees a change where there is none launches a run that does nothing. The tables pin which
of the two each situation gets: new rows, late rows older than the newest, a watermark
that moved on (nothing new: no second run), a rewind (a run), and which days a refresh
asks for.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime

import pytest

from pipeline_assets.core import demo, sensing
from pipeline_assets.core import watermark as wm
from pipeline_assets.core.db import DatabaseError, make_engine
from pipeline_assets.core.load import load_orders
from pipeline_assets.core.sensing import DayBlock, Observation
from pipeline_assets.core.times import UTC, canonical, to_instant

from .conftest import NOW


def at(text: str) -> datetime:
    return to_instant(text, UTC)


JAN19, JAN23 = at("2026-01-19"), at("2026-01-23")
SEEN = Observation(canonical(JAN19), rows=2, id_sum=211, newest="2026-01-21", fingerprint=7)
FIRST = Observation(None, newest="2026-01-21", max_id=106)


@pytest.mark.parametrize(
    "cursor, current, expected",
    [
        (None, None, None),  # nothing seen, nothing loaded: the whole table's two ends
        (None, JAN19, JAN19),
        (SEEN, JAN19, JAN19),  # the usual tick: same window
        (SEEN, JAN23, JAN19),  # a load moved the watermark: look at the old window again
        (FIRST, JAN19, None),  # the first load happened: compare the index ends again
        (SEEN, at("2026-01-10"), at("2026-01-10")),  # a rewind: look at the new window
        (SEEN, None, None),  # an emptied warehouse: everything again
    ],
)
def test_which_window_a_tick_observes(cursor, current, expected):
    assert sensing.observation_start(cursor, current) == expected


@pytest.mark.parametrize(
    "cursor, seen, current, run, rebase",
    [
        (None, SEEN, JAN19, True, False),  # first tick: load (a no-op if all is loaded)
        (SEEN, SEEN, JAN19, False, False),  # unchanged: skip
        (SEEN, replace(SEEN, rows=3, id_sum=397, newest="2026-01-24"), JAN19, True, False),
        # a late row older than the newest: count and id sum change, newest does not
        (SEEN, replace(SEEN, rows=3, id_sum=397), JAN19, True, False),
        # an app update re-setting updated_at of a row in the window, not to the newest
        (SEEN, replace(SEEN, fingerprint=8), JAN19, True, False),
        # the watermark moved on and the old window is unchanged: follow it, no run
        (SEEN, SEEN, JAN23, False, True),
        (FIRST, FIRST, JAN19, False, True),
        # the watermark moved on and the old window changed since: load again
        (SEEN, replace(SEEN, rows=3), JAN23, True, False),
        (FIRST, replace(FIRST, max_id=186), JAN19, True, False),
        # a rewind: the window starts earlier, so the observation differs
        (SEEN, replace(SEEN, window_start=canonical(at("2026-01-10")), rows=5),
         at("2026-01-10"), True, False),
    ],
)
def test_run_or_skip(cursor, seen, current, run, rebase):
    decision = sensing.decide(cursor, seen, current)
    assert (decision.run, decision.rebase) == (run, rebase)
    assert decision.cursor == seen
    assert decision.run_key == (seen.run_key if run else None)
    assert seen.describe() in decision.reason


def test_run_keys_are_deterministic_and_differ_with_any_field():
    variants = [SEEN, replace(SEEN, rows=3), replace(SEEN, id_sum=1), replace(SEEN, newest="x"),
                replace(SEEN, fingerprint=None), replace(SEEN, window_start=None), FIRST]
    keys = [v.run_key for v in variants]
    assert len(set(keys)) == len(keys)
    assert Observation(**vars(SEEN)).run_key == SEEN.run_key
    assert all(k.startswith("new-orders-") for k in keys)


@pytest.mark.parametrize("text", [None, "", "{", "[]", '{"v": 99}', '{"v": 1, "bogus": 1}',
                                  "12345"])
def test_an_unreadable_cursor_counts_as_a_first_look(text):
    assert Observation.from_cursor(text) is None


@pytest.mark.parametrize("obs", [SEEN, FIRST, Observation(None)])
def test_the_cursor_round_trips(obs):
    assert Observation.from_cursor(obs.to_cursor()) == obs


# --- the refresh: which days, in how many runs ------------------------------------------

START, YESTERDAY = date(2026, 1, 1), date(2026, 1, 25)


@pytest.mark.parametrize(
    "touched, kept, left_out",
    [
        ([], [], []),
        (["2026-01-24"], ["2026-01-24"], []),
        (["2026-01-25", "2026-01-24", "2026-01-24"], ["2026-01-24", "2026-01-25"], []),
        # today (the 26th) has no partition yet; the daily schedule builds it tomorrow
        (["2026-01-26", "2026-01-24"], ["2026-01-24"], ["2026-01-26"]),
        # before PARTITIONS_START_DATE: never a partition
        (["2025-12-31", "2026-01-01"], ["2026-01-01"], ["2025-12-31"]),
    ],
)
def test_only_days_that_exist_as_partitions_are_asked_for(touched, kept, left_out):
    assert sensing.partition_days(touched, first_day=START, last_day=YESTERDAY) == \
        (kept, left_out)


@pytest.mark.parametrize(
    "days, blocks",
    [
        ([], []),
        (["2026-01-24"], [("2026-01-24", "2026-01-24")]),
        (["2026-01-25", "2026-01-24"], [("2026-01-24", "2026-01-25")]),
        # a gap is not rebuilt: exactly the touched days
        (["2026-01-03", "2026-01-08", "2026-01-09", "2026-01-10"],
         [("2026-01-03", "2026-01-03"), ("2026-01-08", "2026-01-10")]),
        # a month boundary is no gap
        (["2026-01-31", "2026-02-01"], [("2026-01-31", "2026-02-01")]),
    ],
)
def test_touched_days_become_blocks_of_consecutive_days(days, blocks):
    assert [(b.first, b.last) for b in sensing.day_blocks(days)] == blocks


def test_refresh_run_keys_name_the_event_and_the_block():
    block = DayBlock("2026-01-24", "2026-01-25")
    assert block.days == 2
    assert sensing.refresh_run_key(42, block) == "paid-orders-refresh-42-2026-01-24-2026-01-25"
    assert sensing.refresh_run_key(43, block) != sensing.refresh_run_key(42, block)


@pytest.mark.parametrize(
    "now, tz, last",
    [
        (datetime(2026, 1, 26, 0, 5, tzinfo=UTC), "UTC", date(2026, 1, 25)),
        # 00:05 UTC on the 26th is still the 25th in New York: the 24th is the newest
        (datetime(2026, 1, 26, 0, 5, tzinfo=UTC), "America/New_York", date(2026, 1, 24)),
    ],
)
def test_the_newest_partition_is_yesterday_in_the_pipeline_zone(now, tz, last):
    from pipeline_assets.core.times import zone
    assert sensing.last_partition_day(now, zone(tz)) == last


# --- the observation on real sources ------------------------------------------------------

def test_what_the_observation_notices(engines):
    """Each change the app can make, against the observation of the window from the 19th."""
    source, _ = engines
    demo.init(source)

    def look():
        return sensing.observe(source, UTC, JAN19)

    def app(order_id, status, updated_at, amount="30.00"):
        demo.set_order(source, order_id, status=status, amount=amount, updated_at=updated_at,
                       tz=UTC)

    base = look()
    assert (base.rows, base.id_sum, base.newest) == (2, 105 + 106, "2026-01-21")
    assert look() == base  # same source, same answer

    app(186, "paid", "2026-01-20")  # a late row, older than the newest
    late = look()
    assert (late.rows, late.newest) == (3, "2026-01-21") and late != base

    app(186, "paid", "2026-01-20T09:30:00")  # re-set updated_at, not to the newest
    reset = look()
    assert (reset.rows, reset.id_sum, reset.newest) == (late.rows, late.id_sum, late.newest)
    assert reset.fingerprint != late.fingerprint

    app(104, "paid", "2026-01-22T08:00:00+00:00", amount="12.75")  # moved into the window
    assert look().rows == 4

    # the documented blind spot: a new status with updated_at left alone
    before = look()
    app(186, "refunded", "2026-01-20T09:30:00")
    assert look() == before

    # the window's own start is part of the answer
    assert sensing.observe(source, UTC, JAN23) != before


def test_the_first_look_reads_only_the_index_ends(engines):
    source, _ = engines
    demo.init(source)
    first = sensing.observe(source, UTC, None)
    assert first == Observation(None, newest="2026-01-21", max_id=106)


def test_a_tick_follows_the_watermark_without_a_second_run(engines):
    """Load after a run request: the next tick sees nothing new and moves its cursor on."""
    source, warehouse = engines
    demo.init(source)

    def tick(cursor):
        return sensing.check_source(source, warehouse, tz=UTC, lookback_days=2, cursor=cursor)

    first = tick(None)
    assert first.run and first.cursor.window_start is None
    assert not tick(first.cursor.to_cursor()).run

    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    followed = tick(first.cursor.to_cursor())
    assert (followed.run, followed.rebase) == (False, True)
    assert followed.cursor.start == wm.window_start(wm.current(warehouse), 2) == JAN19
    steady = tick(followed.cursor.to_cursor())
    assert (steady.run, steady.rebase) == (False, False)

    demo.set_order(source, 186, status="paid", amount="30.00", updated_at="2026-01-20", tz=UTC)
    late = tick(steady.cursor.to_cursor())
    assert late.run and late.run_key not in (first.run_key, None)

    # the load moves the watermark? No: 186 is older than the newest. Same window, and
    # after the load nothing changed, so the tick skips.
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    assert not tick(late.cursor.to_cursor()).run


def test_a_missing_sqlite_database_is_reported_not_created(tmp_path):
    source = make_engine(f"sqlite:///{tmp_path / 'app.db'}", role="source")
    warehouse = make_engine(f"sqlite:///{tmp_path / 'warehouse.db'}", role="warehouse")
    with pytest.raises(DatabaseError, match="pipeline-assets demo init"):
        sensing.check_source(source, warehouse, tz=UTC, lookback_days=2, cursor=None)
    demo.init(source)
    assert sensing.check_source(source, warehouse, tz=UTC, lookback_days=2, cursor=None).run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


@pytest.mark.postgres
@pytest.mark.parametrize("updated_type", ["TIMESTAMPTZ", "TIMESTAMP", "DATE", "TEXT"])
def test_the_observation_on_native_postgres_columns(postgres, updated_type):
    """The same question in the column's own type: an index range, and a fingerprint."""
    source = make_engine(postgres.url("source"), role="source")
    with source.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE orders (order_id BIGINT PRIMARY KEY, status TEXT, "
                             f"amount NUMERIC(12, 2), updated_at {updated_type})")
        conn.exec_driver_sql("CREATE INDEX orders_updated_at_idx ON orders (updated_at)")
        conn.exec_driver_sql("INSERT INTO orders VALUES (1, 'paid', 40.00, '2026-01-10'), "
                             "(2, 'paid', 12.50, '2026-01-21'), (3, 'paid', 5.00, '2026-01-22')")
    try:
        first = sensing.observe(source, UTC, JAN19)
        assert (first.rows, first.id_sum) == (2, 5)
        assert first.newest.startswith("2026-01-22") and first.fingerprint is not None
        with source.begin() as conn:  # re-set updated_at of a row already in the window
            conn.exec_driver_sql("UPDATE orders SET updated_at = '2026-01-20' "
                                 "WHERE order_id = 2")
        second = sensing.observe(source, UTC, JAN19)
        assert (second.rows, second.id_sum, second.newest) == \
            (first.rows, first.id_sum, first.newest)
        assert second.fingerprint != first.fingerprint
        assert sensing.observe(source, UTC, None) == Observation(
            None, newest=first.newest, max_id=3)
    finally:
        source.dispose()
