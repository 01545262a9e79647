"""The reconciliation window anchored on the data, and the check that can never pass empty.

The pure cases pin the window itself: it ends on the watermark's day (in the pipeline's
zone), whatever the clock says; without a watermark it ends on the newest stored row;
the touched days join it wherever they fall. The Dagster cases run the real
``orders_match_source`` check on real SQLite files in the situations where a window
counted back from the wall clock compared nothing and passed: a history far behind the
clock, a stalled source, a row stamped in the future.
"""

from __future__ import annotations

import json
import shlex
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from pipeline_assets import demo
from pipeline_assets.automation import COMPARISON_TAG, REASON_TAG
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, resolve_relative
from pipeline_assets.core.verify import DayCounts
from pipeline_assets.core.verify.horizon import (
    NEWEST_ROW,
    NOTHING,
    WATERMARK,
    horizon,
    judge,
    reconcile_horizon,
)
from pipeline_assets.core.verify.pending import owed_days
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets.definitions import build_definitions
from pipeline_assets.settings import from_env

from .tables import TABLES

NY = ZoneInfo("America/New_York")
W = datetime(2026, 1, 21, tzinfo=UTC)


def d(text: str) -> date:
    return date.fromisoformat(text)


@pytest.mark.parametrize(
    "watermark, newest, touched, days, tz, anchored, first, last, extra",
    [
        # the watermark's day and the six before it; the clock plays no part
        (W, None, [], 7, UTC, WATERMARK, "2026-01-15", "2026-01-21", []),
        # a watermark of months ago (history far behind the clock, a stalled source): the same
        (
            W,
            datetime(2026, 1, 21, 9, tzinfo=UTC),
            [],
            7,
            UTC,
            WATERMARK,
            "2026-01-15",
            "2026-01-21",
            [],
        ),
        # a newest row in the future does not drag the window: the watermark anchors it
        (
            W,
            datetime(2099, 1, 1, tzinfo=UTC),
            ["2099-01-01"],
            7,
            UTC,
            WATERMARK,
            "2026-01-15",
            "2026-01-21",
            ["2099-01-01"],
        ),
        # touched days inside the window add nothing; outside it they are added
        (
            W,
            None,
            ["2026-01-21", "2026-01-02", "2026-01-02"],
            3,
            UTC,
            WATERMARK,
            "2026-01-19",
            "2026-01-21",
            ["2026-01-02"],
        ),
        # the watermark's day is the zone's: 03:00 UTC on the 21st is the 20th in New York
        (
            datetime(2026, 1, 21, 3, tzinfo=UTC),
            None,
            [],
            2,
            NY,
            WATERMARK,
            "2026-01-19",
            "2026-01-20",
            [],
        ),
        # no watermark yet (only range loads): the newest stored row anchors it
        (
            None,
            datetime(2026, 3, 5, 12, tzinfo=UTC),
            [],
            1,
            UTC,
            NEWEST_ROW,
            "2026-03-05",
            "2026-03-05",
            [],
        ),
        # an empty warehouse: only what the batch touched
        (None, None, ["2026-01-03"], 7, UTC, NOTHING, None, None, ["2026-01-03"]),
        # RECONCILE_DAYS=0: only the touched days
        (W, None, ["2026-01-20"], 0, UTC, WATERMARK, None, None, ["2026-01-20"]),
    ],
)
def test_the_window_ends_at_the_data(
    watermark, newest, touched, days, tz, anchored, first, last, extra
):
    h = horizon(
        watermark=watermark, newest_row=newest, days_touched=touched, reconcile_days=days, tz=tz
    )
    assert h.anchored_on == anchored
    assert (h.first, h.last) == ((d(first), d(last)) if first else (None, None))
    assert h.touched == tuple(map(d, extra))
    window = (
        []
        if not first
        else [d(first) + timedelta(days=n) for n in range((d(last) - d(first)).days + 1)]
    )
    assert h.days == sorted(set(window) | set(map(d, extra)))


def test_spans_group_consecutive_days():
    h = horizon(
        watermark=W,
        newest_row=None,
        days_touched=["2026-01-22", "2026-01-10"],
        reconcile_days=2,
        tz=UTC,
    )
    assert h.spans() == [(d("2026-01-10"), d("2026-01-10")), (d("2026-01-20"), d("2026-01-22"))]


def _agree(day: str) -> DayCounts:
    return DayCounts(day, source_rows=2, source_checksum=9, warehouse_rows=2, warehouse_checksum=9)


