"""When the app's schema and the declaration drift apart (``core/warehouse/evolve.py``), on a SQLite
and a PostgreSQL warehouse: the story of a column the app adds, which nobody reads until
it is declared, then is added to the warehouse table, its old rows named by ``verify``
and the check until the printed range loads fill them; of a column removed from the
declaration, which stays stored and unwritten; of the widenings applied to stored values
and the changes refused before anything is written; and of loads killed inside a change.

The payments source of ``tables.py`` has a column nobody declared, ``legacy_code``; an
app's migration fills it for every row without touching a change stamp.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import subprocess
import sys
import textwrap
from datetime import date, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from pipeline_assets.assets import load_metadata
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.db.schema import warehouse_table
from pipeline_assets.core.db.state import batches, column_fills, declarations
from pipeline_assets.core.errors import SchemaChangeRefused, TypeChangeRefused
from pipeline_assets.core.load.batch import load_table
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.times import UTC, canonical, to_instant
from pipeline_assets.core.verify import DIFFERS_FROM_SOURCE, LACKS_COLUMN, Repairs, verify
from pipeline_assets.core.verify.horizon import reconcile_horizon
from pipeline_assets.core.warehouse import watermark as wm

from .conftest import NOW, ROOT
from .support import database_urls
from .table_sources import ranges
from .tables import (
    PAYMENTS,
    PAYMENTS_ATTRIBUTES,
    delete_payment,
    make_payments,
    put_payments,
)

MODULE = "shop.definitions"  # the code location the printed commands name
DAYS = [(date(2026, 1, 10) + timedelta(n)).isoformat() for n in range(10)]  # 10th…19th
# one payment a day, captured but every third; cents grow, so one needs six digits
ROWS = [
    (
        n,
        1,
        "failed" if n % 3 == 0 else "captured",
        (n + 1) * 25_000,
        f"{n}.10",
        None,
        f"note {n}",
        True,
        day,
        f"{day} 09:00:00",
    )
    for n, day in enumerate(DAYS)
]
LOOKBACK = 2  # the watermark is the 19th at 09:00: the 18th and 19th are read whole again


def attributes(totals: bool = True, **columns) -> dict:
    """PAYMENTS' attributes with ``columns`` changed (None: removed), without its daily
    totals unless ``totals``."""
    changed = copy.deepcopy(PAYMENTS_ATTRIBUTES)
    if not totals:
        del changed["daily_files"][0]["totals"]
    for name, kind in columns.items():
        if kind is None:
            del changed["columns"][name]
            view = changed["daily_files"][0]["columns"]
            if name in view:
                view.remove(name)
        else:
            changed["columns"][name] = kind
    return changed


WITH_CODE = declare(attributes(legacy_code={"type": "text", "nullable": True}))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def engines(request, tmp_path):
    """(source, warehouse) on one backend, payments loaded once under PAYMENTS."""
    urls = database_urls(request.param, tmp_path, request)
    source = make_engine(urls["source"], role="app")
    warehouse = make_engine(urls["warehouse"], role="warehouse")
    make_payments(source, rows=ROWS)
    run((source, warehouse))
    yield source, warehouse
    source.dispose()
    warehouse.dispose()


def run(engines, spec=PAYMENTS, **kw):
    source, warehouse = engines
    return load_table(source, warehouse, spec=spec, tz=UTC, lookback_days=LOOKBACK, now=NOW, **kw)


def migrate(source) -> None:
    """The app's migration: every row's legacy_code filled, no stamp touched."""
    with source.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE payments SET legacy_code = 'L' || CAST(payment_id AS VARCHAR(10))"
        )


def stored(warehouse, *columns: str) -> list[tuple]:
    with warehouse.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sa.text(
                    f"SELECT payment_id, {', '.join(columns)} FROM payments ORDER BY payment_id"
                )
            )
        ]


def warehouse_columns(warehouse) -> dict[str, bool]:
    """The warehouse table's columns and whether each is nullable."""
    return {c["name"]: c["nullable"] for c in sa.inspect(warehouse).get_columns("payments")}


