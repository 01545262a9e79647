"""The raw database floor of one first load, in a fresh process, for ``bench_tables.py``:
prints one JSON line.

    BENCH_SOURCE_URL=… BENCH_WAREHOUSE_URL=… python benchmarks/floor_child.py orders|payments

What no loader of these rows into this warehouse can do without: the source's rows read
into Arrow by its ADBC driver (the load's own SQL, ``scan_sql``, with no check of any
value), then written into an empty table of the warehouse's own DDL (key, change-stamp
index) in one transaction, twice:

- ``write_driver``: the way the load writes (``core/warehouse/staging.py``): SQLite through the
  standard ``sqlite3`` module by the stage's own ``Stage._insert_runs`` (many rows per
  ``INSERT``, one flat list of values made by ``to_pylist``); PostgreSQL by ``COPY …
  FROM STDIN (FORMAT csv)`` of Arrow's CSV;
- ``write_c``: the Arrow table handed whole to the ADBC driver's ``adbc_ingest`` (C, no
  Python value at all): what a loader could reach only with a second SQLite library in
  the process, which the load does not risk (``core/warehouse/staging.py`` says why).

The ratio of two tables' floors is what their per-value costs allow: a ten-column row
costs SQLite about twice a four-column one whoever writes it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from datetime import timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import io  # noqa: E402

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.csv as pacsv  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from sqlalchemy.schema import CreateIndex, CreateTable  # noqa: E402

from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.db.schema import warehouse_table
from pipeline_assets.core.source.scan import inspect_source
from pipeline_assets.core.source.sql import scan_sql
from pipeline_assets.core.table import ORDERS, working
from pipeline_assets.core.warehouse.staging import Stage
from pipeline_assets_tests.tables import PAYMENTS  # noqa: E402


def read(url: str, spec) -> tuple[float, pa.Table]:
    """The source's rows as the load's SQL reads them (text on SQLite), NULLs folded back."""
    engine = make_engine(url, role="app")
    dialect = engine.dialect.name
    sql = scan_sql(inspect_source(engine, spec), dialect, timezone.utc, None, None)
    started = time.perf_counter()
    conn = adbc(url)
    try:
        cur = conn.cursor()
        if dialect == "sqlite":
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": "65536"})
        cur.execute(sql)
        table = cur.fetch_arrow_table()
        cur.close()
    finally:
        conn.close()
    for i, column in enumerate(spec.columns):  # SQLite: ifnull(…, '') and a flag per nullable
        flag = f"{working.NULL_FLAG}{i}"
        if flag in table.column_names:
            values = table[column.name]
            folded = pc.if_else(pc.equal(table[flag], 1), pa.scalar(None, values.type), values)
            table = table.set_column(table.schema.get_field_index(column.name), column.name, folded)
    table = table.select(list(spec.column_names))
    seconds = time.perf_counter() - started
    return seconds, stored(table, spec)


def stored(table: pa.Table, spec) -> pa.Table:
    """The warehouse's column types (integers and booleans as int64 on SQLite), not
    timed: the load's checks make them, the floor only moves them."""
    arrays = []
    for column in spec.columns:
        values = table[column.name]
        kind = column.type.kind
        if kind == "integer":
            values = pc.cast(values, pa.int64())
        elif kind == "float":
            values = pc.cast(values, pa.float64())
        elif kind == "boolean":
            if not pa.types.is_boolean(values.type):  # SQLite's '0'/'1'
                values = pc.cast(pc.cast(values, pa.int64()), pa.bool_())
        else:
            values = pc.cast(values, pa.string())
        arrays.append(values)
    return pa.table(arrays, names=list(spec.column_names))


def adbc(url: str):
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        import adbc_driver_sqlite.dbapi

        return adbc_driver_sqlite.dbapi.connect(parsed.database)
    import adbc_driver_postgresql.dbapi

    return adbc_driver_postgresql.dbapi.connect(
        parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    )