@pytest.mark.parametrize("spec", TABLES.values(), ids=list(TABLES))
@pytest.mark.parametrize(
    "days, holds_rows, reconcile_days, passed, says",
    [
        ({"2026-01-21": _agree("2026-01-21")}, True, 7, True, None),
        (
            {"2026-01-21": DayCounts("2026-01-21", source_rows=1, source_checksum=1)},
            True,
            7,
            False,
            "1 day(s) differ between source and warehouse: 2026-01-21",
        ),
        ({}, True, 7, False, "compared no day, so this check cannot vouch for anything"),
        ({}, True, 0, False, "RECONCILE_DAYS is 0"),
        ({}, False, 7, True, "the warehouse holds no {rows} yet"),
    ],
)
def test_comparing_nothing_on_a_warehouse_with_rows_fails(
    spec, days, holds_rows, reconcile_days, passed, says
):
    """The same verdicts for every declared table, in its own words and commands."""
    h = horizon(
        watermark=W if holds_rows else None,
        newest_row=None,
        days_touched=[],
        reconcile_days=reconcile_days,
        tz=UTC,
    )
    verdict = judge(h, days, warehouse_holds_rows=holds_rows, spec=spec)
    assert (verdict.passed, verdict.days_compared) == (passed, len(days))
    if says is None:
        assert verdict.description is None
    else:
        rows = "orders" if spec.name == "orders" else f"{spec.name} rows"
        assert says.format(rows=rows) in verdict.description
    assert all(f"--select {spec.name} " in command for command in verdict.repair)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("today", "2026-01-27"),
        ("Yesterday", "2026-01-26"),
        ("tomorrow", "2026-01-28"),
        ("-2d", "2026-01-25"),
        ("+10d", "2026-02-06"),
        ("-30d", "2025-12-28"),
        ("yesterday 20:00", "2026-01-26T20:00:00"),
        ("today T07:05:09", "2026-01-27T07:05:09"),
        ("-1d 9:30", "2026-01-26T09:30:00"),
        ("2026-01-25", "2026-01-25"),  # anything else comes back as it was
        ("soon", "soon"),
    ],
)
def test_relative_days(text, expected):
    assert resolve_relative(text, date(2026, 1, 27)) == expected


# --- the real check, through Dagster ----------------------------------------------------


def setup(tmp_path: Path, **env):
    (tmp_path / "data").mkdir(parents=True)
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path / "data"), **env}, cwd=tmp_path)
    return settings, make_engine(settings.source_url, role="app")


def run_orders(settings, instance, config: dict | None = None, tags: dict | None = None):
    job = build_definitions(settings).resolve_job_def("orders_job")
    result = job.execute_in_process(
        instance=instance,
        raise_on_error=False,
        run_config={"ops": {"orders": {"config": config}}} if config else None,
        tags=tags,
    )
    assert result.success
    (check,) = [
        c for c in result.get_asset_check_evaluations() if c.check_name == "orders_match_source"
    ]
    return check


def meta(check) -> dict:
    return {k: v.value for k, v in check.metadata.items()}


def test_a_history_far_behind_the_clock_is_still_compared(tmp_path, instance):
    # the demo's January 2026, checked on whatever today is: the window ends at the data
    settings, source = setup(tmp_path)
    demo.init(source)
    check = run_orders(settings, instance)
    assert check.passed
    assert meta(check)["anchored_on"] == "watermark"
    assert meta(check)["window"] == "2026-01-15...2026-01-21"
    assert meta(check)["days_compared"] == 6  # every chapter day, all touched by the load

    # a row that arrived beyond the lookback, inside the window: the load never reads it,
    # so its check leaves the 16th, and the full comparison catches it, not vacuous
    demo.set_order(source, 107, status="paid", amount="9.00", updated_at="2026-01-16", tz=UTC)
    check = run_orders(settings, instance)
    assert check.passed and "2026-01-16" in meta(check)["window_days_left"]
    assert "left to the full comparison" in check.description
    check = run_orders(settings, instance, tags={COMPARISON_TAG: "full"})
    assert not check.passed
    assert meta(check)["differing_days"] == ["2026-01-16"]


def test_a_stalled_source_keeps_being_compared(tmp_path, instance):
    settings, source = setup(tmp_path)
    demo.init(source)
    run_orders(settings, instance)
    again = run_orders(settings, instance)  # nothing new: the load touched no day
    assert again.passed
    assert meta(again)["touched_outside_window"] == []
    assert meta(again)["days_compared"] == 2  # the lookback read the 19th…21st: two with rows
    full = run_orders(settings, instance, tags={COMPARISON_TAG: "full"})
    assert full.passed
    # the window (15th, 19th, 21st have rows) and the days owed since the first load: all six
    assert meta(full)["days_compared"] == 6
    again = run_orders(settings, instance, tags={COMPARISON_TAG: "full"})
    assert again.passed and meta(again)["days_compared"] == 3  # nothing owed: the window