def run_printed(engines, commands: list[str], spec) -> None:
    """The printed range loads, through core as the asset runs them."""
    for start, end in ranges(commands):
        run(engines, spec, start=to_instant(start, UTC), end=to_instant(end, UTC))


def check(engines, spec):
    return reconcile_horizon(
        *engines, UTC, reconcile_days=3, spec=spec, repairs=Repairs(spec, MODULE)
    )[2]


def verified(engines, spec, tmp_path):
    return verify(*engines, tmp_path / "files", tz=UTC, spec=spec, module=MODULE)


# --- a column the app adds ---------------------------------------------------------------


def test_a_column_nobody_declared_is_not_read_and_is_listed(engines):
    source, warehouse = engines
    migrate(source)
    put_payments(
        source, [(20, 1, "captured", 5, "0.05", None, None, True, None, DAYS[-1] + " 10:00:00")]
    )
    result = run(engines)
    assert result.inserted == 1 and result.undeclared_columns == ("legacy_code",)
    assert "legacy_code" not in warehouse_columns(warehouse)
    assert load_metadata(result, LOOKBACK, PAYMENTS)["undeclared_columns"].value == ["legacy_code"]
    assert result.columns_added == ()


def test_a_declared_column_is_added_and_its_old_rows_are_named_until_filled(engines, tmp_path):
    """The column joins the warehouse table; rows read from then on carry it; the days of
    rows stored before are named, with their range loads, by verify and by the check, and
    those range loads, run, leave both clean."""
    source, warehouse = engines
    migrate(source)
    added = run(engines, WITH_CODE)
    assert warehouse_columns(warehouse)["legacy_code"] is True  # nullable
    assert added.columns_added == ("legacy_code",)
    # the lookback read the 17th from 09:00 (its one row) and the 18th and 19th whole: the
    # days not read whole wait
    assert added.days_to_fill == tuple(DAYS[:-2]) and added.updated == 3
    with warehouse.connect() as conn:
        fills = conn.execute(sa.select(column_fills)).all()
    assert [
        (f.column_name, f.added_batch_id, json.loads(f.days), f.rows_before) for f in fills
    ] == [("legacy_code", added.batch_id, DAYS[:-2], 10)]
    put_payments(
        source, [(30, 1, "captured", 5, "0.05", None, None, True, None, "2026-01-20 08:00:00")]
    )
    with source.begin() as conn:
        conn.exec_driver_sql("UPDATE payments SET legacy_code = 'new' WHERE payment_id = 30")
    run(engines, WITH_CODE)
    assert stored(warehouse, "legacy_code")[-3:] == [(8, "L8"), (9, "L9"), (30, "new")]
    assert stored(warehouse, "legacy_code")[0] == (0, None)
    delete_payment(source, 2, 1)  # and the app deletes one: the range loads delete it too

    report = verified(engines, WITH_CODE, tmp_path)
    lacking = {p.day: p for p in report.problems if p.kind in (DIFFERS_FROM_SOURCE, LACKS_COLUMN)}
    assert sorted(lacking) == DAYS[:-2] and not report.ok
    first = lacking[DAYS[0]]
    assert first.fails and "legacy_code" in first.detail and added.batch_id in first.detail
    assert "1 of them hold no legacy_code though the source has one" in first.detail
    assert ranges(report.repair) == [(DAYS[0], DAYS[-2])]  # one range load of the 10th…17th
    assert all(f" -m {MODULE} " in command for command in report.repair)
    assert report.to_json()["columns_to_fill"][0]["days"] == DAYS[:-2]

    verdict = check(engines, WITH_CODE)  # its window is the 18th…20th: the gap is named too
    assert not verdict.passed and verdict.to_fill == {"legacy_code": DAYS[:-2]}
    assert "column legacy_code was declared after 10 row(s) were stored" in verdict.description
    assert f"{DAYS[0]}…{DAYS[-3]}" in verdict.description
    assert ranges(verdict.repair) == [(DAYS[0], DAYS[-2])]

    assert "only in the warehouse" in lacking[DAYS[2]].detail
    run_printed(engines, report.repair, WITH_CODE)
    assert [v for _, v in stored(warehouse, "legacy_code")] == [
        *(f"L{n}" for n in range(10) if n != 2),
        "new",
    ]
    assert verified(engines, WITH_CODE, tmp_path).ok
    assert check(engines, WITH_CODE).passed
    with warehouse.connect() as conn:
        assert conn.execute(sa.select(column_fills.c.days)).scalar() == "[]"


