"""The sensors' decisions as tables of cases, and the observation on real sources.

A sensor that misses a change leaves a row unloaded until something else runs; one that
sees a change where there is none launches a run that does nothing. The tables pin which
of the two each situation gets: new rows, late rows older than the newest, a watermark
that moved on (nothing new: no second run), a rewind (a run), and which days a refresh
asks for.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import date, datetime

import pytest

from pipeline_assets import demo
from pipeline_assets.core import sensing
from pipeline_assets.core.days import yesterday
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.errors import DatabaseError
from pipeline_assets.core.sensing import DayBlock, Observation, RunView
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, canonical, to_instant
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets_tests.orders import load_orders

from .conftest import NOW


def at(text: str) -> datetime:
    return to_instant(text, UTC)


JAN19, JAN23 = at("2026-01-19"), at("2026-01-23")
T0 = 1_800_000_000.0  # the fixed clock of the sensor ticks (POSIX seconds)
FILES = ORDERS.daily_files[0].name  # the file set a refresh rebuilds: paid_orders
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
        (
            SEEN,
            replace(SEEN, window_start=canonical(at("2026-01-10")), rows=5),
            at("2026-01-10"),
            True,
            False,
        ),
    ],
)
def test_run_or_skip(cursor, seen, current, run, rebase):
    decision = sensing.decide(cursor, seen, current, spec=ORDERS)
    assert (decision.run, decision.rebase) == (run, rebase)
    assert decision.cursor == seen
    assert seen.describe(ORDERS) in decision.reason


def test_run_keys_are_deterministic_and_differ_with_any_field():
    variants = [
        SEEN,
        replace(SEEN, rows=3),
        replace(SEEN, id_sum=1),
        replace(SEEN, newest="x"),
        replace(SEEN, fingerprint=None),
        replace(SEEN, window_start=None),
        FIRST,
    ]
    keys = [sensing.load_run_key(v, None, spec=ORDERS) for v in variants]
    assert len(set(keys)) == len(keys)
    assert sensing.load_run_key(Observation(**vars(SEEN)), None, spec=ORDERS) == keys[0]
    assert all(k.startswith("new-orders-") for k in keys)


@pytest.mark.parametrize(
    "text", [None, "", "{", "[]", '{"v": 99}', '{"v": 1, "bogus": 1}', "12345"]
)
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
    assert sensing.partition_days(touched, first_day=START, last_day=YESTERDAY) == (kept, left_out)


@pytest.mark.parametrize(
    "days, blocks",
    [
        ([], []),
        (["2026-01-24"], [("2026-01-24", "2026-01-24")]),
        (["2026-01-25", "2026-01-24"], [("2026-01-24", "2026-01-25")]),
        # a gap is not rebuilt: exactly the touched days
        (
            ["2026-01-03", "2026-01-08", "2026-01-09", "2026-01-10"],
            [("2026-01-03", "2026-01-03"), ("2026-01-08", "2026-01-10")],
        ),
        # a month boundary is no gap
        (["2026-01-31", "2026-02-01"], [("2026-01-31", "2026-02-01")]),
    ],
)
def test_touched_days_become_blocks_of_consecutive_days(days, blocks):
    assert [(b.first, b.last) for b in sensing.day_blocks(days)] == blocks


def test_refresh_run_keys_name_the_request_and_the_block():
    block = DayBlock("2026-01-24", "2026-01-25")
    assert block.days == 2
    assert (
        sensing.refresh_run_key("0", 42, block, files=FILES)
        == "paid-orders-refresh-0.42-2026-01-24-2026-01-25"
    )
    assert sensing.refresh_run_key("0", 43, block, files=FILES) != sensing.refresh_run_key(
        "0", 42, block, files=FILES
    )
    # a reset cursor (started when the sensor had launched 12 runs) never reuses a key
    assert sensing.refresh_run_key("12", 42, block, files=FILES) != sensing.refresh_run_key(
        "0", 42, block, files=FILES
    )


def test_each_tables_run_keys_carry_its_name():
    """In the UI a run key says which table's sensor asked: ``new-payments-…``,
    ``captured-payments-refresh-…``; orders' keep the prefixes they always had."""
    from pipeline_assets.core.sensing.load_cursor import run_key_prefix

    from .tables import PAYMENTS

    block = DayBlock("2026-01-24", "2026-01-24")
    assert sensing.load_run_key(SEEN, None, spec=ORDERS).startswith("new-orders-")
    assert run_key_prefix(ORDERS) == "new-orders-"
    orders_key = sensing.load_run_key(SEEN, None, spec=ORDERS)
    assert sensing.load_run_key(SEEN, None, spec=PAYMENTS) == "new-payments-" + (
        orders_key.removeprefix("new-orders-")
    )
    assert (
        sensing.refresh_run_key("0", 1, block, "captured_payments")
        == "captured-payments-refresh-0.1-2026-01-24-2026-01-24"
    )


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

    assert yesterday(now, zone(tz)) == last