def test_a_row_stamped_in_the_future_is_compared_on_its_day(tmp_path, instance):
    settings, source = setup(tmp_path)
    demo.init(source)
    demo.set_order(
        source, 190, status="paid", amount="5.00", updated_at="2099-01-01T10:00:00", tz=UTC
    )
    check = run_orders(settings, instance)
    assert check.passed
    # the watermark did not follow the future row, and anchors the window
    assert meta(check)["anchor"] == "2026-01-21T00:00:00+00:00"
    assert "2099-01-01" in meta(check)["touched_outside_window"]
    assert meta(check)["days_compared"] == 7  # the six chapter days and 2099-01-01


def test_without_a_watermark_the_newest_row_anchors_the_window(tmp_path, instance):
    settings, source = setup(tmp_path)
    demo.init(source)
    check = run_orders(settings, instance, {"start": "2026-01-10", "end": "2026-01-20"})
    assert check.passed
    assert (meta(check)["anchored_on"], meta(check)["window"]) == (
        "newest warehouse row",
        "2026-01-13...2026-01-19",
    )


def test_comparing_no_day_fails_with_a_reason(tmp_path, instance):
    settings, source = setup(tmp_path, RECONCILE_DAYS="0")
    demo.init(source)
    assert run_orders(settings, instance).passed  # the first load touched every day
    stalled = run_orders(settings, instance)
    assert not stalled.passed
    assert meta(stalled)["days_compared"] == 0
    assert "RECONCILE_DAYS is 0" in stalled.description

    # a watermark rewound before every row: nothing in the window, and it says so
    settings, source = setup(tmp_path / "rewound")
    demo.init(source)
    run_orders(settings, instance)
    warehouse = make_engine(settings.warehouse_url, role="warehouse")
    wm.rewind(
        warehouse,
        datetime(2025, 6, 1, tzinfo=UTC),
        reason="test",
        at=datetime(2026, 1, 27, tzinfo=UTC),
        table=ORDERS.name,
    )
    h, days, verdict = reconcile_horizon(source, warehouse, UTC, reconcile_days=7, spec=ORDERS)
    warehouse.dispose()
    assert (h.first, h.last, days) == (d("2025-05-26"), d("2025-06-01"), {})
    assert not verdict.passed
    assert "no row on either side in 2025-05-26…2025-06-01" in verdict.description
    assert "rewound past them?" in verdict.description


# --- the days the load read whole ------------------------------------------------------------


def test_the_days_a_load_read_whole_are_compared_with_what_it_read(tmp_path):
    """The check takes the source side of a day the load has just read whole from that
    read (the same rows, counted by the same scan) and reads every other day again. A row
    the load's window never saw still fails it; a row written after the load's read, on a
    day inside its window, is the next load's to read, and does not."""
    from pipeline_assets_tests.orders import load_orders

    settings, source = setup(tmp_path)
    demo.init(source)
    warehouse = make_engine(settings.warehouse_url, role="warehouse")
    now = datetime(2026, 1, 27, 6, tzinfo=UTC)
    first = load_orders(source, warehouse, tz=UTC, lookback_days=2, now=now)
    assert (first.read_whole.first, first.read_whole.last) == (None, None)  # all of it
    assert sum(d.rows for d in first.read_whole.digests.values()) == 6
    _, _, verdict = reconcile_horizon(
        source,
        warehouse,
        UTC,
        reconcile_days=7,
        days_touched=first.days_touched,
        read_whole=first.read_whole,
        spec=ORDERS,
    )
    assert verdict.passed and verdict.days_compared == 6

    again = load_orders(source, warehouse, tz=UTC, lookback_days=2, now=now)
    assert (again.read_whole.first, again.read_whole.last) == (d("2026-01-19"), None)
    demo.set_order(
        source, 107, status="paid", amount="9.00", updated_at="2026-01-20", tz=UTC
    )  # after the load read the 20th: the next load reads it
    demo.set_order(
        source, 108, status="paid", amount="9.00", updated_at="2026-01-16", tz=UTC
    )  # before the window: no incremental load will ever read it
    h, days, verdict = reconcile_horizon(
        source, warehouse, UTC, reconcile_days=7, read_whole=again.read_whole, spec=ORDERS
    )
    assert verdict.passed and d("2026-01-16") in h.left  # not read: the load's check leaves it
    assert "2026-01-16" not in days
    assert "2026-01-20" not in days  # as the load read it: no row that day, on either side
    _, _, fresh = reconcile_horizon(source, warehouse, UTC, reconcile_days=7, spec=ORDERS)
    assert fresh.differing == ["2026-01-16", "2026-01-20"]  # read again: both
    warehouse.dispose()


