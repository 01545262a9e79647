"""Append-only tables: an integer ``cursor``.

An event log has no change stamp, only an id that grows. Each run reads the ids from
``watermark − lookback_ids`` on and upserts them by key; the watermark is the highest id
read and never goes back. Ids are handed out when a row is inserted and seen when its
transaction commits, so a lower id can appear after a higher one was read: the lookback
reads it again. What a user relies on, on SQLite, PostgreSQL and MariaDB sources:

- a row committed late within the lookback is loaded by the next run and counted late;
- one committed later than that, or updated in place, is named by ``verify`` on its day,
  and the command it prints loads it;
- the day of a row is its ``day_column``'s; the CLI and the metadata speak ids;
- the new-rows sensor asks the source for its highest id;
- a shape that cannot work is refused when the definitions load.
"""

from __future__ import annotations

import json
from datetime import date, timedelta

import pytest
import sqlalchemy as sa
from dagster import build_sensor_context
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_assets.core import sensing
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.db.state import id_holes
from pipeline_assets.core.errors import DeclarationError
from pipeline_assets.core.load.holes import HOLE_HOURS, HOLES_KEPT
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.times import UTC
from pipeline_assets.core.verify import DIFFERS_FROM_SOURCE
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets.definitions import build_definitions
from pipeline_assets.sensor_runs import RUN_KEY_TAG, SENSOR_TAG
from pipeline_assets.settings import from_env

from .conftest import NOW
from .support import dg_project
from .table_sources import TableSource, check, load, stamp
from .tables import EVENTS, EVENTS_ATTRIBUTES, PAYMENTS_ATTRIBUTES


def put(app: TableSource, *ids: int, version: int = 0) -> None:
    """Events ``ids``, each on the day of its number in January."""
    for n in ids:
        app.put(n, stamp(f"2026-01-{n:02}T10:00"), version=version)


@pytest.fixture
def events(engines):
    """(TableSource, warehouse) of ``events`` (lookback_ids 2): ids 1-4 and 6 loaded, 5
    not committed yet."""
    source, warehouse = engines
    app = TableSource(source, EVENTS)
    app.create()
    put(app, 1, 2, 3, 4, 6)
    first = load(app, warehouse)
    assert (first.rows_read, first.watermark_before, first.watermark_after) == (5, None, 6)
    return app, warehouse


def differing(app, warehouse, folder) -> list[str]:
    return [p.day for p in check(app, warehouse, folder).problems if p.kind == DIFFERS_FROM_SOURCE]


def test_a_row_committed_late_within_the_lookback_is_loaded_and_counted_late(events):
    app, warehouse = events
    put(app, 5, 7)  # 5 commits after 6 was read
    result = load(app, warehouse)
    assert (result.window_start, result.rows_read, result.inserted) == (4, 4, 2)
    assert (result.late_rows, result.max_lateness) == (1, 1)
    assert result.days_touched == ("2026-01-05", "2026-01-07")
    assert wm.current(warehouse, table=EVENTS.name) == 7
    put(app, 8)
    assert load(app, warehouse).watermark_after == 8  # only forward


def test_a_late_commit_below_the_window_is_loaded_through_its_remembered_hole(events):
    """5 was missing between ids the first run read: remembered, read again by key after
    the lookback has moved past it, and loaded when it commits, with no repair."""
    app, warehouse = events
    put(app, 7, 8, 9)
    moved = load(app, warehouse)  # from 4 (the watermark was 6); it leaves 9: next, from 7
    assert (moved.window_start, moved.holes_remembered, moved.holes_filled) == (4, 1, 0)
    put(app, 5)  # committed much later than the lookback
    late = load(app, warehouse)
    assert (late.inserted, late.holes_filled, late.holes_remembered) == (1, 1, 0)
    assert (late.late_rows, late.max_lateness, late.days_touched) == (1, 4, ("2026-01-05",))
    assert wm.current(warehouse, table=EVENTS.name) == 9