# --- what became of a requested run: the healing decisions ------------------------------


def run(status, at=T0 + 1, **kw):
    return RunView(f"r{at:.0f}", status, at, **kw)


@pytest.mark.parametrize(
    "runs, now, state",
    [
        # succeeded: the request is settled
        ([run("SUCCESS")], T0 + 10, "succeeded"),
        # still running: queued, launching, started — request nothing more
        ([run("QUEUED")], T0 + 10, "in flight"),
        ([run("NOT_STARTED")], T0 + 10, "in flight"),
        ([run("STARTING")], T0 + 10, "in flight"),
        ([run("STARTED")], T0 + 10, "in flight"),
        ([run("CANCELING")], T0 + 10, "in flight"),
        # requested, then failed / canceled (a killed worker, a user's cancel): again
        ([run("FAILURE", ended_at=T0 + 5)], T0 + 10, "failed"),
        ([run("CANCELED", ended_at=T0 + 5)], T0 + 10, "canceled"),
        # retried by Dagster: a failed run whose retry is promised, then launched
        ([run("FAILURE", ended_at=T0 + 5, will_retry=True)], T0 + 10, "awaiting Dagster's retry"),
        ([run("FAILURE", ended_at=T0 + 5), run("QUEUED", at=T0 + 6)], T0 + 10, "in flight"),
        ([run("FAILURE", ended_at=T0 + 5), run("STARTED", at=T0 + 6)], T0 + 10, "in flight"),
        ([run("FAILURE", ended_at=T0 + 5), run("SUCCESS", at=T0 + 6)], T0 + 10, "succeeded"),
        # retries exhausted: every run failed, the last one without a retry promised
        (
            [
                run("FAILURE", ended_at=T0 + 5, will_retry=True),
                run("FAILURE", at=T0 + 6, ended_at=T0 + 8),
            ],
            T0 + 10,
            "failed",
        ),
        # a retry promised that never came (the daemon is down): stop waiting after grace
        ([run("FAILURE", ended_at=T0 + 5, will_retry=True)], T0 + 66, "failed"),
        # no run yet: the daemon creates it right after the tick; gone after grace
        ([], T0 + 15, "in flight"),
        ([], T0 + 61, "lost"),
    ],
)
def test_what_became_of_a_request(runs, now, state):
    """The decision table of both sensors' healing: from the runs carrying a request's
    run key (the requested run and Dagster's retries of it), whether its work landed,
    may still land (wait), or will not (request it again)."""
    outcome = sensing.request_outcome(runs, requested_at=T0, now=now)
    assert outcome.state == state
    assert (outcome.landed, outcome.busy, outcome.again) == (
        state == "succeeded",
        state in ("in flight", "awaiting Dagster's retry"),
        state in ("failed", "canceled", "lost"),
    )


SEEN2 = replace(SEEN, rows=3, id_sum=397)
PENDING = sensing.LoadCursor(SEEN, sensing.Request("new-orders-k1", T0, 1), "new-orders-k1")
SAME = sensing.decide(SEEN, SEEN, JAN19, spec=ORDERS)  # the source did not change
CHANGED = sensing.decide(SEEN, SEEN2, JAN19, spec=ORDERS)  # it did
MOVED = sensing.Decision(
    False, replace(SEEN, window_start=canonical(JAN23)), "moved", rebase=True
)  # the watermark moved on, nothing new


def outcome(state):
    return sensing.Outcome(state, f"run r1 {state}")


