"""Tables without a change stamp: ``cursor: null``.

A price list or a country table has no column the app stamps on each change, so no run
can ask for "what changed since". Every run reads the whole table and compares it with
the warehouse by key and content. What a user relies on, on SQLite, PostgreSQL and
MariaDB sources, with real loads:

- only inserted and changed rows are written, the deleted ones removed, in one
  transaction with the batch; a run with nothing changed touches no day;
- deletes are guarded by ``max_delete_share``: beyond it nothing is written, and the
  error names the share, the setting and how to allow it;
- the days a run touched are the day column's, old and new; ``verify`` agrees after a
  run and names a day the source changed since;
- the new-rows sensor notices an insert, a delete and a change of any value;
- the shape is refused when it cannot work (no ``cursor`` at all, or no ``day_column``).
"""

from __future__ import annotations

import tempfile
from datetime import date

import pytest
import sqlalchemy as sa
from dagster import AssetKey, build_sensor_context
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_assets.core import sensing
from pipeline_assets.core.daily_files.views import day_rows
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.errors import DeclarationError, DeleteRefused
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.times import UTC
from pipeline_assets.core.verify import DIFFERS_FROM_SOURCE
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets.definitions import build_definitions
from pipeline_assets.sensor_runs import RUN_KEY_TAG, SENSOR_TAG
from pipeline_assets.settings import from_env

from .conftest import NOW
from .table_sources import TableSource, check, load, stamp
from .tables import PRICES, PRICES_ATTRIBUTES

# sku: (listed_on, in the file's view)
ROWS = {1: ("2026-01-03", True), 2: ("2026-01-04", False), 3: ("2026-01-05", True)}
DAYS = [f"2026-01-{n:02}" for n in range(1, 13)]


def put(app: TableSource, n: int, day: str, *, filed: bool = True, version: int = 0) -> None:
    app.put(n, stamp(f"{day}T00:00"), day=date.fromisoformat(day), filed=filed, version=version)


@pytest.fixture
def prices(engines):
    """(TableSource, warehouse) of ``prices``: three rows, loaded once."""
    source, warehouse = engines
    app = TableSource(source, PRICES)
    app.create()
    for n, (day, filed) in ROWS.items():
        put(app, n, day, filed=filed)
    first = load(app, warehouse)
    assert (first.kind, first.inserted, first.days_touched) == (
        "full",
        3,
        ("2026-01-03", "2026-01-04", "2026-01-05"),
    )
    return app, warehouse


def stored(warehouse) -> dict[int, tuple]:
    with warehouse.connect() as conn:
        rows = conn.execute(sa.text("SELECT sku, price, listed_on FROM prices ORDER BY sku"))
        return {sku: (str(price), str(day)) for sku, price, day in rows}


def test_a_run_with_nothing_changed_writes_and_touches_nothing(prices):
    app, warehouse = prices
    again = load(app, warehouse)
    assert (again.inserted, again.updated, again.unchanged, again.rows_deleted) == (0, 0, 3, 0)
    assert again.days_touched == () and again.days_moved == ()
    assert (again.watermark_before, again.watermark_after) == (None, None)
    assert wm.current(warehouse, table=PRICES.name) is None


def test_inserts_changes_moves_and_deletes_are_applied_in_one_run(prices):
    app, warehouse = prices
    put(app, 1, "2026-01-03", version=1)  # a new price, the same day
    put(app, 3, "2026-01-09")  # listed on another day
    app.delete(2)
    put(app, 4, "2026-01-10")
    result = load(app, warehouse)
    assert (result.inserted, result.updated, result.unchanged) == (1, 2, 0)
    assert (result.rows_deleted, result.deleted_keys) == (1, (2,))
    # sku 2 was in no file, but its day held it: the day of a deleted row is touched
    assert result.days_touched == (
        "2026-01-03",
        "2026-01-04",
        "2026-01-05",
        "2026-01-09",
        "2026-01-10",
    )
    assert result.days_moved == (("2026-01-05", "2026-01-09"),)
    assert sorted(stored(warehouse)) == [1, 3, 4]
    view = PRICES.daily_files[0]
    held = day_rows(warehouse, DAYS, UTC, PRICES, view)
    assert {d: [r["sku"] for r in rows] for d, rows in held.items() if rows} == {
        "2026-01-03": [1],
        "2026-01-09": [3],
        "2026-01-10": [4],
    }