def test_a_column_declared_before_any_load_is_read_as_null_by_verify(engines, tmp_path):
    """Declared and not loaded yet: verify reads the warehouse table's missing column as
    NULL (never an SQL error), and its range loads add and fill it."""
    source, warehouse = engines
    migrate(source)
    report = verified(engines, WITH_CODE, tmp_path)
    assert {p.day for p in report.problems} == set(DAYS) and not report.ok
    run_printed(engines, report.repair, WITH_CODE)
    assert verified(engines, WITH_CODE, tmp_path).ok


# --- a column removed from the declaration ---------------------------------------------------


def test_a_removed_column_stays_stored_and_is_no_longer_read_or_written(engines):
    source, warehouse = engines
    without = declare(attributes(note=None))
    before = stored(warehouse, "note")
    with source.begin() as conn:  # the app still writes it; nobody reads it now
        conn.exec_driver_sql(
            "UPDATE payments SET note = 'changed', modified_at = modified_at WHERE payment_id = 9"
        )
    put_payments(
        source,
        [(40, 1, "captured", 5, "0.05", None, "never read", True, None, "2026-01-20 08:00:00")],
    )
    result = run(engines, without)
    assert result.columns_removed == ("note",) and result.inserted == 1
    assert "note" in warehouse_columns(warehouse)
    assert stored(warehouse, "note") == [*before, (40, None)]  # kept as it was, never written
    with warehouse.connect() as conn:  # the batch recorded the shape it was written in
        shape = conn.execute(
            sa.select(declarations.c.declaration).where(
                declarations.c.fingerprint == result.declaration
            )
        ).scalar()
    assert set(json.loads(shape)["columns"]) == set(without.column_names)


def test_a_column_declared_again_is_checked_against_the_type_it_was_stored_as(engines):
    """Removed, then declared again: its warehouse column was there all along, holding the
    values of the type it had; another type is refused as any change of type is, the same
    type records its days to fill (its values are as old as the removal)."""
    source, warehouse = engines
    run(engines, declare(attributes(note=None)))
    put_payments(
        source, [(70, 1, "captured", 5, "0.05", None, "new", True, None, "2026-01-20 08:00:00")]
    )
    run(engines, declare(attributes(note=None)))
    with pytest.raises(
        TypeChangeRefused, match="column note is declared integer but stored as text"
    ):
        run(engines, declare(attributes(note={"type": "integer", "nullable": True})))
    again = run(engines, PAYMENTS)
    assert again.columns_added == ("note",) and again.columns_widened == ()
    # the watermark is the 20th at 08:00 now: the 19th and 20th were read whole again
    assert again.days_to_fill == tuple(DAYS[:-1])
    assert stored(warehouse, "note")[-1] == (70, "new")  # the lookback read it again