@pytest.mark.parametrize(
    "result, decision, run, attempt, pending",
    [
        # succeeded, nothing new: settled, no run
        ("succeeded", SAME, False, None, False),
        ("succeeded", MOVED, False, None, False),
        # succeeded, and the source changed since it was requested: a new load
        ("succeeded", CHANGED, True, 1, True),
        # requested then failed / canceled / lost: again, even though nothing changed
        ("failed", SAME, True, 2, True),
        ("canceled", SAME, True, 2, True),
        ("lost", SAME, True, 2, True),
        # failed after committing (the watermark moved): again, over the new window
        ("failed", MOVED, True, 2, True),
        # still running, or Dagster will retry it: wait, whatever the source did
        ("in flight", CHANGED, False, 1, True),
        ("awaiting Dagster's retry", SAME, False, 1, True),
    ],
)
def test_run_or_wait_from_the_pending_request(result, decision, run, attempt, pending):
    tick = sensing.decide_load(
        PENDING,
        outcome(result),
        None if result in ("in flight", "awaiting Dagster's retry") else decision,
        T0 + 15,
        spec=ORDERS,
    )
    assert tick.run == run
    assert (tick.cursor.pending is not None) == pending
    if pending:
        assert tick.cursor.pending.attempt == attempt
    if run:  # a new key, never one used before; remembered for the next one
        assert tick.run_key not in (PENDING.pending.key, None)
        assert tick.cursor.last_key == tick.run_key
        assert tick.cursor.pending.requested_at == T0 + 15
    else:
        assert tick.cursor.last_key == PENDING.last_key


@pytest.mark.parametrize(
    "failures, delay",
    [(0, 0), (1, 0), (3, 0), (5, 0), (6, 30), (7, 60), (10, 480), (11, 600), (30, 600)],
)
def test_work_that_keeps_failing_is_requested_again_ever_more_slowly(failures, delay):
    """A killed run is requested again at once; a bad row or a full disk that fails every
    attempt the same way must not launch a run every tick forever."""
    assert sensing.retry_delay(failures) == delay


@pytest.mark.parametrize(
    "attempt, now, decision, run",
    [
        (5, T0 + 10, SAME, True),  # five in a row: still at once
        (6, T0 + 10, SAME, False),  # the sixth failure: wait 30 s after it ended...
        (6, T0 + 36, SAME, True),  # ...then again
        (6, T0 + 10, CHANGED, True),  # the source changed (the row fixed?): at once
    ],
)
def test_a_load_failing_again_and_again_backs_off(attempt, now, decision, run):
    cursor = replace(PENDING, pending=replace(PENDING.pending, attempt=attempt))
    failed = sensing.Outcome("failed", "run r1 failed", ended_at=T0 + 5)
    tick = sensing.decide_load(cursor, failed, decision, now, spec=ORDERS)
    assert tick.run == run
    if not run:
        assert "backing off" in tick.reason and tick.cursor == cursor


def test_a_rebuild_failing_again_and_again_backs_off():
    cursor = owing(7, {"2026-01-24": 5, "2026-01-25": 7}, R1)
    failed = {R1[0]: sensing.Outcome("failed", "run r1 failed", ended_at=T0 + 5)}
    cursor = replace(cursor, failures={"2026-01-24": (5, T0), "2026-01-25": (5, T0)})
    tick = sensing.refresh_tick(cursor, [], failed, T0 + 10, files=FILES)
    assert tick.requests == [] and tick.cursor.failures["2026-01-24"] == (6, T0 + 5)
    assert "backing off" in " ".join(tick.notes)
    later = sensing.refresh_tick(tick.cursor, [], {}, T0 + 36, files=FILES)
    assert [(r.first, r.last) for r in later.requests] == [("2026-01-24", "2026-01-25")]
    done = sensing.refresh_tick(
        later.cursor,
        [],
        {later.requests[0].key: sensing.Outcome("succeeded", "ok")},
        T0 + 80,
        files=FILES,
    )
    assert done.cursor.owed == {} and done.cursor.failures == {}


def test_a_request_nothing_is_known_of_is_asked_again_after_the_grace():
    """The run of a request was deleted from the instance, or never appeared: the outcomes
    hold nothing of it. It is waited for as long as a run takes to appear, then dropped
    with a note on the tick and its days requested again under a new key, so that one
    lost run never stops every later rebuild of the file set."""
    cursor = owing(7, {"2026-01-24": 5, "2026-01-25": 7}, R1)
    waiting = sensing.refresh_tick(cursor, [], {}, T0 + sensing.GRACE_SECONDS - 1, files=FILES)
    assert waiting.requests == [] and waiting.cursor.pending == cursor.pending
    lost = sensing.refresh_tick(cursor, [], {}, T0 + sensing.GRACE_SECONDS + 1, files=FILES)
    [again] = lost.requests
    assert ((again.first, again.last), again.key != R1[0]) == (("2026-01-24", "2026-01-25"), True)
    assert lost.cursor.pending == (again,) and lost.cursor.owed == cursor.owed
    assert any(f"no run appeared within {sensing.GRACE_SECONDS + 1:.0f} s" in n for n in lost.notes)


