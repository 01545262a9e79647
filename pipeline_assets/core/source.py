"""Reading the app's ``orders`` table: the one reader of the source, which it only reads.

Everything that reads the source reads it here — the load, the ``orders_match_source``
check, ``pipeline-assets verify`` and the new-orders sensor's observation — through one
window rule (:func:`window_filter`) and, for rows, one scan (:func:`scan_orders`) with one
rule for an order the source holds more than once (its newest copy).

The SQL filter on ``updated_at`` must use the index, so it compares the column in its
own type. A text column can only be compared as strings, and strings with different
offsets or forms do not sort as instants, so for text the SQL bound is a safe superset
(a day wider on each side) and the exact comparison happens after parsing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from queue import Empty, Full, Queue
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .commands import DEMO_INIT
from .db import (
    MYSQL,
    DatabaseError,
    arrow_connect,
    arrow_errors,
    connect_error,
    connectorx_url,
    dialect_of,
    guard,
    redact,
)
from .rows import COLUMNS
from .times import UTC

if TYPE_CHECKING:
    import pyarrow as pa

# pyarrow and the ADBC drivers are imported where the scan runs: the sensors, which import
# this module for the window's SQL, never load them.
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
    elif dialect_of(engine) == MYSQL and isinstance(col_type, sa.TIMESTAMP):
        kind = "timestamptz"  # stored as UTC, read in the session's zone: UTC (db.py)
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


# --- the window, as SQL ------------------------------------------------------------------

def _literal(value, dialect: str) -> str:
    """A bound computed by :func:`_sql_bound` as SQL text (our own dates, never user text).
    MySQL takes no offset in a literal: an instant is written as its UTC wall clock, which
    the session's zone (UTC) reads back as that instant."""
    if isinstance(value, datetime):
        if dialect == MYSQL:
            if value.tzinfo is not None:
                value = value.astimezone(UTC).replace(tzinfo=None)
            return f"'{value.isoformat(sep=' ')}'"
        return f"'{value.isoformat()}'"
    if isinstance(value, date):
        return f"'{value.isoformat()}'"
    return "'" + str(value).replace("'", "''") + "'"


def scan_sql(src: SourceTable, dialect: str, tz: tzinfo, start: datetime | None,
             end: datetime | None, *, by_index: bool = False) -> str:
    """The window's rows as plain SQL for the Arrow reader, in numeric ``order_id`` order.

    On SQLite every value is read as text (a column may mix types row by row, and a
    columnar reader fixes one type per column); the exact parser reads it as before.
    ``by_index`` (SQLite): ``ORDER BY +orders.order_id``, which keeps the planner from
    scanning the table in key order, so it reads the window through the ``updated_at``
    index and sorts what it read. Without it a bounded window is filtered on
    ``+updated_at``: SQLite, which keeps no statistics, would otherwise read a range of a
    month through the index and sort it all (3.5 s for a million rows, against 1 s for the
    scan in key order). A key column that is not an integer column is sorted
    as the integers it holds (9 before 10), as every reader of the scan expects.
    """
    t = src.table.c
    if dialect == MYSQL:  # everything as text, as on SQLite; a TIMESTAMP gets its zone
        key = "order_id" if isinstance(t.order_id.type, sa.Integer) \
            else "CAST(order_id AS CHAR) AS order_id"
        updated = "CONCAT(CAST(updated_at AS CHAR), '+00:00')" \
            if src.updated_at_kind == "timestamptz" else "CAST(updated_at AS CHAR)"
        columns = [key, "CAST(status AS CHAR) AS status", "CAST(amount AS CHAR) AS amount",
                   f"{updated} AS updated_at"]
    elif dialect == "sqlite":
        columns = [f"CAST({c} AS TEXT) AS {c}" for c in ("order_id", "status", "amount",
                                                          "updated_at")]
    else:
        key = "order_id" if isinstance(t.order_id.type, sa.Integer) \
            else "CAST(order_id AS TEXT) AS order_id"
        updated = "updated_at" if src.updated_at_kind != "text" \
            else "CAST(updated_at AS TEXT) AS updated_at"
        columns = [key, "CAST(status AS TEXT) AS status", "CAST(amount AS TEXT) AS amount",
                   updated]
    where = window_filter(src, dialect, tz, start, end,
                          column="+updated_at" if dialect == "sqlite" and not by_index
                          else "updated_at")
    # orders.order_id: the column; a bare order_id names the text alias above, which
    # sorts 10 before 9 (and, on SQLite, a whole-table sort instead of the key's index)
    if not isinstance(t.order_id.type, sa.Integer):
        order = _numeric_key(dialect)
    elif by_index and where:
        order = "+orders.order_id"
    else:
        order = "orders.order_id"
    return f"SELECT {', '.join(columns)} FROM orders{where} ORDER BY {order}"