def test_deleting_more_than_the_share_writes_nothing_and_says_how_to_allow_it(prices):
    app, warehouse = prices
    before = stored(warehouse)
    app.delete(1)
    app.delete(3)
    put(app, 1, "2026-01-03", version=1)  # a change beside the deletes: not written either
    app.delete(1)
    with pytest.raises(DeleteRefused) as err:
        load(app, warehouse)
    message = str(err.value)
    assert "would delete 2 of the 3 row(s) the warehouse holds (67%" in message
    assert "more than max_delete_share=0.5" in message
    assert (
        "allow_deletes: true" in message and "raise the declaration's max_delete_share" in message
    )
    assert stored(warehouse) == before
    allowed = load(app, warehouse, allow=True)
    assert (allowed.rows_deleted, allowed.mass_delete_allowed) == (2, True)
    assert sorted(stored(warehouse)) == [2]


def test_verify_agrees_after_a_run_and_names_the_day_the_source_changed(prices, tmp_path):
    app, warehouse = prices

    def differing():
        result = check(app, warehouse, tmp_path)
        return [p.day for p in result.problems if p.kind == DIFFERS_FROM_SOURCE]

    assert differing() == []
    put(app, 3, "2026-01-05", version=1)
    assert differing() == ["2026-01-05"]
    load(app, warehouse)
    assert differing() == []


def test_the_observation_sees_an_insert_a_delete_and_a_change_of_any_value(prices):
    app, _ = prices
    seen = [sensing.observe(app.engine, UTC, None, spec=PRICES)]
    assert seen[0].rows == 3 and "the whole table (no change stamp): 3 row(s)" in seen[0].describe(
        PRICES
    )
    assert sensing.observe(app.engine, UTC, None, spec=PRICES) == seen[0]
    put(app, 2, "2026-01-04", filed=False, version=1)  # same length, same day
    seen.append(sensing.observe(app.engine, UTC, None, spec=PRICES))
    app.delete(2)
    seen.append(sensing.observe(app.engine, UTC, None, spec=PRICES))
    put(app, 2, "2026-01-04", filed=False)
    seen.append(sensing.observe(app.engine, UTC, None, spec=PRICES))
    assert len({s.fingerprint for s in seen[:3]}) == 3 and seen[3] == seen[0]


@pytest.mark.parametrize(
    ("attributes", "path", "why"),
    [
        (
            {k: v for k, v in PRICES_ATTRIBUTES.items() if k != "cursor"},
            "cursor",
            "or null for a table without one",
        ),
        (
            {k: v for k, v in PRICES_ATTRIBUTES.items() if k != "day_column"},
            "day_column",
            "required with cursor: null",
        ),
        ({**PRICES_ATTRIBUTES, "lookback_days": 2}, "lookback_days", "nothing to look back"),
    ],
)
def test_a_table_without_a_stamp_needs_both_said(attributes, path, why):
    with pytest.raises(DeclarationError) as err:
        declare(attributes, where="shop/defs/prices/defs.yaml")
    message = str(err.value)
    value = repr(attributes.get(path))
    assert message.startswith(f"shop/defs/prices/defs.yaml: {path}: {value}: ") and why in message


