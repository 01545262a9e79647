"""Event-time days: a declaration's ``day_column`` apart from its cursor.

A capture belongs to the day it was captured (``captured_at``), not the day someone last
changed it (``modified_at``, the cursor). What a user relies on, on SQLite and
PostgreSQL, with the source written by plain SQL and the warehouse by real loads:

- the watermark and the lookback stay on the cursor; a row's day, its day file, the days
  a load touched, a range load's rows (and its deletes) and ``verify``'s days go by the
  day column;
- a change of the stamp alone touches the row's own day and no day the stamp fell on;
  a row whose day column changes touches its old day and its new one;
- a day column that cannot work is refused when the definitions load, naming it;
- a changed day column makes every committed day of the table's files stale.
"""

from __future__ import annotations

from datetime import date, timedelta

import pytest
import sqlalchemy as sa
from dagster import AssetKey, build_sensor_context
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_assets.core import sensing
from pipeline_assets.core.daily_files import read_committed_day, write_day_files
from pipeline_assets.core.daily_files.readers import shape_of, stale_days
from pipeline_assets.core.daily_files.views import day_rows
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.errors import DeclarationError
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.times import UTC
from pipeline_assets.core.verify import DIFFERS_FROM_SOURCE, Repairs
from pipeline_assets.core.warehouse.declaration import files_fingerprint
from pipeline_assets.definitions import build_definitions
from pipeline_assets.settings import from_env

from .conftest import NOW
from .table_sources import TableSource, check, load, stamp
from .tables import CAPTURES, CAPTURES_ATTRIBUTES

# row: (modified_at: the cursor, captured_at: the day column, in the file's view)
ROWS = {
    1: ("2026-01-05T10:00", "2026-01-03T10:00", True),
    2: ("2026-01-05T11:00", "2026-01-04T09:00", False),
    3: ("2026-01-08T08:00", "2026-01-08T07:00", True),
    4: ("2026-01-08T09:00", "2026-01-05T12:00", True),
}
RANGE = ("start", "end")
DAYS = [(date(2026, 1, 1) + timedelta(n)).isoformat() for n in range(12)]


# the day column as a timestamp, and as a date (the day is the date itself)
BY_DATE = declare(
    {**CAPTURES_ATTRIBUTES, "columns": {**CAPTURES_ATTRIBUTES["columns"], "captured_at": "date"}}
)


@pytest.fixture(params=[CAPTURES, BY_DATE], ids=["timestamp", "date"])
def captures(engines, request):
    """(TableSource, warehouse, the first load's result) of ``captures``: four rows."""
    source, warehouse = engines
    app = TableSource(source, request.param)
    app.create()
    for n, (at, day, filed) in ROWS.items():
        app.put(n, stamp(at), day=stamp(day), filed=filed)
    return app, warehouse, load(app, warehouse)


def files_by_day(warehouse, spec=CAPTURES) -> dict[str, list[int]]:
    """The capture ids each day's file holds (days with none left out)."""
    view = spec.daily_files[0]
    rows = day_rows(warehouse, DAYS, UTC, spec, view)
    return {day: [r["capture_id"] for r in held] for day, held in rows.items() if held}


def test_a_row_belongs_to_the_day_of_its_day_column(captures):
    app, warehouse, first = captures
    assert first.days_touched == ("2026-01-03", "2026-01-04", "2026-01-05", "2026-01-08")
    assert first.watermark_after == stamp("2026-01-08T09:00")  # the cursor's newest
    assert files_by_day(warehouse, app.spec) == {
        "2026-01-03": [1],
        "2026-01-05": [4],
        "2026-01-08": [3],
    }


def test_a_new_stamp_touches_the_rows_day_and_no_day_the_stamp_fell_on(captures):
    app, warehouse, _ = captures
    app.put(1, stamp("2026-01-09T10:00"), day=stamp("2026-01-03T10:00"), version=1)
    result = load(app, warehouse)
    assert (result.updated, result.days_touched) == (1, ("2026-01-03",))
    assert result.watermark_after == stamp("2026-01-09T10:00")