# --- types --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "column, declared, values",
    [
        # integer -> decimal(P,S): the cents, written with two places (250,000 fits 8 digits)
        ("amount_cents", "decimal(10,2)", [f"{(n + 1) * 25_000}.00" for n in range(10)]),
        ("amount_cents", "decimal", [str((n + 1) * 25_000) for n in range(10)]),
        # a larger scale: the places written out
        ("fee", "decimal(12,4)", [f"{n}.1000" for n in range(10)]),
        # a date becomes the instant of its midnight in the pipeline's zone
        (
            "settle_on",
            {"type": "timestamp", "nullable": True},
            [canonical(to_instant(day, UTC)) for day in DAYS],
        ),
    ],
    ids=["integer-decimal(10,2)", "integer-decimal", "scale", "date-timestamp"],
)
def test_a_widening_rewrites_the_stored_values_and_verify_agrees(
    engines, tmp_path, column, declared, values
):
    wider = declare(attributes(**{column: declared}))
    result = run(engines, wider)
    kind = declared if isinstance(declared, str) else declared["type"]
    assert result.columns_widened == (
        {"column": column, "from": str(PAYMENTS.column(column).type), "to": kind},
    )
    assert [v for _, v in stored(engines[1], column)] == values
    assert result.updated == 0  # the rewritten values are what the source reads as now
    assert verified(engines, wider, tmp_path).ok
    put_payments(
        engines[0],
        [(50, 1, "captured", 7, "0.07", None, None, True, "2026-01-21", "2026-01-20 08:00:00")],
    )
    assert run(engines, wider).inserted == 1 and verified(engines, wider, tmp_path).ok


def everything(warehouse) -> dict:
    """The warehouse table (columns and rows) and the state tables."""
    with warehouse.connect() as conn:
        tables = {
            t.name: sorted(map(tuple, conn.execute(sa.select(t))), key=repr)
            for t in (batches, declarations, column_fills)
        }
        rows = sorted(map(tuple, conn.execute(sa.text("SELECT * FROM payments"))), key=repr)
    return {
        **tables,
        "payments": rows,
        "columns": warehouse_columns(warehouse),
        "watermark": wm.current(warehouse, table="payments"),
    }


@pytest.mark.parametrize(
    "column, declared, stored_type, why",
    [
        ("fee", "decimal(10,1)", "decimal(10,2)", "that is a narrowing"),
        ("fee", "decimal(9,2)", "decimal(10,2)", "that is a narrowing"),
        ("refundable", "integer", "boolean", "boolean values are not integer values"),
        ("amount_cents", "boolean", "integer", "integer values are not boolean values"),
        ("rate", {"type": "integer", "nullable": True}, "float", "float values are not integer"),
        ("amount_cents", "decimal(7,2)", "integer", "a stored value (250000) has more than 5"),
        ("attempt", "text", "integer", "a key column's type is part of what the same row means"),
    ],
    ids=[
        "scale",
        "precision",
        "boolean-integer",
        "integer-boolean",
        "float-integer",
        "too-many-digits",
        "key",
    ],
)
def test_a_type_the_stored_values_may_not_fit_is_refused_and_writes_nothing(
    engines, column, declared, stored_type, why
):
    put_payments(
        engines[0], [(60, 1, "captured", 5, "0.05", None, None, True, None, "2026-01-20 08:00:00")]
    )
    before = everything(engines[1])
    for dry_run in (True, False):
        with pytest.raises(TypeChangeRefused) as refused:
            # no totals: a boolean is no sum (the declaration itself would be refused)
            spec = declare(attributes(totals=False, **{column: declared}))
            run(engines, spec, dry_run=dry_run)
        assert everything(engines[1]) == before
    message = str(refused.value)
    kind = declared if isinstance(declared, str) else declared["type"]
    assert message.startswith(
        f"table payments: column {column} is declared {kind} but stored as {stored_type}"
    )
    assert why in message and "nothing was written" in message
    assert f"Declare it {stored_type} again" in message and "a new name" in message
    assert not refused.value.retryable
    assert run(engines).inserted == 1  # the declaration as it was still loads


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_a_column_removed_that_orders_table_requires(backend, tmp_path, request):
    """The release before declarations made orders' columns NOT NULL: a declaration of
    orders without amount makes it nullable on PostgreSQL (new rows are written without
    it, the stored amounts stay), and is refused on SQLite, which cannot, writing nothing."""
    from pipeline_assets import demo
    from pipeline_assets.core.table import ORDERS
    from pipeline_assets.core.table.orders import ORDERS_ATTRIBUTES

    urls = database_urls(backend, tmp_path, request)
    source = make_engine(urls["source"], role="app")
    warehouse = make_engine(urls["warehouse"], role="warehouse")
    request.addfinalizer(source.dispose)
    request.addfinalizer(warehouse.dispose)
    demo.init(source)
    load_table(source, warehouse, spec=ORDERS, tz=UTC, lookback_days=2, now=NOW)
    spare = copy.deepcopy(ORDERS_ATTRIBUTES)
    del spare["columns"]["amount"], spare["daily_files"][0]["totals"]
    demo.set_order(source, 900, status="paid", amount="1.00", updated_at="2026-01-26", tz=UTC)
    load = lambda: load_table(  # noqa: E731
        source, warehouse, spec=declare(spare), tz=UTC, lookback_days=2, now=NOW
    )
    if backend == "sqlite":
        with pytest.raises(SchemaChangeRefused, match="requires them"):
            load()
        return
    assert load().columns_removed == ("amount",)
    with warehouse.connect() as conn:
        amounts = dict(conn.exec_driver_sql("SELECT order_id, amount FROM orders").all())
    assert amounts[900] is None and amounts[101] is not None