def test_load_run_keys_never_repeat_along_a_cursor():
    """The same observation requested again, or seen again later, gets a new key: Dagster
    launches a key once, so a repeated key would be a request that never runs."""
    first = sensing.load_run_key(SEEN, None, seed="0", spec=ORDERS)
    second = sensing.load_run_key(SEEN, first, spec=ORDERS)
    third = sensing.load_run_key(SEEN, second, spec=ORDERS)
    assert len({first, second, third}) == 3
    assert sensing.load_run_key(SEEN, first, spec=ORDERS) == second  # deterministic
    # a reset cursor starts from the number of runs launched so far: other keys
    assert sensing.load_run_key(SEEN, None, seed="7", spec=ORDERS) != first
    assert all(k.startswith("new-orders-") for k in (first, second, third))


@pytest.mark.parametrize("text", [None, "", "{", "[]", '{"v": 2, "seen": 5}', "12345"])
def test_an_unreadable_load_cursor_starts_over(text):
    assert sensing.LoadCursor.from_cursor(text) == sensing.LoadCursor()


def test_the_load_cursor_round_trips():
    assert sensing.LoadCursor.from_cursor(PENDING.to_cursor()) == PENDING


# --- the refresh: the days owed ---------------------------------------------------------


def touched(storage_id, *days, batch="b"):
    return sensing.Touched(storage_id, tuple(days), batch)


def owing(after, owed, *pending, requests=None):
    pending = tuple(
        sensing.RefreshRequest(key, first, last, covers, T0) for key, first, last, covers in pending
    )
    return sensing.RefreshCursor(
        after,
        {d: (sid, "b") for d, sid in owed.items()},
        pending,
        requests if requests is not None else len(pending),
    )


R1 = ("paid-orders-refresh-0.1-2026-01-24-2026-01-25", "2026-01-24", "2026-01-25", 7)


@pytest.mark.parametrize(
    "cursor, events, result, requested, owed_after",
    [
        # new loads: their days become owed and requested in blocks
        (
            owing(None, {}),
            [touched(5, "2026-01-24"), touched(7, "2026-01-25", "2026-01-20")],
            None,
            [("2026-01-20", "2026-01-20"), ("2026-01-24", "2026-01-25")],
            {"2026-01-20": 7, "2026-01-24": 5, "2026-01-25": 7},
        ),
        # succeeded: the days are paid
        (owing(7, {"2026-01-24": 5, "2026-01-25": 7}, R1), [], "succeeded", [], {}),
        # requested then failed / canceled / lost: the same days again, under a new key
        (
            owing(7, {"2026-01-24": 5, "2026-01-25": 7}, R1),
            [],
            "failed",
            [("2026-01-24", "2026-01-25")],
            {"2026-01-24": 5, "2026-01-25": 7},
        ),
        (
            owing(7, {"2026-01-24": 5, "2026-01-25": 7}, R1),
            [],
            "canceled",
            [("2026-01-24", "2026-01-25")],
            {"2026-01-24": 5, "2026-01-25": 7},
        ),
        (
            owing(7, {"2026-01-24": 5, "2026-01-25": 7}, R1),
            [],
            "lost",
            [("2026-01-24", "2026-01-25")],
            {"2026-01-24": 5, "2026-01-25": 7},
        ),
        # still running (or Dagster will retry it): nothing is requested, not even days
        # it does not cover: they go in the next round, once it has ended
        (
            owing(7, {"2026-01-24": 5, "2026-01-25": 7}, R1),
            [touched(9, "2026-01-25", "2026-01-27")],
            "in flight",
            [],
            {"2026-01-24": 5, "2026-01-25": 9, "2026-01-27": 9},
        ),
        # ended: the days owed meanwhile go together, in blocks
        (
            owing(9, {"2026-01-24": 5, "2026-01-25": 9, "2026-01-27": 9}, R1),
            [],
            "succeeded",
            [("2026-01-25", "2026-01-25"), ("2026-01-27", "2026-01-27")],
            {"2026-01-25": 9, "2026-01-27": 9},
        ),
        (
            owing(7, {"2026-01-24": 5, "2026-01-25": 7}, R1),
            [],
            "awaiting Dagster's retry",
            [],
            {"2026-01-24": 5, "2026-01-25": 7},
        ),
        # succeeded, but a load touched the 25th after it was requested: the 25th stays owed
        (
            owing(9, {"2026-01-24": 5, "2026-01-25": 9}, R1),
            [],
            "succeeded",
            [("2026-01-25", "2026-01-25")],
            {"2026-01-25": 9},
        ),
    ],
)
def test_the_refresh_owes_days_until_a_run_rebuilt_them(
    cursor, events, result, requested, owed_after
):
    """The refresh's decision table: a day leaves the cursor only when a successful run
    requested after its last load has rebuilt it; a day is never in two runs at once."""
    outcomes = {r.key: outcome(result) for r in cursor.pending} if result else {}
    tick = sensing.refresh_tick(cursor, events, outcomes, T0 + 10, files=FILES)
    assert [(r.first, r.last) for r in tick.requests] == requested
    assert {d: mark[0] for d, mark in tick.cursor.owed.items()} == owed_after
    keys = [r.key for r in tick.requests]
    assert not set(keys) & {r.key for r in cursor.pending}  # new keys, never reused
    busy = [d for r in tick.cursor.pending for d in r.days]
    assert len(busy) == len(set(busy))  # never two requests over one day
    assert tick.cursor.requests == cursor.requests + len(tick.requests)
    if events:
        assert tick.cursor.after == max(e.storage_id for e in events)