def test_a_row_whose_day_changes_leaves_its_old_day_for_its_new_one(captures):
    app, warehouse, _ = captures
    app.put(4, stamp("2026-01-09T12:00"), day=stamp("2026-01-06T12:00"))
    app.put(2, stamp("2026-01-09T13:00"), day=stamp("2026-01-10T09:00"), filed=False)
    result = load(app, warehouse)
    # row 2 was in no file: only its new day is touched, and it is no move of a file's row
    assert result.days_touched == ("2026-01-05", "2026-01-06", "2026-01-10")
    assert result.days_moved == (("2026-01-05", "2026-01-06"),)
    assert files_by_day(warehouse, app.spec) == {
        "2026-01-03": [1],
        "2026-01-06": [4],
        "2026-01-08": [3],
    }


@pytest.mark.parametrize(
    ("moved_to", "runs"),
    [
        # the days between are rebuilt with the two: one run, one manifest
        ("2026-01-09", [("2026-01-03", "2026-01-09")]),
        ("2026-02-02", [("2026-01-03", "2026-02-02")]),  # 31 days: the widest joined
        ("2026-02-03", [("2026-01-03", "2026-01-03"), ("2026-02-03", "2026-02-03")]),
    ],
)
def test_the_two_days_of_a_moved_row_are_rebuilt_in_one_run(moved_to, runs):
    touched = sensing.Touched(1, ("2026-01-03", moved_to), "b1", (("2026-01-03", moved_to),))
    tick = sensing.refresh_tick(sensing.RefreshCursor(), [touched], {}, 0.0, files="f")
    assert [(r.first, r.last) for r in tick.requests] == runs
    # a day no move joins stays a run of its own, as every touched day is
    apart = sensing.Touched(1, ("2026-01-03", "2026-01-09"), "b1")
    tick = sensing.refresh_tick(sensing.RefreshCursor(), [apart], {}, 0.0, files="f")
    assert [(r.first, r.last) for r in tick.requests] == [
        ("2026-01-03", "2026-01-03"),
        ("2026-01-09", "2026-01-09"),
    ]


def test_a_range_load_reads_and_replaces_the_rows_of_its_days(captures):
    app, warehouse, _ = captures
    # 2026-01-05 is the day of row 4 and the stamp of rows 1 and 2: the range is row 4's
    assert (load(app, warehouse, "2026-01-05", "2026-01-06").rows_read) == 1
    app.delete(1)  # captured on the 3rd, stamped on the 5th
    kept = load(app, warehouse, "2026-01-05", "2026-01-06")
    assert (kept.rows_read, kept.rows_deleted) == (1, 0)
    gone = load(app, warehouse, "2026-01-03", "2026-01-04", allow=True)
    assert (gone.rows_read, gone.rows_deleted, gone.days_touched) == (0, 1, ("2026-01-03",))
    assert gone.watermark_after == gone.watermark_before  # a range leaves the watermark
    assert files_by_day(warehouse, app.spec) == {"2026-01-05": [4], "2026-01-08": [3]}


def test_verify_compares_by_the_day_column_and_its_repair_agrees(captures, tmp_path):
    app, warehouse, _ = captures

    assert not [
        p for p in check(app, warehouse, tmp_path).problems if p.kind == DIFFERS_FROM_SOURCE
    ]
    app.put(4, stamp("2026-01-08T09:00"), day=stamp("2026-01-05T12:00"), version=1)
    result = check(
        app, warehouse, tmp_path
    )  # changed with the same stamp: no incremental load sees it
    assert result.failing_days == ["2026-01-05"]
    assert result.repair == tuple(Repairs(app.spec).commands(["2026-01-05"], ["2026-01-05"]))
    load(app, warehouse, "2026-01-05", "2026-01-06")  # what the printed command runs
    assert not [
        p for p in check(app, warehouse, tmp_path).problems if p.kind == DIFFERS_FROM_SOURCE
    ]


@pytest.mark.parametrize(
    ("day_column", "columns", "why"),
    [
        ("booked_at", {}, "a declared column of type timestamp or date"),
        ("note", {}, "must come from a timestamp or a date, not text"),
        ("amount", {}, "must come from a timestamp or a date, not decimal(10,2)"),
        (
            "settled_at",
            {"settled_at": {"type": "timestamp", "nullable": True}},
            "the day column cannot be nullable",
        ),
        (["captured_at"], {}, "a declared column of type timestamp or date"),
    ],
)
def test_a_day_column_that_cannot_work_is_refused_naming_it(day_column, columns, why):
    attributes = {
        **CAPTURES_ATTRIBUTES,
        "day_column": day_column,
        "columns": {**CAPTURES_ATTRIBUTES["columns"], **columns},
    }
    with pytest.raises(DeclarationError) as err:
        declare(attributes, where="shop/defs/captures/defs.yaml")
    message = str(err.value)
    assert "day_column" in message and repr(day_column) in message and why in message
    assert "shop/defs/captures/defs.yaml" in message