def _numeric_key(dialect: str) -> str:
    """The key of a text key column as the integer it holds; a value that is none sorts
    last, where validation names it."""
    if dialect == "sqlite":
        return "CAST(orders.order_id AS INTEGER), orders.order_id"
    if dialect == MYSQL:
        return "CAST(orders.order_id AS SIGNED), orders.order_id"
    return (r"CASE WHEN trim(CAST(orders.order_id AS TEXT)) ~ '^-?[0-9]{1,18}$' "
            "THEN CAST(trim(CAST(orders.order_id AS TEXT)) AS BIGINT) END, orders.order_id")


def window_filter(src: SourceTable, dialect: str, tz: tzinfo, start: datetime | None,
                  end: datetime | None, *, column: str = "updated_at") -> str:
    """`` WHERE …`` on ``updated_at`` for ``[start, end)``, in the column's own type ("" for
    all): the window rule of every reader. For a text column it is the safe superset
    :func:`_sql_bound` gives; readers of rows apply the exact bounds after parsing.
    ``column`` ``+updated_at`` keeps SQLite from reading the window through the index."""
    cast = {"timestamptz": "::timestamptz", "timestamp": "::timestamp",
            "date": "::date"}.get(src.updated_at_kind, "") if dialect == "postgresql" else ""
    where = []
    if start is not None:
        bound = _literal(_sql_bound(src, start, tz, lower=True), dialect)
        where.append(f"{column} >= {bound}{cast}")
    if end is not None:
        bound = _literal(_sql_bound(src, end, tz, lower=False), dialect)
        where.append(f"{column} < {bound}{cast}")
    return " WHERE " + " AND ".join(where) if where else ""


def _small_sqlite_window(cur, src: SourceTable, tz: tzinfo, start: datetime | None,
                         end: datetime | None) -> bool:
    """Whether an index serves the window's filter and it holds < :data:`SMALL_WINDOW` rows
    (counted through that index, at most that many: bounded whatever the table)."""
    where = window_filter(src, "sqlite", tz, start, end)
    if not where:
        return False
    cur.execute(f"EXPLAIN QUERY PLAN SELECT 1 FROM orders{where}")
    if not any("INDEX" in str(row[-1]) for row in cur.fetchall()):
        return False  # no index on updated_at: the count would scan the table itself
    cur.execute(f"SELECT count(*) FROM (SELECT 1 FROM orders{where} LIMIT {SMALL_WINDOW})")
    return cur.fetchone()[0] < SMALL_WINDOW


# --- the scan ----------------------------------------------------------------------------

def scan_window(engine: Engine, src: SourceTable, tz: tzinfo, start: datetime | None,
                end: datetime | None, batch_rows: int = SCAN_BATCH
                ) -> Iterator[pa.RecordBatch]:
    """The raw rows of the window's SQL superset as Arrow batches, in ``order_id`` order.

    Read through the Arrow ADBC driver of the source database (SQLite, or PostgreSQL
    over binary ``COPY``), or connectorx for MySQL and MariaDB, streamed: at most a few
    batches of ``batch_rows`` rows are in memory whatever the table size. Nothing is
    validated here (see :mod:`.columnar`).
    """
    dialect = dialect_of(engine)
    if dialect == MYSQL:
        yield from mysql_batches(engine, scan_sql(src, dialect, tz, start, end), batch_rows)
        return
    try:
        with closing(arrow_connect(engine, "SOURCE_DATABASE_URL")) as conn, \
                closing(conn.cursor()) as cur:
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
    except arrow_errors() as exc:
        raise connect_error(exc, engine, "SOURCE_DATABASE_URL") from None