def test_a_steady_stream_of_loads_is_rebuilt_in_rounds():
    """A load every tick (10 s), each touching today, a late day and the old days of
    rows the app updated, while the file set's writers run one at a time (its pool), 12 s
    each. Asking for every free block at once queued runs faster than they ended, so a day
    touched again while its run waited got a second run (the soak's queue of file runs
    grew to 20 over an hour). The sensor asks for one round at a time: nothing while a
    request is in flight, then every owed day in one round. Once the loads stop, every
    day touched is rebuilt by a run requested after its last load."""
    rng = random.Random(3)
    days = [f"2026-01-{d:02d}" for d in range(1, 32)]
    cursor, storage_id, ends, last_load, rebuilt = sensing.RefreshCursor(), 0, {}, {}, {}
    writer_free_at = 0.0  # the pool: one run writes at a time, in the order requested
    for tick in range(600):
        loads = []
        if tick < 360:  # the app writes
            storage_id += 1
            today = min(2 + tick // 12, 30)
            touched_days = {days[today], days[today - rng.choice([0, 1, 2])]}
            touched_days |= {days[rng.randrange(today + 1)] for _ in range(rng.choice([0, 1, 2]))}
            loads = [touched(storage_id, *sorted(touched_days))]
            last_load |= {day: storage_id for day in touched_days}
        outcomes = {
            r.key: outcome("succeeded" if tick >= ends[r.key] else "in flight")
            for r in cursor.pending
        }
        for r in cursor.pending:
            if outcomes[r.key].landed:  # what this run rebuilt: the loads it came after
                rebuilt |= {day: max(rebuilt.get(day, 0), r.covers) for day in r.days}
        in_flight = any(o.busy for o in outcomes.values())
        result = sensing.refresh_tick(cursor, loads, outcomes, T0 + 10 * tick, files=FILES)
        assert not (in_flight and result.requests)  # nothing asked while a run may work
        assert len({r.requested_at for r in result.cursor.pending}) <= 1  # one round
        for r in result.requests:
            writer_free_at = max(writer_free_at, tick) + 1.2
            ends[r.key] = writer_free_at
        cursor = result.cursor
    assert not cursor.owed and not cursor.pending
    assert all(rebuilt.get(day, 0) >= load for day, load in last_load.items())


def test_the_refresh_cursor_round_trips_and_reads_the_first_version():
    cursor = replace(
        owing(7, {"2026-01-24": 5, "2026-01-25": 7}, R1), failures={"2026-01-24": (2, T0)}
    )
    assert sensing.RefreshCursor.from_cursor(cursor.to_cursor()) == cursor
    assert sensing.RefreshCursor.from_cursor("42") == sensing.RefreshCursor(after=42)
    assert sensing.RefreshCursor.from_cursor("{") == sensing.RefreshCursor()


# --- the observation on real sources ------------------------------------------------------


def test_what_the_observation_notices(engines):
    """Each change the app can make, against the observation of the window from the 19th."""
    source, _ = engines
    demo.init(source)

    def look():
        return sensing.observe(source, UTC, JAN19, spec=ORDERS)

    def app(order_id, status, updated_at, amount="30.00"):
        demo.set_order(
            source, order_id, status=status, amount=amount, updated_at=updated_at, tz=UTC
        )

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
    assert sensing.observe(source, UTC, JAN23, spec=ORDERS) != before


def test_the_first_look_reads_only_the_index_ends(engines):
    source, _ = engines
    demo.init(source)
    first = sensing.observe(source, UTC, None, spec=ORDERS)
    assert first == Observation(None, newest="2026-01-21", max_id=106)


class Runs:
    """What the Dagster instance knows of the sensor's runs, by run key: plain values."""

    def __init__(self):
        self.by_key: dict[str, list[RunView]] = {}

    def add(self, key: str, status: str, at: float = T0 + 1, **kw) -> None:
        run_id = f"run-{sum(map(len, self.by_key.values())) + 1}"
        self.by_key.setdefault(key, []).append(RunView(run_id, status, at, **kw))

    def __call__(self, key: str) -> list[RunView]:
        return self.by_key.get(key, [])


def test_a_tick_follows_the_watermark_without_a_second_run(engines):
    """Load after a run request: the next tick sees nothing new and moves its cursor on."""
    source, warehouse = engines
    demo.init(source)
    runs = Runs()

    def tick(cursor, now=T0):
        return sensing.check_source(
            source,
            warehouse,
            tz=UTC,
            lookback_days=2,
            cursor=cursor,
            runs_for=runs,
            now=now,
            spec=ORDERS,
        )

    first = tick(None)
    assert first.run and first.observation.window_start is None
    waiting = tick(first.cursor.to_cursor(), T0 + 15)  # its run is not created yet
    assert not waiting.run and "not created yet" in waiting.reason

    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    runs.add(first.run_key, "SUCCESS")
    followed = tick(first.cursor.to_cursor(), T0 + 30)
    assert (followed.run, followed.rebase) == (False, True)
    assert (
        followed.observation.start
        == wm.window_start(wm.current(warehouse, table=ORDERS.name), 2)
        == JAN19
    )
    assert followed.cursor.pending is None and "succeeded" in followed.reason
    steady = tick(followed.cursor.to_cursor(), T0 + 45)
    assert (steady.run, steady.rebase) == (False, False)

    demo.set_order(source, 186, status="paid", amount="30.00", updated_at="2026-01-20", tz=UTC)
    late = tick(steady.cursor.to_cursor(), T0 + 60)
    assert late.run and late.run_key not in (first.run_key, None)

    # the load moves the watermark? No: 186 is older than the newest. Same window, and
    # after the load nothing changed, so the tick skips.
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    runs.add(late.run_key, "SUCCESS", at=T0 + 61)
    assert not tick(late.cursor.to_cursor(), T0 + 75).run


def test_a_killed_load_is_requested_again_with_nothing_new_in_the_source(engines):
    """The trap of a cursor that advances on *request*: the last run dies, the app is
    quiet, and nothing would ever load the rows. Each death asks again, under a new key;
    a load that committed but died before saying so (the lost acknowledgement) too."""
    source, warehouse = engines
    demo.init(source)
    runs = Runs()

    def tick(cursor, now):
        return sensing.check_source(
            source,
            warehouse,
            tz=UTC,
            lookback_days=2,
            cursor=cursor.to_cursor(),
            runs_for=runs,
            now=now,
            spec=ORDERS,
        )

    first = sensing.check_source(
        source, warehouse, tz=UTC, lookback_days=2, cursor=None, runs_for=runs, now=T0, spec=ORDERS
    )
    runs.add(first.run_key, "FAILURE", ended_at=T0 + 5)  # killed before it committed
    second = tick(first.cursor, T0 + 15)
    assert second.run and second.cursor.pending.attempt == 2
    assert second.run_key != first.run_key and "failed" in second.reason
    assert tick(first.cursor, T0 + 15).run_key == second.run_key  # same cursor, same key

    runs.add(second.run_key, "CANCELED", at=T0 + 16, ended_at=T0 + 20)
    third = tick(second.cursor, T0 + 30)
    assert third.run and third.cursor.pending.attempt == 3 and "canceled" in third.reason
    assert len({first.run_key, second.run_key, third.run_key}) == 3

    # the third one commits the load, then dies before Dagster hears of it
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    runs.add(third.run_key, "FAILURE", at=T0 + 31, ended_at=T0 + 40)
    fourth = tick(third.cursor, T0 + 45)
    assert fourth.run and fourth.observation.start == JAN19  # asks again: the days it
    # touched must be announced by a load that succeeds
    runs.add(fourth.run_key, "SUCCESS", at=T0 + 46)
    assert not tick(fourth.cursor, T0 + 60).run


def test_a_version_1_cursor_reads_as_settled(engines):
    """A cursor written before requests were kept: what it saw, nothing pending."""
    source, warehouse = engines
    demo.init(source)
    state = sensing.LoadCursor.from_cursor(FIRST.to_cursor())
    assert state == sensing.LoadCursor(seen=FIRST)
    steady = sensing.check_source(
        source, warehouse, tz=UTC, lookback_days=2, cursor=FIRST.to_cursor(), spec=ORDERS
    )
    assert not steady.run and steady.cursor.seen == FIRST


def test_a_missing_sqlite_database_is_reported_not_created(tmp_path):
    url = f"sqlite:///{tmp_path / 'app.db'}"
    warehouse = make_engine(f"sqlite:///{tmp_path / 'warehouse.db'}", role="warehouse")
    with pytest.raises(DatabaseError, match="pipeline-assets demo init") as refused:
        make_engine(url, role="source")
    assert f"the source database {tmp_path / 'app.db'} does not exist" in str(refused.value)
    assert not (tmp_path / "app.db").exists()
    app = make_engine(url, role="app")
    demo.init(app)  # the app makes its database; then the pipeline reads it
    source = make_engine(url, role="source")
    with source.begin() as conn:  # an empty database: the app's table is not there yet
        conn.exec_driver_sql("ALTER TABLE orders RENAME TO orders_later")
    with pytest.raises(DatabaseError, match="pipeline-assets demo init"):
        sensing.check_source(source, warehouse, tz=UTC, lookback_days=2, cursor=None, spec=ORDERS)
    with source.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE orders_later RENAME TO orders")
    assert sensing.check_source(
        source, warehouse, tz=UTC, lookback_days=2, cursor=None, spec=ORDERS
    ).run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]
    app.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("updated_type", ["TIMESTAMPTZ", "TIMESTAMP", "DATE", "TEXT"])