def test_a_hole_a_day_old_or_a_row_changed_in_place_is_named_by_verify(events, tmp_path):
    """A hole is forgotten a day after it was first missed (a rolled-back id never
    fills); a row committed after that, or updated in place, is verify's to find."""
    app, warehouse = events
    put(app, 7, 8, 9)
    assert (
        load(app, warehouse, now=NOW + timedelta(hours=HOLE_HOURS, seconds=1)).holes_remembered == 0
    )
    put(app, 5)  # committed more than a day late
    put(app, 2, version=1)  # an append-only table's row, updated in place
    assert load(app, warehouse).inserted == 0  # no incremental run sees either
    assert differing(app, warehouse, tmp_path) == ["2026-01-02", "2026-01-05"]
    load(app, warehouse, "2026-01-02", "2026-01-03")  # what verify's commands run
    load(app, warehouse, "2026-01-05", "2026-01-06")
    assert differing(app, warehouse, tmp_path) == []
    assert wm.current(warehouse, table=EVENTS.name) == 9  # range loads leave it


def test_holes_are_bounded_by_their_span_and_count(tmp_path):
    """Looked for within ten lookbacks below the newest id, and at most HOLES_KEPT kept,
    the highest: ids 1 and 2,500 with lookback_ids 200 leave 1,500…2,499."""
    spec = declare({**EVENTS_ATTRIBUTES, "lookback_ids": 200})
    app = TableSource(make_engine(f"sqlite:///{tmp_path / 'app.db'}", role="app"), spec)
    app.create()
    app.put(1, stamp("2026-01-01T10:00"))
    app.put(2500, stamp("2026-01-02T10:00"))
    warehouse = make_engine(f"sqlite:///{tmp_path / 'warehouse.db'}", role="warehouse")
    assert load(app, warehouse).holes_remembered == HOLES_KEPT
    with warehouse.connect() as conn:
        kept = conn.execute(sa.select(id_holes.c.id)).scalars().all()
    assert sorted(kept) == list(range(1500, 2500))


def test_the_sensor_asks_for_the_highest_id(events):
    app, _ = events
    seen = sensing.observe(app.engine, UTC, None, spec=EVENTS)
    assert (seen.max_id, seen.describe(EVENTS)) == (6, "highest event_id 6")
    put(app, 5)  # below the highest: the next run's lookback reads it
    assert sensing.observe(app.engine, UTC, None, spec=EVENTS) == seen
    put(app, 7)
    assert sensing.observe(app.engine, UTC, None, spec=EVENTS).max_id == 7


@pytest.mark.parametrize(
    ("attributes", "path", "why"),
    [
        (
            {k: v for k, v in EVENTS_ATTRIBUTES.items() if k != "day_column"},
            "day_column",
            "required with cursor: event_id",
        ),
        ({**EVENTS_ATTRIBUTES, "lookback_days": 2}, "lookback_days", "use lookback_ids"),
        ({**EVENTS_ATTRIBUTES, "lookback_ids": -1}, "lookback_ids", "0 or more"),
        ({**PAYMENTS_ATTRIBUTES, "lookback_ids": 5}, "lookback_ids", "only an integer cursor"),
    ],
)
def test_a_lookback_or_day_that_does_not_fit_the_cursor_is_refused(attributes, path, why):
    with pytest.raises(DeclarationError) as err:
        declare(attributes, where="shop/defs/events/defs.yaml")
    message = str(err.value)
    assert message.startswith(f"shop/defs/events/defs.yaml: {path}: ") and why in message


def test_the_default_lookback_is_a_thousand_ids():
    spec = declare({k: v for k, v in EVENTS_ATTRIBUTES.items() if k != "lookback_ids"})
    assert (spec.counts_ids, spec.lookback_ids, spec.day, spec.stamp) == (
        True,
        1000,
        "occurred_at",
        "occurred_at",
    )