def test_a_date_day_column_and_the_cursor_named_again_are_accepted():
    settled = declare(
        {
            **CAPTURES_ATTRIBUTES,
            "day_column": "settled_on",
            "columns": {**CAPTURES_ATTRIBUTES["columns"], "settled_on": "date"},
        }
    )
    assert (settled.day, settled.cursor) == ("settled_on", "modified_at")
    same = declare({**CAPTURES_ATTRIBUTES, "day_column": "modified_at"})
    without = declare({k: v for k, v in CAPTURES_ATTRIBUTES.items() if k != "day_column"})
    # naming the cursor is the default, byte for byte: the same files' shape
    assert same == without and same.day == "modified_at" and not same.day_apart
    view = same.daily_files[0]
    assert files_fingerprint(same, view) == files_fingerprint(without, view)


def test_a_changed_day_column_makes_every_committed_day_stale(tmp_path):
    stamped = declare({k: v for k, v in CAPTURES_ATTRIBUTES.items() if k != "day_column"})
    folder = tmp_path / "captured_files"
    row = {
        "capture_id": 1,
        "attempt": 2,
        "status": "captured",
        "amount": "1.05",
        "note": None,
        "captured_at": "2026-01-03T10:00:00+00:00",
        "modified_at": "2026-01-05T10:00:00+00:00",
    }
    days = {"2026-01-05": [row], "2026-01-06": []}
    write_day_files(folder, days, run_id="r1", written_at=NOW, spec=stamped)
    assert stale_days(folder, shape_of(stamped)) == []
    stale = stale_days(folder, shape_of(CAPTURES))
    assert [s.day for s in stale] == ["2026-01-05", "2026-01-06"]
    assert "its filter, key or day column differs" in shape_of(CAPTURES).why(stale[0])


def test_the_warehouse_reads_days_through_an_index_on_the_day_column(captures):
    _, warehouse, _ = captures
    indexed = {tuple(i["column_names"]) for i in sa.inspect(warehouse).get_indexes(CAPTURES.name)}
    assert {("modified_at",), ("captured_at",)} <= indexed


def test_through_dagster_files_and_totals_go_by_the_day_column(tmp_path, instance):
    """The table's job and its files' job over a range, in process: the days a load
    touched (metadata), its checks, each day's file and total, by the day column."""
    (tmp_path / "data").mkdir()
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    app = TableSource(make_engine(settings.source_url, role="app"), CAPTURES)
    app.create()
    for n, (at, day, filed) in ROWS.items():
        app.put(n, stamp(at), day=stamp(day), filed=filed)
    defs = build_definitions(settings, clock=lambda: NOW, spec=CAPTURES)
    names = CAPTURES.names

    def load_job() -> dict:
        result = defs.resolve_job_def(names.load_job).execute_in_process(instance=instance)
        assert {e.passed for e in result.get_asset_check_evaluations()} == {True}
        (event,) = result.get_asset_materialization_events()
        return {k: v.value for k, v in event.materialization.metadata.items()}

    def build(first: str, last: str) -> dict[str, list[int]]:
        job = defs.resolve_job_def(names.files["captured_files"].job)
        result = job.execute_in_process(
            instance=instance,
            tags={
                "dagster/asset_partition_range_start": first,
                "dagster/asset_partition_range_end": last,
            },
        )
        totals = {
            e.partition: e.materialization.metadata["rows"].value
            for e in result.get_asset_materialization_events()
            if e.asset_key == AssetKey("captured_totals")
        }
        folder = tmp_path / "data" / "captured_files"
        held = {day: read_committed_day(folder, day) for day in totals}
        assert totals == {day: len(rows) for day, rows in held.items()}
        return {day: [r["capture_id"] for r in rows] for day, rows in held.items() if rows}

    assert load_job()["days_touched"] == ["2026-01-03", "2026-01-04", "2026-01-05", "2026-01-08"]
    assert build("2026-01-03", "2026-01-08") == {
        "2026-01-03": [1],
        "2026-01-05": [4],
        "2026-01-08": [3],
    }
    (first,) = instance.fetch_materializations(AssetKey(CAPTURES.name), limit=1).records
    app.put(4, stamp("2026-01-09T12:00"), day=stamp("2026-01-09T10:00"))
    moved = load_job()
    assert moved["days_touched"] == ["2026-01-05", "2026-01-09"]
    assert moved["days_moved"] == [["2026-01-05", "2026-01-09"]]
    # the refresh sensor asks for both days in one run, the days between with them
    sensor = defs.resolve_sensor_def(names.files["captured_files"].refresh_sensor)
    cursor = sensing.RefreshCursor(after=first.storage_id).to_cursor()
    with build_sensor_context(
        instance=instance, cursor=cursor, definitions=defs, resources=defs.resources
    ) as context:
        (request,) = sensor.evaluate_tick(context).run_requests
    first_day, last_day = (request.tags[f"dagster/asset_partition_range_{e}"] for e in RANGE)
    assert (first_day, last_day) == ("2026-01-05", "2026-01-09")
    assert build(first_day, last_day) == {"2026-01-08": [3], "2026-01-09": [4]}