# --- killed inside a change ---------------------------------------------------------------

KILLED_LOAD = textwrap.dedent("""\
    import json, sys
    from pipeline_assets.core.db.engines import make_engine
    from pipeline_assets.core.load.batch import load_table
    from pipeline_assets.core.table.declare import declare
    from pipeline_assets.core.times import UTC
    from pipeline_assets_tests.conftest import NOW

    source_url, warehouse_url, attributes = sys.argv[1:4]
    load_table(
        make_engine(source_url, role="app"),
        make_engine(warehouse_url, role="warehouse"),
        spec=declare(json.loads(attributes)),
        tz=UTC,
        lookback_days=2,
        now=NOW,
    )
""")

CHANGES = {
    "added": attributes(legacy_code={"type": "text", "nullable": True}),
    # on SQLite: renamed, added again as text, filled, the old one dropped
    "widened": attributes(amount_cents="decimal(10,2)"),
}


@pytest.mark.e2e
@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("point", ["load_after_alter", "load_before_commit"])
def test_a_load_killed_inside_a_schema_change_leaves_the_table_and_the_next_run_converges(
    engines, change, point, tmp_path
):
    """SIGKILL after the change is made and before the batch commits (the ALTER and the
    batch are one transaction): the table is as it was; the next run makes the change."""
    source, warehouse = engines
    migrate(source)
    before = everything(warehouse)
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            KILLED_LOAD,
            source.url.render_as_string(hide_password=False),
            warehouse.url.render_as_string(hide_password=False),
            json.dumps(CHANGES[change]),
        ],
        cwd=ROOT,
        env={**os.environ, "PIPELINE_CRASH_AT": point},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    warehouse.dispose()  # the killed process's connections are gone; so are ours
    assert everything(warehouse) == before

    spec = declare(CHANGES[change])
    result = run(engines, spec)
    assert result.columns_added or result.columns_widened
    again = run(engines, spec)  # converged: nothing left to change
    assert (again.columns_added, again.columns_widened, again.updated) == ((), (), 0)
    with warehouse.connect() as conn:
        fills = conn.execute(sa.select(sa.func.count()).select_from(column_fills)).scalar()
        table = warehouse_table(spec)
        assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 10
    assert fills == (1 if change == "added" else 0)


# --- day files written in another shape --------------------------------------------------

# legacy_code declared and written in captured_payments: its shape changes
IN_FILES = attributes(legacy_code={"type": "text", "nullable": True})
IN_FILES["daily_files"][0]["columns"].append("legacy_code")
WIDER_FILES = declare(IN_FILES)
RANGE = {
    "dagster/asset_partition_range_start": DAYS[0],
    "dagster/asset_partition_range_end": DAYS[-1],
}