def test_through_dagster_and_the_cli_the_watermark_is_an_id(tmp_path, instance, cli):
    """The table's job in process (metadata, checks, the new-rows sensor), then the
    table commands on a location declaring it."""
    (tmp_path / "data").mkdir()
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    app = TableSource(make_engine(settings.source_url, role="app"), EVENTS)
    app.create()
    put(app, 1, 2, 4)
    defs = build_definitions(settings, clock=lambda: NOW, spec=EVENTS)
    sensor = defs.resolve_sensor_def(EVENTS.names.new_sensor)

    def tick(cursor):
        with build_sensor_context(
            instance=instance, cursor=cursor, definitions=defs, resources=defs.resources
        ) as context:
            return sensor.evaluate_tick(context)

    def run(ticked) -> dict:
        (request,) = ticked.run_requests
        tags = {**request.tags, SENSOR_TAG: EVENTS.names.new_sensor, RUN_KEY_TAG: request.run_key}
        result = defs.resolve_job_def(EVENTS.names.load_job).execute_in_process(
            instance=instance, tags=tags
        )
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        (event,) = result.get_asset_materialization_events()
        return {**{k: v.value for k, v in event.materialization.metadata.items()}, **checks}

    first = tick(None)
    meta = run(first)
    assert meta[EVENTS.names.match_check] and meta["lateness_within_lookback"]
    assert (meta["watermark_before"], meta["watermark_after"], meta["lookback_ids"]) == (
        "none",
        "4",
        2,
    )
    quiet = tick(first.cursor)
    assert not quiet.run_requests
    put(app, 3, 5)  # 3 commits late; 5 is new
    meta = run(tick(quiet.cursor))
    assert (meta["window_start"], meta["inserted"], meta["late_rows"]) == ("2", 2, 1)
    assert meta["max_lateness_ids"] == 1 and "max_lateness_hours" not in meta
    # one id late of a lookback of two: half of it, so the lateness check warns
    assert (meta[EVENTS.names.match_check], meta["lateness_within_lookback"]) == (True, False)

    # the same warehouse, through a user's location that declares the table in YAML
    module = dg_project(
        tmp_path, {"events": EVENTS_ATTRIBUTES | {"source_url": settings.source_url}}
    )

    def command(*argv: str):
        code, out, err = cli(*argv, "-m", module)
        assert code == 0, err
        return out

    assert json.loads(command("watermark", "show")) == {
        "watermark": 5,
        "lookback_ids": 2,
        "window_start": 3,
    }
    assert "rewound from 5 to 2" in command("watermark", "rewind", "2", "--reason", "replay")
    history = json.loads(command("watermark", "history", "--json"))
    assert [(c["kind"], c["old_value"], c["new_value"]) for c in history] == [
        ("load", None, 4),
        ("load", 4, 5),
        ("rewind", 5, 2),
    ]
    plan = json.loads(command("plan"))
    assert (plan["window_start"], plan["rows_read"], plan["watermark_after"]) == (0, 5, 5)
    code, _, err = cli("watermark", "rewind", "yesterday", "--reason", "x", "-m", module)
    assert code == 1 and "'yesterday' is not an id" in err


# --- any history, against the source --------------------------------------------------

COMMIT = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.integers(1, 30)),  # any id: lower ones commit late
        st.tuples(st.just("update"), st.integers(1, 30)),  # in place, against the shape
    ),
    max_size=5,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(COMMIT, min_size=1, max_size=5))
def test_any_history_ends_with_verify_clean_after_its_printed_repairs(history, tmp_path_factory):
    """Ids committed in any order, some far below the watermark, some rows updated in
    place, loads between: every run holds what it read and never moves the watermark
    back; then the range loads of the days ``verify`` names leave the warehouse equal to
    the source and ``verify`` clean."""
    folder = tmp_path_factory.mktemp("events")
    source = make_engine(f"sqlite:///{folder}/app.db", role="app")
    warehouse = make_engine(f"sqlite:///{folder}/warehouse.db", role="warehouse")
    app = TableSource(source, EVENTS)
    app.create()
    held: dict[int, int] = {}  # id: version, as the source holds it
    mark = None
    for commit in history:
        for op, n in commit:
            if op == "insert" and n not in held:
                put(app, n)
                held[n] = 0
            elif op == "update" and n in held:
                held[n] += 1
                put(app, n, version=held[n])
        result = load(app, warehouse)
        assert mark is None or (result.watermark_after or 0) >= mark
        mark = result.watermark_after
        if mark is not None:  # what the run read again is what the source holds
            start = result.window_start or 0
            assert {n: v for n, v in stored(warehouse).items() if n >= start} == {
                n: v for n, v in held.items() if n >= start
            }
    days = differing(app, warehouse, folder / "files")
    for day in days:
        after = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
        load(app, warehouse, day, after)
    assert stored(warehouse) == held
    assert differing(app, warehouse, folder / "files") == []
    source.dispose()
    warehouse.dispose()


def stored(warehouse) -> dict[int, int]:
    """Each stored event's version (its amount's cents, as TableSource writes them)."""
    with warehouse.connect() as conn:
        rows = conn.exec_driver_sql("SELECT event_id, amount FROM events").all()
    return {n: int(str(amount).split(".")[1][0]) for n, amount in rows}