def test_through_dagster_each_run_compares_the_whole_table(tmp_path, instance):
    """The table's job in process (metadata and checks), and its new-rows sensor."""
    (tmp_path / "data").mkdir()
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    app = TableSource(make_engine(settings.source_url, role="app"), PRICES)
    app.create()
    for n, (day, filed) in ROWS.items():
        put(app, n, day, filed=filed)
    defs = build_definitions(settings, clock=lambda: NOW, spec=PRICES)

    def run(ticked) -> dict:
        """The run Dagster launches for the sensor's one request, executed for real."""
        (request,) = ticked.run_requests
        tags = {**request.tags, SENSOR_TAG: PRICES.names.new_sensor, RUN_KEY_TAG: request.run_key}
        result = defs.resolve_job_def(PRICES.names.load_job).execute_in_process(
            instance=instance, tags=tags
        )
        assert {e.passed for e in result.get_asset_check_evaluations()} == {True}
        (event,) = result.get_asset_materialization_events()
        assert event.asset_key == AssetKey(PRICES.name)
        return {k: v.value for k, v in event.materialization.metadata.items()}

    def tick(cursor):
        sensor = defs.resolve_sensor_def(PRICES.names.new_sensor)
        with build_sensor_context(
            instance=instance, cursor=cursor, definitions=defs, resources=defs.resources
        ) as context:
            return sensor.evaluate_tick(context)

    first = tick(None)  # a first look asks for a load
    meta = run(first)
    assert (meta["kind"], meta["inserted"], meta["watermark_after"]) == ("full", 3, "none")
    quiet = tick(first.cursor)
    assert not quiet.run_requests and "no change" in quiet.skip_message
    put(app, 1, "2026-01-03", version=1)  # a change with no stamp: the sensor sees it
    meta = run(tick(quiet.cursor))
    assert (meta["updated"], meta["days_touched"], meta["rows_deleted"]) == (1, ["2026-01-03"], 0)


# --- any history, against a plain model -------------------------------------------------

SKUS = st.integers(1, 12)
DAY = st.sampled_from(["2026-01-03", "2026-01-04", "2026-01-05"])
STEP = st.lists(
    st.one_of(
        st.tuples(st.just("put"), SKUS, DAY, st.booleans(), st.integers(0, 2)),
        st.tuples(st.just("delete"), SKUS),
    ),
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(STEP, min_size=1, max_size=4))
def test_any_history_leaves_the_source_and_touches_exactly_the_days_it_changed(history):
    """Random inserts, changes of any value or day, and deletes between whole-table runs:
    after each run the warehouse holds the source's rows, and the run reports exactly the
    rows it wrote and the days and moves a plain model of the table says it touched."""
    with tempfile.TemporaryDirectory() as folder:
        source = make_engine(f"sqlite:///{folder}/app.db", role="app")
        warehouse = make_engine(f"sqlite:///{folder}/warehouse.db", role="warehouse")
        app = TableSource(source, PRICES)
        app.create()
        model: dict[int, tuple[str, bool, int]] = {}  # sku: (day, filed, version)
        for step in history:
            before = dict(model)
            for op in step:
                if op[0] == "put":
                    _, sku, day, filed, version = op
                    put(app, sku, day, filed=filed, version=version)
                    model[sku] = (day, filed, version)
                else:
                    app.delete(op[1])
                    model.pop(op[1], None)
            result = load(app, warehouse, allow=True)
            changed = {k for k in model if k in before and model[k] != before[k]}
            gone = set(before) - set(model)
            days = {model[k][0] for k in (set(model) - set(before)) | changed}
            days |= {before[k][0] for k in changed if before[k][1]} | {before[k][0] for k in gone}
            moves = {(before[k][0], model[k][0]) for k in changed if before[k][1]}
            assert (result.inserted, result.updated) == (
                len(set(model) - set(before)),
                len(changed),
            )
            assert (result.rows_deleted or 0) == len(gone)
            assert result.days_touched == tuple(sorted(days))
            assert result.days_moved == tuple(sorted(m for m in moves if m[0] != m[1]))
            assert sorted(stored(warehouse)) == sorted(model)
        source.dispose()
        warehouse.dispose()