def test_the_observation_on_native_postgres_columns(postgres, updated_type):
    """The same question in the column's own type: an index range, and a fingerprint."""
    source = make_engine(postgres.url("source"), role="app")
    with source.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE orders (order_id BIGINT PRIMARY KEY, status TEXT, "
            f"amount NUMERIC(12, 2), updated_at {updated_type})"
        )
        conn.exec_driver_sql("CREATE INDEX orders_updated_at_idx ON orders (updated_at)")
        conn.exec_driver_sql(
            "INSERT INTO orders VALUES (1, 'paid', 40.00, '2026-01-10'), "
            "(2, 'paid', 12.50, '2026-01-21'), (3, 'paid', 5.00, '2026-01-22')"
        )
    try:
        first = sensing.observe(source, UTC, JAN19, spec=ORDERS)
        assert (first.rows, first.id_sum) == (2, 5)
        assert first.newest.startswith("2026-01-22") and first.fingerprint is not None
        with source.begin() as conn:  # re-set updated_at of a row already in the window
            conn.exec_driver_sql("UPDATE orders SET updated_at = '2026-01-20' WHERE order_id = 2")
        second = sensing.observe(source, UTC, JAN19, spec=ORDERS)
        assert (second.rows, second.id_sum, second.newest) == (
            first.rows,
            first.id_sum,
            first.newest,
        )
        assert second.fingerprint != first.fingerprint
        assert sensing.observe(source, UTC, None, spec=ORDERS) == Observation(
            None, newest=first.newest, max_id=3
        )
    finally:
        source.dispose()