def test_a_changed_file_shape_makes_every_committed_day_stale_until_rebuilt_once(
    tmp_path, instance
):
    """Manifests record the shape their files were written with: under a declaration
    that changes it, verify names every committed day, a reader refuses them, and the
    refresh sensor requests them once; rebuilt, they are committed in the new shape."""
    from dagster import materialize

    from pipeline_assets.core.daily_files import describe_days, shape_of, stale_days
    from pipeline_assets.core.errors import StaleDayError
    from pipeline_assets.core.verify import FILE_STALE
    from pipeline_assets.definitions import build_definitions
    from pipeline_assets.sensor_runs import RUN_KEY_TAG, SENSOR_TAG
    from pipeline_assets.settings import from_env

    (tmp_path / "data").mkdir()
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    engines = (
        make_engine(settings.source_url, role="app"),
        make_engine(settings.warehouse_url, role="warehouse"),
    )
    make_payments(engines[0], rows=ROWS)
    run(engines)
    folder = tmp_path / "data" / "captured_payments"
    before = build_definitions(settings, spec=PAYMENTS, clock=lambda: NOW)
    job = before.resolve_job_def("captured_payments_job")
    assert job.execute_in_process(instance=instance, tags=RANGE).success
    assert [s.declaration for s in describe_days(folder)] == [shape_of(PAYMENTS).current] * 10

    migrate(engines[0])
    run(engines, WIDER_FILES)
    shape = shape_of(WIDER_FILES)
    report = verify(*engines, folder, tz=UTC, spec=WIDER_FILES, today=date(2026, 1, 27))
    stale = [p for p in report.problems if p.kind == FILE_STALE]
    assert [p.day for p in stale] == DAYS and all(p.fails for p in stale)
    assert "it lacks legacy_code" in stale[0].detail and shape.current in stale[0].detail

    after = build_definitions(settings, spec=WIDER_FILES, clock=lambda: NOW)
    totals_alone = materialize(  # reads the committed files through the IO manager
        [
            after.resolve_assets_def("captured_payments"),
            after.resolve_assets_def("captured_per_day"),
        ],
        selection="captured_per_day",
        partition_key=DAYS[3],
        instance=instance,  # the resources are those the definitions bound
        raise_on_error=False,
    )
    assert not totals_alone.success
    [failure] = [e for e in totals_alone.all_events if e.is_step_failure]
    assert "was written with another declaration" in str(failure.event_specific_data.error)

    name = "captured_payments_refresh_sensor"
    sensor = after.resolve_sensor_def(name)
    with build_sensor_context(instance, after, name) as context:
        first = sensor.evaluate_tick(context)
    assert [
        (r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"])
        for r in first.run_requests
    ] == [(DAYS[0], DAYS[-1])]
    assert json.loads(first.cursor)["declaration"] == shape.current
    with build_sensor_context(instance, after, name, first.cursor) as context:
        assert sensor.evaluate_tick(context).run_requests == []  # requested once: waits

    [request] = first.run_requests
    rebuilt = after.resolve_job_def("captured_payments_job").execute_in_process(
        instance=instance, tags={**request.tags, SENSOR_TAG: name, RUN_KEY_TAG: request.run_key}
    )
    assert rebuilt.success
    with build_sensor_context(instance, after, name, first.cursor) as context:
        settled = sensor.evaluate_tick(context)
    assert settled.run_requests == [] and json.loads(settled.cursor)["owed"] == {}
    assert stale_days(folder, shape) == []
    left = verify(*engines, folder, tz=UTC, spec=WIDER_FILES, today=date(2026, 1, 27))
    # what is left is the days whose rows still lack legacy_code: the files are as declared
    assert {p.kind for p in left.problems} <= {DIFFERS_FROM_SOURCE, LACKS_COLUMN}
    assert sorted({p.day for p in left.problems}) == DAYS[:-2]
    with pytest.raises(StaleDayError):  # the old shape's reader knows, too
        from pipeline_assets.core.daily_files import read_committed_days

        read_committed_days(folder, DAYS[:1], shape=shape_of(PAYMENTS))
    for engine in engines:
        engine.dispose()


def build_sensor_context(instance, defs, name, cursor=None):
    from dagster import build_sensor_context as build

    return build(
        instance=instance,
        cursor=cursor,
        definitions=defs,
        resources=defs.resources,
        sensor_name=name,
    )


# --- the story, in a user's project, through the real dagster CLI -----------------------


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def shop(request, tmp_path, monkeypatch):
    """A user's dg project declaring payments (its module, its folder, the environment of
    a user's shell and the two databases), on one warehouse backend."""
    from .support import dg_project

    data = tmp_path / "data"
    data.mkdir()
    urls = database_urls(request.param, tmp_path, request)
    env = {
        "PIPELINE_DATA_DIR": str(data),
        "SOURCE_DATABASE_URL": urls["source"],
        "WAREHOUSE_DATABASE_URL": urls["warehouse"],
        "PIPELINE_AUTOMATION": "off",
    }
    for name, value in env.items():  # the CLI in this process loads the location too
        monkeypatch.setenv(name, value)
    module = dg_project(tmp_path, {"payments": PAYMENTS_ATTRIBUTES})
    source = make_engine(urls["source"], role="app")
    warehouse = make_engine(urls["warehouse"], role="warehouse")
    make_payments(source, rows=ROWS)
    yield module, tmp_path, env, (source, warehouse)
    source.dispose()
    warehouse.dispose()
    for name in [n for n in sys.modules if n.startswith(module.partition(".")[0])]:
        del sys.modules[name]


def declare_in(root, module: str, attributes: dict) -> None:
    """The user edits the project's defs.yaml of payments."""
    import yaml

    path = root / module.partition(".")[0] / "defs" / "payments" / "defs.yaml"
    path.write_text(
        yaml.safe_dump(
            {"type": "pipeline_assets.IncrementalTable", "attributes": attributes},
            sort_keys=False,
        )
    )


@pytest.mark.e2e
@pytest.mark.long
def test_the_story_of_a_schema_change_in_a_users_project(shop, cli):
    """A column the app adds is listed, then declared: the next run adds it and names the
    days to fill; verify's printed commands, run as printed, fill them and rebuild the
    stale day files; a key change and a narrowing are refused when the run starts; a
    dropped column stays stored and leaves the files once they are rebuilt (these last
    two on SQLite; on PostgreSQL the core tests above run them, at a fraction of the
    cost of four more dagster processes)."""
    from dagster import AssetKey, DagsterInstance

    from .support import user_environment

    module, root, env, engines = shop
    source, warehouse = engines
    user = user_environment(data=root / "data", home=root / "home") | env

    def dagster(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(Path(sys.executable).parent / "dagster"), *argv],
            cwd=root,
            env=user,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def materialize(*argv: str) -> subprocess.CompletedProcess:
        return dagster("asset", "materialize", "-m", module, *argv)

    def metadata(key: str) -> dict:
        with DagsterInstance.from_config(str(root / "home")) as instance:
            event = instance.get_latest_materialization_event(AssetKey(key))
        return {k: getattr(v, "value", v) for k, v in event.asset_materialization.metadata.items()}

    # a column nobody declared: listed, not read
    assert materialize("--select", "payments").returncode == 0
    assert metadata("payments")["undeclared_columns"] == ["legacy_code"]
    built = materialize(
        "--select",
        "captured_payments,captured_per_day",
        "--partition-range",
        f"{DAYS[0]}...{DAYS[-1]}",
    )
    assert built.returncode == 0, built.stderr[-2000:]

    # the app fills it for every row, stamps untouched; the user declares it, in the file too
    migrate(source)
    declare_in(root, module, IN_FILES)
    done = materialize("--select", "payments")
    assert done.returncode == 0, done.stderr[-2000:]
    shown = metadata("payments")
    assert shown["columns_added"] == ["legacy_code"] and shown["days_to_fill"] == DAYS[:-2]

    code, out, _ = cli("verify", "-m", module, **env)
    assert code == 1 and "legacy_code" in out and "written with another declaration" in out
    report = json.loads(cli("verify", "-m", module, "--json", **env)[1])
    for command in report["repair"]:
        argv = shlex.split(command)
        assert argv[:4] == ["dagster", "asset", "materialize", "-m"] and argv[4] == module
        ran = dagster(*argv[1:])
        assert ran.returncode == 0, (command, ran.stderr[-2000:])
    code, out, _ = cli("verify", "-m", module, **env)
    assert code == 0, out
    assert [v for _, v in stored(warehouse, "legacy_code")] == [f"L{n}" for n in range(10)]
    from pipeline_assets.core.daily_files import read_committed_day

    assert (
        read_committed_day(root / "data" / "captured_payments", DAYS[1])[0]["legacy_code"] == "L1"
    )

    if warehouse.dialect.name == "postgresql":
        return  # the refusals and the drop on PostgreSQL: the core tests above, 20 s less
    # a changed key, a narrowing: refused when the run starts, the CLI still loads them
    before = everything(warehouse)
    keyed = copy.deepcopy(IN_FILES) | {"primary_key": ["payment_id"]}
    narrower = copy.deepcopy(IN_FILES)
    narrower["columns"]["fee"] = "decimal(10,1)"
    for attrs, said in (
        (keyed, "primary_key is [payment_id] in the declaration"),
        (narrower, "column fee is declared decimal(10,1) but stored as decimal(10,2)"),
    ):
        declare_in(root, module, attrs)
        refused = materialize("--select", "payments")
        assert refused.returncode != 0 and said in refused.stdout + refused.stderr
        assert everything(warehouse) == before

    # a column dropped from the declaration: kept in the warehouse, gone from rebuilt files
    dropped = copy.deepcopy(IN_FILES)
    del dropped["columns"]["note"]
    dropped["daily_files"][0]["columns"].remove("note")
    declare_in(root, module, dropped)
    assert materialize("--select", "payments").returncode == 0
    assert stored(warehouse, "note")[1] == (1, "note 1")
    report = json.loads(cli("verify", "-m", module, "--json", **env)[1])
    assert report["repair"] and all("captured_payments" in c for c in report["repair"])
    for command in report["repair"]:
        assert dagster(*shlex.split(command)[1:]).returncode == 0, command
    assert "note" not in read_committed_day(root / "data" / "captured_payments", DAYS[1])[0]
    assert cli("verify", "-m", module, **env)[0] == 0


@pytest.mark.e2e
@pytest.mark.postgres
@pytest.mark.celery
def test_a_schema_change_made_by_a_step_on_a_celery_worker(tmp_path, postgres, rabbit):
    """The load of a changed declaration, its step run by a worker of
    deploy/celery-worker.sh serving the user's project: the worker adds the column in the
    batch's transaction on the PostgreSQL warehouse and records the days to fill."""
    from .brokers import CeleryWorker
    from .support import dg_project
    from .worlds import on_celery

    module = dg_project(tmp_path, {"payments": PAYMENTS_ATTRIBUTES})
    urls = {name: postgres.url(name) for name in ("source", "warehouse", "instance")}
    engines = (
        make_engine(urls["source"], role="app"),
        make_engine(urls["warehouse"], role="warehouse"),
    )
    make_payments(engines[0], rows=ROWS)
    run(engines)
    migrate(engines[0])
    declare_in(tmp_path, module, dict(WITH_CODE.attributes))

    env, homes = on_celery(tmp_path, module, urls, rabbit.url)
    worker = CeleryWorker("w1", env | homes["worker"], tmp_path / "worker.log")
    try:
        worker.start().wait_ready()
        done = subprocess.run(
            [str(Path(sys.executable).parent / "dagster"), "asset", "materialize", "-m", module]
            + ["--select", "payments"],
            cwd=tmp_path,
            env=env | homes["run"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        worker.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'Submitting celery task for step "payments"' in done.stderr
    assert worker.log.read_text(errors="replace").count("succeeded in") == 1
    assert warehouse_columns(engines[1])["legacy_code"] is True
    with engines[1].connect() as conn:
        [fill] = conn.execute(sa.select(column_fills)).all()
    assert (fill.column_name, json.loads(fill.days)) == ("legacy_code", DAYS[:-2])
    assert [v for _, v in stored(engines[1], "legacy_code")][-3:] == ["L7", "L8", "L9"]
    for engine in engines:
        engine.dispose()