def mysql_batches(engine: Engine, sql: str, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``sql`` on a MySQL or MariaDB source as Arrow batches, streamed by
    connectorx (the ``mysql`` extra) in a session whose zone is UTC, as the engine's."""
    try:
        import connectorx
    except ImportError:
        raise DatabaseError("reading a MySQL or MariaDB source needs the mysql extra "
                            "(pip install 'pipeline_assets[mysql]')") from None
    try:
        reader = connectorx.read_sql(connectorx_url(engine), sql, return_type="arrow_stream",
                                     batch_size=batch_rows,
                                     pre_execution_query=["SET time_zone = '+00:00'"])
        for batch in reader:
            for offset in range(0, batch.num_rows, batch_rows):
                yield batch.slice(offset, batch_rows)
    except RuntimeError as exc:  # connectorx's errors carry the server's error number
        raise connect_error(exc, engine, "SOURCE_DATABASE_URL") from None


def scan_keys(source: Engine, src: SourceTable, batch_rows: int = 65_536
              ) -> Iterator[pa.Array]:
    """Every ``order_id`` the source holds, whatever its ``updated_at``, as int64 arrays
    (null for a value that is no integer key), streamed: what a range load asks before it
    deletes an order it no longer finds in its range."""
    from .columnar import keys_of

    dialect = dialect_of(source)
    cast = "CHAR" if dialect == MYSQL else "TEXT"
    key = "order_id" if dialect != "sqlite" and isinstance(src.table.c.order_id.type,
                                                           sa.Integer) \
        else f"CAST(order_id AS {cast}) AS order_id"
    if dialect == MYSQL:
        for batch in mysql_batches(source, f"SELECT {key} FROM orders", batch_rows):
            if batch.num_rows:
                yield keys_of(batch.column(0))
        return
    try:
        with closing(arrow_connect(source, "SOURCE_DATABASE_URL")) as conn, \
                closing(conn.cursor()) as cur:
            if dialect == "sqlite":
                cur.adbc_statement.set_options(
                    **{"adbc.sqlite.query.batch_rows": str(max(1, min(batch_rows, 65_536)))})
            cur.execute(f"SELECT {key} FROM orders")
            for batch in cur.fetch_record_batch():
                if batch.num_rows:
                    yield keys_of(batch.column(0))
    except arrow_errors() as exc:
        raise connect_error(exc, source, "SOURCE_DATABASE_URL") from None


def scan_orders(source: Engine, src: SourceTable, tz: tzinfo, start: datetime | None,
                end: datetime | None, batch_rows: int = SCAN_BATCH
                ) -> Iterator[tuple[pa.Table, int]]:
    """The window's orders, validated and normalized, one row per order, in ascending
    ``order_id`` order across all batches, with the number of older copies dropped (a
    source without a primary key): the newest copy of an order wins.

    The source is read in ``order_id`` order, so every copy of an order is in the same
    scanned batch or the next: the rows of the key the batch ends with (its last row's)
    wait for the next batch before :func:`~.columnar.newest_per_order` picks its newest
    copy. An invalid row raises :class:`~.rows.InvalidRowError` naming it.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from .columnar import newest_per_order, normalize, within

    held = None
    for raw in scan_window(source, src, tz, start, end, batch_rows):
        if raw.num_rows == 0:
            continue
        rows = within(normalize(raw, tz), start, end)
        last = normalize(raw.slice(raw.num_rows - 1), tz)["order_id"][0]
        if held is not None:
            rows = pa.concat_tables([held, rows])
        if rows.num_rows == 0:
            continue
        is_last = pc.equal(rows["order_id"], last)
        held = rows.filter(is_last)
        ready = rows.filter(pc.invert(is_last))
        if ready.num_rows:
            yield newest_per_order(ready)
    if held is not None and held.num_rows:
        yield newest_per_order(held)


def ahead(items: Iterator, depth: int = 2) -> Iterator:
    """``items``, produced by a thread up to ``depth`` ahead of the consumer.

    The scan (the source driver, Arrow's kernels) and the write (SQLite's or PostgreSQL's
    driver) each spend most of their time outside the GIL, so reading the next batches
    while this one is written overlaps them on a second core. Memory stays bounded (at
    most ``depth`` batches wait); an error in the scan is raised here, in order; if the
    consumer stops early, the producer is told to stop and is joined.
    """
    done = object()
    queue: Queue = Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        queue.put((item, None), timeout=0.1)
                        break
                    except Full:
                        continue
                if stop.is_set():
                    return
            queue.put((done, None))
        except BaseException as exc:  # handed to the consumer, raised there
            queue.put((done, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:  # the scan's connection closes in the thread that used it
                close()

    worker = threading.Thread(target=produce, name="pipeline-assets-scan", daemon=True)
    worker.start()
    try:
        while True:
            item, error = queue.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        while worker.is_alive():  # let a producer blocked on a full queue see the stop
            try:
                queue.get_nowait()
            except Empty:
                pass
            worker.join(timeout=0.1)