def test_a_day_column_declared_on_a_loaded_table_takes_effect_in_place(engines):
    source, warehouse = engines
    stamped = declare({k: v for k, v in CAPTURES_ATTRIBUTES.items() if k != "day_column"})
    app = TableSource(source, CAPTURES)
    app.create()
    for n, (at, day, filed) in ROWS.items():
        app.put(n, stamp(at), day=stamp(day), filed=filed)
    before = load(TableSource(source, stamped), warehouse)
    assert before.days_touched == ("2026-01-05", "2026-01-08")  # by the stamp
    assert files_by_day(warehouse, stamped) == {"2026-01-05": [1], "2026-01-08": [3, 4]}

    after = load(app, warehouse)  # nothing changed in the rows: nothing touched
    assert (after.inserted, after.updated, after.days_touched) == (0, 0, ())
    assert after.watermark_after == before.watermark_after
    indexed = {tuple(i["column_names"]) for i in sa.inspect(warehouse).get_indexes(CAPTURES.name)}
    assert ("captured_at",) in indexed
    assert files_by_day(warehouse, CAPTURES) == {
        "2026-01-03": [1],
        "2026-01-05": [4],
        "2026-01-08": [3],
    }


# --- any history, against a plain model -----------------------------------------------

ON = st.sampled_from(["2026-01-03", "2026-01-04", "2026-01-06"])
CHANGE = st.lists(st.tuples(st.integers(1, 8), ON, st.booleans(), st.integers(0, 2)), max_size=5)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(CHANGE, min_size=1, max_size=4))
def test_any_history_puts_each_row_on_its_days_file_once(history, tmp_path_factory):
    """Rows inserted and changed (their values, their filter, their day) with fresh
    stamps, loads between: each run touches exactly the days and moves a plain model
    says, and every filed row is on its day column's day, on that day only."""
    folder = tmp_path_factory.mktemp("captures")
    source = make_engine(f"sqlite:///{folder}/app.db", role="app")
    warehouse = make_engine(f"sqlite:///{folder}/warehouse.db", role="warehouse")
    app = TableSource(source, CAPTURES)
    app.create()
    model: dict[int, tuple] = {}  # id: (day, filed, version, stamp)
    clock = stamp("2026-01-07T00:00")
    for step in history:
        before = dict(model)
        for n, day, filed, version in step:
            clock += timedelta(minutes=1)  # a fresh stamp: within the lookback
            app.put(n, clock, day=stamp(f"{day}T12:00"), filed=filed, version=version)
            model[n] = (day, filed, version, clock)  # a new stamp is a change
        result = load(app, warehouse)
        changed = {n for n in model if n in before and model[n] != before[n]}
        new = set(model) - set(before)
        days = {model[n][0] for n in new | changed} | {
            before[n][0] for n in changed if before[n][1]
        }
        moves = {(before[n][0], model[n][0]) for n in changed if before[n][1]}
        assert (result.inserted, result.updated) == (len(new), len(changed))
        assert result.days_touched == tuple(sorted(days))
        assert result.days_moved == tuple(sorted(m for m in moves if m[0] != m[1]))
        filed = {}
        for n, (day, is_filed, *_) in sorted(model.items()):
            if is_filed:
                filed.setdefault(day, []).append(n)
        assert files_by_day(warehouse) == filed
    source.dispose()
    warehouse.dispose()
