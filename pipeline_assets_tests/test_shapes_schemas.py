"""The rules of a schema change hold for every table shape.

For a table whose days go by another column (``CAPTURES``), an append-only one
(``EVENTS``) and one without a change stamp (``PRICES``), on a SQLite and a PostgreSQL
warehouse, the app adds a column and fills it for every row without touching a stamp,
then the user declares it:

- the next run adds it to the warehouse table; rows it did not read again are named, by
  their day column's day, as days to fill, and ``verify``'s printed range loads fill
  them; a table compared whole reads every row, so its run fills them all at once;
- a changed key, or a column whose type its stored values may not fit, is refused when
  the run starts, writing nothing.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.db.schema import warehouse_table
from pipeline_assets.core.errors import DeclarationChanged, TypeChangeRefused
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.verify import DIFFERS_FROM_SOURCE, LACKS_COLUMN

from .support import database_urls
from .table_sources import TableSource, check, load, ranges, stamp
from .tables import CAPTURES_ATTRIBUTES, EVENTS_ATTRIBUTES, PRICES_ATTRIBUTES

SHAPES = {"day_column": CAPTURES_ATTRIBUTES, "ids": EVENTS_ATTRIBUTES, "whole": PRICES_ATTRIBUTES}


def with_columns(attributes: dict, **columns) -> dict:
    return {**attributes, "columns": {**attributes["columns"], **columns}}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request):
    return request.param


@pytest.fixture(params=sorted(SHAPES))
def loaded(request, backend, tmp_path):
    """(TableSource, warehouse, attributes): rows 1–8 on the days of their number, loaded."""
    attributes = SHAPES[request.param]
    urls = database_urls(backend, tmp_path, request)
    source = make_engine(urls["source"], role="app")
    warehouse = make_engine(urls["warehouse"], role="warehouse")
    app = TableSource(source, declare(attributes))
    app.create()
    for n in range(1, 9):
        app.put(n, stamp(f"2026-01-{n:02}T10:00"))
    load(app, warehouse)
    yield app, warehouse, attributes
    source.dispose()
    warehouse.dispose()


def migrate(app: TableSource) -> None:
    """The app's migration: a column ``code``, filled for every row, no stamp touched."""
    table = app._q(app.spec.table)
    key = app._q(app.spec.primary_key[0])
    with app.engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN code TEXT")
        conn.exec_driver_sql(f"UPDATE {table} SET code = 'C' || CAST({key} AS VARCHAR(10))")


def codes(warehouse, spec) -> dict[int, str | None]:
    table = warehouse_table(spec)
    with warehouse.connect() as conn:
        rows = conn.execute(sa.select(table.c[spec.primary_key[0]], table.c.code)).all()
    return {int(k): code for k, code in rows}


def test_a_declared_column_is_added_and_filled_by_the_printed_range_loads(loaded, tmp_path):
    app, warehouse, attributes = loaded
    migrate(app)
    app = TableSource(app.engine, declare(with_columns(attributes, code="text")))
    added = load(app, warehouse)
    assert added.columns_added == ("code",)
    filled = {n for n, code in codes(warehouse, app.spec).items() if code == f"C{n}"}
    if app.spec.compares_whole:  # every row read, every row filled, in that run
        assert (added.days_to_fill, filled) == ((), set(range(1, 9)))
    else:  # what the lookback read again is filled; the days of every row before wait
        assert filled and filled != set(range(1, 9))
        # (a window on the cursor reads no day of the day column whole: all are named)
        days = [f"2026-01-{n:02}" for n in range(1, 9)]
        assert list(added.days_to_fill) == days
        report = check(app, warehouse, tmp_path / "files")
        named = {p.day for p in report.problems if p.kind in (DIFFERS_FROM_SOURCE, LACKS_COLUMN)}
        assert sorted(named) == days
        for start, end in ranges(report.repair):
            load(app, warehouse, start, end)
    assert codes(warehouse, app.spec) == {n: f"C{n}" for n in range(1, 9)}
    assert not [p for p in check(app, warehouse, tmp_path / "files").problems if p.fails]


def test_a_changed_key_or_a_narrowing_is_refused_and_writes_nothing(loaded):
    app, warehouse, attributes = loaded
    table = warehouse_table(app.spec)
    with warehouse.connect() as conn:
        before = sorted(tuple(r) for r in conn.execute(sa.select(table)))
    key = app.spec.primary_key
    rekeyed = {**attributes, "primary_key": [*key, "note"] if len(key) == 1 else [key[0]]}
    rekeyed["columns"] = {**attributes["columns"], "note": "text"}
    narrower = with_columns(attributes, amount="decimal(10,1)")
    if "price" in attributes["columns"]:
        narrower = with_columns(attributes, price="decimal(10,1)")
    for changed, refusal in ((rekeyed, DeclarationChanged), (narrower, TypeChangeRefused)):
        app.put(9, stamp("2026-01-09T10:00"))
        with pytest.raises(refusal):
            load(TableSource(app.engine, declare(changed)), warehouse)
    with warehouse.connect() as conn:
        assert sorted(tuple(r) for r in conn.execute(sa.select(table))) == before
