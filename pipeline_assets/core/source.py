"""Reading the app's ``orders`` table: only ever reads, in streaming chunks.

The SQL filter on ``updated_at`` must use the index, so it compares the column in its
own type. A text column can only be compared as strings, and strings with different
offsets or forms do not sort as instants, so for text the SQL bound is a safe superset
(a day wider on each side) and the exact comparison happens after parsing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .commands import DEMO_INIT
from .db import DatabaseError, connect_error, guard, redact
from .rows import COLUMNS, Order, validate
from .times import UTC

if TYPE_CHECKING:
    import pyarrow as pa

# The ADBC drivers and pyarrow are imported where the scan runs: the sensors, which import
# this module for the window's SQL, never load them.
DEFAULT_CHUNK = 10_000
SCAN_BATCH = 16_384  # rows per Arrow batch of the load's scan: ~45 MiB in flight at most
# SQLite plans "WHERE updated_at >= … ORDER BY order_id" as a scan of the whole table in
# key order. When the window holds fewer rows than this (an incremental run's lookback),
# reading them through the updated_at index and sorting them is faster; the load asks
# for that plan after counting, through the index, at most this many rows.
SMALL_WINDOW = 50_000
PG_BATCH_BYTES = 2 * 1024 * 1024  # PostgreSQL's Arrow batches: about 16,000 demo rows


@dataclass(frozen=True)
class SourceTable:
    table: sa.Table
    updated_at_kind: str  # "text" | "date" | "timestamp" | "timestamptz"


def inspect_source(engine: Engine) -> SourceTable:
    """Reflect the columns of ``orders`` (only them: keys, indexes and constraints are
    not needed, and reflecting them costs more than an incremental load's scan) and tell
    how its ``updated_at`` must be compared."""
    try:
        with guard(engine, "SOURCE_DATABASE_URL"), engine.connect() as conn:
            columns = sa.inspect(conn).get_columns("orders")
    except sa.exc.NoSuchTableError:
        raise DatabaseError(
            f"the source database {redact(engine.url)} has no table 'orders': create the "
            f"demo with `{DEMO_INIT}` or point SOURCE_DATABASE_URL at the app"
        ) from None
    table = sa.Table("orders", sa.MetaData(),
                     *(sa.Column(c["name"], c["type"]) for c in columns))
    missing = [c for c in COLUMNS if c not in table.c]
    if missing:
        raise DatabaseError(
            f"the source table orders in {redact(engine.url)} lacks column(s) "
            f"{', '.join(missing)}; it needs {', '.join(COLUMNS)}"
        )
    col_type = table.c.updated_at.type
    if engine.dialect.name == "sqlite" or not isinstance(col_type, (sa.Date, sa.DateTime)):
        kind = "text"  # SQLite stores dates as text whatever the declared type
    elif isinstance(col_type, sa.DateTime):
        kind = "timestamptz" if col_type.timezone else "timestamp"
    else:
        kind = "date"
    return SourceTable(table, kind)


def _sql_bound(src: SourceTable, instant: datetime, tz: tzinfo, *, lower: bool):
    """A value of the column's own type that bounds ``instant`` loosely enough."""
    if src.updated_at_kind == "timestamptz":
        return instant
    if src.updated_at_kind == "text":
        # Any offset or zone shifts a local date by at most one day from UTC: the
        # string 'YYYY-MM-DD' one day (lower) or two days (upper) out is a superset.
        day = instant.astimezone(UTC).date() + timedelta(days=-1 if lower else 2)
        return day.isoformat()
    local = instant.astimezone(tz)
    if src.updated_at_kind == "date":
        return local.date() if lower else local.date() + timedelta(days=1)
    shift = timedelta(days=-1 if lower else 1)  # DST folds: a day is always enough
    return local.replace(tzinfo=None) + shift


def select_window(src: SourceTable, tz: tzinfo, start: datetime | None,
                  end: datetime | None) -> sa.Select:
    """The indexed superset query for ``start <= updated_at < end`` (either side open)."""
    t = src.table
    updated = t.c.updated_at
    if src.updated_at_kind == "text":
        updated = sa.type_coerce(updated, sa.Text)  # no driver-side date conversion
    query = sa.select(
        t.c.order_id, t.c.status, sa.cast(t.c.amount, sa.Text).label("amount"),
        updated.label("updated_at"),
    )
    if start is not None:
        query = query.where(updated >= _sql_bound(src, start, tz, lower=True))
    if end is not None:
        query = query.where(updated < _sql_bound(src, end, tz, lower=False))
    return query.order_by(t.c.order_id)


def read_window(engine: Engine, src: SourceTable, tz: tzinfo, start: datetime | None,
                end: datetime | None, chunk_size: int = DEFAULT_CHUNK
                ) -> Iterator[list[Order]]:
    """Validated orders with ``start <= updated_at < end``, in ``order_id`` order, in chunks.

    Memory stays bounded by ``chunk_size`` whatever the table size (PostgreSQL uses a
    server-side cursor). A row that fails validation raises before its chunk is yielded.
    """
    query = select_window(src, tz, start, end)
    with guard(engine, "SOURCE_DATABASE_URL"):
        with engine.connect() as conn:
            result = conn.execution_options(stream_results=True, yield_per=chunk_size
                                            ).execute(query)
            for part in result.partitions(chunk_size):
                chunk = []
                for order_id, status, amount, updated_at in part:
                    order = validate(order_id, status, amount, updated_at, tz)
                    if start is not None and order.updated_at < start:
                        continue
                    if end is not None and order.updated_at >= end:
                        continue
                    chunk.append(order)
                if chunk:
                    yield chunk


# --- the columnar scan of the load -------------------------------------------------------

def _literal(value) -> str:
    """A bound computed by :func:`_sql_bound` as SQL text (our own dates, never user text)."""
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'"
    if isinstance(value, date):
        return f"'{value.isoformat()}'"
    return "'" + str(value).replace("'", "''") + "'"


def scan_sql(src: SourceTable, dialect: str, tz: tzinfo, start: datetime | None,
             end: datetime | None, *, by_index: bool = False) -> str:
    """:func:`select_window` as plain SQL for a columnar reader, in ``order_id`` order.

    On SQLite every value is read as text (a column may mix types row by row, and a
    columnar reader fixes one type per column); the exact parser reads it as before.
    ``by_index`` (SQLite): ``ORDER BY +orders.order_id``, which keeps the planner from
    scanning the table in key order, so it reads the window through the ``updated_at``
    index and sorts what it read.
    """
    casts = {"sqlite": "CAST({c} AS TEXT)", "postgresql": "CAST({c} AS TEXT)"}[dialect]
    t = src.table.c
    if dialect == "sqlite":
        columns = [casts.format(c=c) + f" AS {c}" for c in ("order_id", "status", "amount",
                                                             "updated_at")]
    else:
        key = "order_id" if isinstance(t.order_id.type, sa.Integer) \
            else casts.format(c="order_id") + " AS order_id"
        updated = "updated_at" if src.updated_at_kind != "text" \
            else "CAST(updated_at AS TEXT) AS updated_at"
        columns = [key, "CAST(status AS TEXT) AS status", "CAST(amount AS TEXT) AS amount",
                   updated]
    where = _window_filter(src, dialect, tz, start, end)
    # orders.order_id: the column; a bare order_id names the text alias above, which
    # sorts 10 before 9 (and, on SQLite, a whole-table sort instead of the key's index)
    return (f"SELECT {', '.join(columns)} FROM orders{where}"
            + (" ORDER BY +orders.order_id" if by_index and where
               else " ORDER BY orders.order_id"))


def _window_filter(src: SourceTable, dialect: str, tz: tzinfo, start: datetime | None,
                   end: datetime | None) -> str:
    """`` WHERE …`` on ``updated_at`` for the window, in the column's own type ("" for all)."""
    cast = {"timestamptz": "::timestamptz", "timestamp": "::timestamp",
            "date": "::date"}.get(src.updated_at_kind, "") if dialect == "postgresql" else ""
    where = []
    if start is not None:
        where.append(f"updated_at >= {_literal(_sql_bound(src, start, tz, lower=True))}{cast}")
    if end is not None:
        where.append(f"updated_at < {_literal(_sql_bound(src, end, tz, lower=False))}{cast}")
    return " WHERE " + " AND ".join(where) if where else ""


def _small_sqlite_window(cur, src: SourceTable, tz: tzinfo, start: datetime | None,
                         end: datetime | None) -> bool:
    """Whether an index serves the window's filter and it holds < :data:`SMALL_WINDOW` rows
    (counted through that index, at most that many: bounded whatever the table)."""
    where = _window_filter(src, "sqlite", tz, start, end)
    if not where:
        return False
    cur.execute(f"EXPLAIN QUERY PLAN SELECT 1 FROM orders{where}")
    if not any("INDEX" in str(row[-1]) for row in cur.fetchall()):
        return False  # no index on updated_at: the count would scan the table itself
    cur.execute(f"SELECT count(*) FROM (SELECT 1 FROM orders{where} LIMIT {SMALL_WINDOW})")
    return cur.fetchone()[0] < SMALL_WINDOW


def _adbc_connect(engine: Engine):
    url = engine.url
    if engine.dialect.name == "sqlite":
        database = url.database or ""
        if database in ("", ":memory:"):
            raise DatabaseError(
                f"the source {redact(url)} is an in-memory database, which only its own "
                "process can read; point SOURCE_DATABASE_URL at a file")
        if database.startswith("file:"):
            params = [f"{k}={v}" for k, v in url.query.items() if k != "uri"]
            database += ("&" if "?" in database else "?") + "&".join(params) if params else ""
        import adbc_driver_sqlite.dbapi as adbc_sqlite

        conn = adbc_sqlite.connect(database)
        with closing(conn.cursor()) as cur:  # wait for a writing app, as the engine does
            cur.execute("PRAGMA busy_timeout = 60000")
        return conn
    if engine.dialect.name == "postgresql":
        import adbc_driver_postgresql.dbapi as adbc_postgresql

        return adbc_postgresql.connect(url.set(drivername="postgresql").render_as_string(
            hide_password=False))
    raise DatabaseError(f"the source dialect {engine.dialect.name!r} is not supported; "
                        "use SQLite or PostgreSQL")


def _adbc_error() -> type[Exception]:
    import adbc_driver_manager

    return adbc_driver_manager.Error


def scan_window(engine: Engine, src: SourceTable, tz: tzinfo, start: datetime | None,
                end: datetime | None, batch_rows: int = SCAN_BATCH
                ) -> Iterator[pa.RecordBatch]:
    """The raw rows of the window's SQL superset as Arrow batches, in ``order_id`` order.

    Read through the Arrow ADBC driver of the source database (SQLite, or PostgreSQL
    over binary ``COPY``), streamed: at most a few batches of ``batch_rows`` rows are in
    memory whatever the table size. Nothing is validated here (see :mod:`.columnar`).
    """
    dialect = engine.dialect.name
    try:
        with closing(_adbc_connect(engine)) as conn, closing(conn.cursor()) as cur:
            by_index = False
            if dialect == "sqlite":
                by_index = _small_sqlite_window(cur, src, tz, start, end)
                cur.adbc_statement.set_options(
                    **{"adbc.sqlite.query.batch_rows": str(max(1, min(batch_rows, 65_536)))})
            else:  # the driver's batches are sized in bytes (16 MiB unless told)
                cur.adbc_statement.set_options(
                    **{"adbc.postgresql.batch_size_hint_bytes": str(PG_BATCH_BYTES)})
            cur.execute(scan_sql(src, dialect, tz, start, end, by_index=by_index))
            reader = cur.fetch_record_batch()
            for batch in reader:
                for offset in range(0, batch.num_rows, batch_rows):
                    yield batch.slice(offset, batch_rows)
    except (_adbc_error(), OSError) as exc:
        raise connect_error(exc, engine, "SOURCE_DATABASE_URL") from None