def test_a_day_the_load_did_not_read_is_left_to_the_full_comparison(tmp_path):
    """Cost follows the change: a load's check compares its window and the days the load
    read, not every day a row left. The full comparison (the daily schedule's run)
    compares every day touched since the last one that passed, and records it only then."""
    from pipeline_assets_tests.orders import load_orders

    settings, source = setup(tmp_path)
    demo.init(source)
    warehouse = make_engine(settings.warehouse_url, role="warehouse")
    now = datetime(2026, 1, 27, 6, tzinfo=UTC)

    def check(result=None, full=False):
        return reconcile_horizon(
            source,
            warehouse,
            UTC,
            reconcile_days=2,
            days_touched=result.days_touched if result else (),
            read_whole=result.read_whole if result else None,
            spec=ORDERS,
            full_at=now if full else None,
        )

    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=now)
    owed = owed_days(warehouse, ORDERS)
    chapter = ["2026-01-03", "2026-01-08", "2026-01-12", "2026-01-15", "2026-01-19"]
    assert [str(x) for x in owed.days] == [*chapter, "2026-01-21"]
    h, _, full = check(full=True)
    assert full.passed and h.owed == tuple(map(d, chapter))  # beside the window
    assert owed_days(warehouse, ORDERS).days == ()  # recorded: nothing owed any more

    # order 104 leaves the 15th for the 22nd; order 108 arrives late, stamped on the 15th
    demo.set_order(source, 104, status="paid", amount="12.75", updated_at="2026-01-22", tz=UTC)
    demo.set_order(source, 108, status="paid", amount="9.00", updated_at="2026-01-15", tz=UTC)
    moved = load_orders(source, warehouse, tz=UTC, lookback_days=2, now=now)
    assert set(moved.days_touched) == {"2026-01-15", "2026-01-22"}
    h, days, verdict = check(moved)
    assert verdict.passed and h.deferred == (d("2026-01-15"),)
    assert "2026-01-15" not in days  # not read: the load's check leaves it

    for _ in range(2):  # a failing full comparison records nothing: the day stays owed
        h, _, full = check(full=True)
        assert not full.passed and full.differing == ["2026-01-15"]
        assert h.deferred == () and d("2026-01-15") in h.owed

    fixed = load_orders(
        source,
        warehouse,
        tz=UTC,
        lookback_days=2,
        now=now,
        start=datetime(2026, 1, 15, tzinfo=UTC),
        end=datetime(2026, 1, 16, tzinfo=UTC),
    )
    assert fixed.inserted == 1
    h, days, verdict = check(fixed)
    assert verdict.passed and "2026-01-15" in days  # the range load read it whole
    _, _, full = check(full=True)
    assert full.passed and owed_days(warehouse, ORDERS).days == ()
    warehouse.dispose()


def test_the_daily_schedules_run_makes_the_full_comparison(tmp_path, instance):
    settings, source = setup(tmp_path, RECONCILE_DAYS="2")
    demo.init(source)
    assert meta(run_orders(settings, instance))["comparison"] == "load"
    demo.set_order(source, 104, status="paid", amount="12.75", updated_at="2026-01-22", tz=UTC)
    demo.set_order(source, 108, status="paid", amount="9.00", updated_at="2026-01-15", tz=UTC)
    check = run_orders(settings, instance)
    assert check.passed and meta(check)["deferred_days"] == ["2026-01-15"]
    assert "left to the full comparison of the daily schedule's run" in check.description

    daily = {REASON_TAG: "daily_schedule"}  # what the schedule's run requests carry
    for tags in (daily, {COMPARISON_TAG: "full"}):
        check = run_orders(settings, instance, tags=tags)
        assert not check.passed and meta(check)["comparison"] == "full"
        assert meta(check)["differing_days"] == ["2026-01-15"]


def test_the_check_names_the_orders_the_source_lost_and_its_repair_deletes_them(tmp_path, instance):
    settings, source = setup(tmp_path)
    demo.init(source)
    run_orders(settings, instance)
    with source.begin() as conn:  # the app erases order 104 (paid, 01-15: in the window)
        conn.exec_driver_sql("DELETE FROM orders WHERE order_id = 104")
    assert run_orders(settings, instance).passed  # the load did not read the 15th
    check = run_orders(settings, instance, tags={COMPARISON_TAG: "full"})
    assert not check.passed
    assert meta(check)["differing_days"] == ["2026-01-15"]
    assert meta(check)["deleted_from_source"] == {"2026-01-15": 1}
    assert "Orders the source no longer has: 2026-01-15: 1 (order 104)." in check.description
    assert "later than the lookback" not in check.description  # the deletion is all of it
    [repair] = meta(check)["repair"]
    assert '"allow_deletes": true' in repair  # the only order of its day
    config = json.loads(shlex.split(repair)[-1])["ops"]["orders"]["config"]
    assert run_orders(settings, instance, config).passed
    warehouse = make_engine(settings.warehouse_url, role="warehouse")
    with warehouse.connect() as conn:
        assert (
            conn.exec_driver_sql("SELECT count(*) FROM orders WHERE order_id = 104").scalar() == 0
        )
    warehouse.dispose()