def ddl(spec, dialect) -> tuple[str, list[str]]:
    """The warehouse table's ``CREATE TABLE`` and what to build after its rows: the
    change stamp's index and, on PostgreSQL, the primary key (built once from the rows,
    as the load's direct write does; SQLite cannot add a key to a table)."""
    table = warehouse_table(spec)
    create = str(CreateTable(table).compile(dialect=dialect))
    after = [str(CreateIndex(i).compile(dialect=dialect)) for i in table.indexes]
    if dialect.name == "postgresql":
        keys = ", ".join(f'"{k}"' for k in spec.primary_key)
        create = re.sub(r",\s*PRIMARY KEY \([^)]*\)", "", create)
        after.insert(0, f'ALTER TABLE "{spec.name}" ADD PRIMARY KEY ({keys})')
    return create, after


def write_driver(url: str, spec, table: pa.Table) -> float:
    """As the load writes: SQLite's ``sqlite3`` in runs of rows, PostgreSQL's ``COPY``."""
    engine = make_engine(url, role="warehouse")
    create, indexes = ddl(spec, engine.dialect)
    names = list(spec.column_names)
    with engine.connect() as conn:
        driver = conn.connection.driver_connection
        started = time.perf_counter()
        if engine.dialect.name == "sqlite":
            driver.execute("BEGIN")
            driver.execute(create)
            width = len(names)
            insert = f"INSERT INTO {spec.name} VALUES "
            for batch in table.to_batches(65_536):
                flat: list = [None] * (batch.num_rows * width)
                for i in range(width):
                    flat[i::width] = batch.column(i).to_pylist()
                Stage._insert_runs(driver, insert, width, flat)  # the load's own writer
            for index in indexes:
                driver.execute(index)
            driver.commit()
        else:
            with driver.cursor() as cur:
                cur.execute(create)
                for batch in table.to_batches(65_536):
                    buffer = io.BytesIO()
                    pacsv.write_csv(
                        pa.Table.from_batches([batch]),
                        buffer,
                        pacsv.WriteOptions(include_header=False),
                    )
                    with cur.copy(f"COPY {spec.name} FROM STDIN (FORMAT csv)") as copy:
                        copy.write(buffer.getbuffer())
                for index in indexes:
                    cur.execute(index)
            driver.commit()
        seconds = time.perf_counter() - started
    engine.dispose()
    return seconds


def write_c(url: str, spec, table: pa.Table) -> float:
    """The whole Arrow table to ADBC's ``adbc_ingest``: no Python value at all."""
    engine = make_engine(url, role="warehouse")
    create, indexes = ddl(spec, engine.dialect)
    engine.dispose()
    if engine.dialect.name == "sqlite":  # integers for booleans, as SQLite stores them
        table = pa.table(
            [pc.cast(c, pa.int64()) if pa.types.is_boolean(c.type) else c for c in table.columns],
            names=table.column_names,
        )
    started = time.perf_counter()
    conn = adbc(url)
    try:
        cur = conn.cursor()
        cur.execute(create)
        cur.adbc_ingest(spec.name, table, mode="append")
        for index in indexes:
            cur.execute(index)
        conn.commit()
        cur.close()
    finally:
        conn.close()
    return time.perf_counter() - started


def main(table: str) -> int:
    spec = {"orders": ORDERS, "payments": PAYMENTS}.get(table)
    if spec is None:
        raise SystemExit(f"floor_child: unknown table {table!r} (orders or payments)")
    read_s, rows = read(os.environ["BENCH_SOURCE_URL"], spec)
    driver_s = write_driver(os.environ["BENCH_WAREHOUSE_URL"], spec, rows)
    c_s = write_c(os.environ["BENCH_WAREHOUSE_C_URL"], spec, rows)
    print(
        json.dumps(
            {"rows": rows.num_rows, "read": read_s, "write_driver": driver_s, "write_c": c_s}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
