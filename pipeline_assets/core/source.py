"""Reading the source: the one reader of a declared table, which it only reads.

Everything that reads the source reads it here — the load, the ``<name>_match_source``
check, ``pipeline-assets verify`` and the new-rows sensor's observation — through one
window rule (:func:`window_filter`) and, for rows, one scan (:func:`scan_window`; for
``orders``, :func:`scan_orders` validates it, with one rule for an order the source holds
more than once: its newest copy).

The table read is a declaration's (:class:`~.spec.TableSpec`), ``orders``
(:data:`~.spec.ORDERS`) unless another is given. For ``orders`` every statement is the one
it was before declarations existed, byte for byte (the plans measured in
``docs/benchmarks`` depend on them). Names are quoted for the dialect only where it needs
it (``"Order"``, ``"user"`` on PostgreSQL, ``shop.payments`` as schema and table).

The SQL filter on the cursor (``updated_at`` for orders) must use the index, so it
compares the column in its own type. A text column can only be compared as strings, and
strings with different offsets or forms do not sort as instants, so for text the SQL
bound is a safe superset (a day wider on each side) and the exact comparison happens
after parsing.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
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
from .spec import ORDERS, Column, TableSpec
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
    """A source table as reflected for a declaration.

    ``table``: its columns and their database types; ``cursor_kind``: how the cursor
    compares in SQL ("text" | "date" | "timestamp" | "timestamptz"; ``updated_at_kind``
    is the same, the name it had when ``orders`` was the only table); ``spec``: the
    declaration; ``undeclared``: the names of the columns the source has and the
    declaration does not (sorted; never read, the load reports them).
    """

    table: sa.Table
    cursor_kind: str
    spec: TableSpec = ORDERS
    undeclared: list[str] = field(default_factory=list, hash=False)

    @property
    def updated_at_kind(self) -> str:
        return self.cursor_kind


def _kind(dialect: str, col_type) -> str:
    """How a column of this database type compares: "text" | "date" | "timestamp" |
    "timestamptz"."""
    if dialect == "sqlite" or not isinstance(col_type, (sa.Date, sa.DateTime)):
        return "text"  # SQLite stores dates as text whatever the declared type
    if dialect == MYSQL and isinstance(col_type, sa.TIMESTAMP):
        return "timestamptz"  # stored as UTC, read in the session's zone: UTC (db.py)
    if isinstance(col_type, sa.DateTime):
        return "timestamptz" if col_type.timezone else "timestamp"
    return "date"


def inspect_source(engine: Engine, spec: TableSpec = ORDERS) -> SourceTable:
    """Reflect the columns of the declaration's table (only them: keys, indexes and
    constraints are not needed, and reflecting them costs more than an incremental load's
    scan) and tell how its cursor must be compared.

    A missing table, or a declared column the table lacks, is a :class:`DatabaseError`
    naming the table (and the columns). A schema-qualified table (``shop.payments``) is
    reflected in its schema.
    """
    schema, _, name = spec.table.rpartition(".")
    try:
        with guard(engine, "SOURCE_DATABASE_URL"), engine.connect() as conn:
            inspector = sa.inspect(conn)
            if schema and schema not in inspector.get_schema_names():
                raise sa.exc.NoSuchTableError(spec.table)  # SQLite: an unknown database
            columns = inspector.get_columns(name, schema=schema or None)
    except sa.exc.NoSuchTableError:
        if spec.table == ORDERS.table:
            raise DatabaseError(
                f"the source database {redact(engine.url)} has no table 'orders': create "
                f"the demo with `{DEMO_INIT}` or point SOURCE_DATABASE_URL at the app"
            ) from None
        raise DatabaseError(
            f"the source database {redact(engine.url)} has no table '{spec.table}' "
            f"(declared as the table of {spec.name}): point the source URL at the app's "
            "database or correct the declaration's table"
        ) from None
    table = sa.Table(name, sa.MetaData(), *(sa.Column(c["name"], c["type"]) for c in columns),
                     schema=schema or None)
    declared = spec.column_names
    missing = [c for c in declared if c not in table.c]
    if missing:
        raise DatabaseError(
            f"the source table {spec.table} in {redact(engine.url)} lacks column(s) "
            f"{', '.join(missing)}; it needs {', '.join(declared)}"
        )
    undeclared = sorted(c.name for c in table.columns if c.name not in declared)
    kind = _kind(dialect_of(engine), table.c[spec.cursor].type)
    return SourceTable(table, kind, spec, undeclared)


def _sql_bound(src: SourceTable, instant: datetime, tz: tzinfo, *, lower: bool):
    """A value of the cursor column's own type that bounds ``instant`` loosely enough."""
    if src.cursor_kind == "timestamptz":
        return instant
    if src.cursor_kind == "text":
        # Any offset or zone shifts a local date by at most one day from UTC: the
        # string 'YYYY-MM-DD' one day (lower) or two days (upper) out is a superset.
        day = instant.astimezone(UTC).date() + timedelta(days=-1 if lower else 2)
        return day.isoformat()
    local = instant.astimezone(tz)
    if src.cursor_kind == "date":
        return local.date() if lower else local.date() + timedelta(days=1)
    shift = timedelta(days=-1 if lower else 1)  # DST folds: a day is always enough
    return local.replace(tzinfo=None) + shift


# --- names, as SQL -----------------------------------------------------------------------

@functools.cache
def _preparer(dialect: str):
    """SQLAlchemy's identifier preparer of ``dialect`` (a name, as :func:`~.db.dialect_of`
    gives it). For MySQL, quoting what either MySQL or MariaDB reserves."""
    from sqlalchemy.dialects import mysql, postgresql, sqlite

    if dialect == MYSQL:
        preparer = mysql.dialect().identifier_preparer
        preparer.reserved_words = (
            preparer.reserved_words
            | mysql.dialect(is_mariadb=True).identifier_preparer.reserved_words)
        return preparer
    return (sqlite if dialect == "sqlite" else postgresql).dialect().identifier_preparer


def quote(name: str, dialect: str) -> str:
    """A column name as ``dialect``'s SQL: as it is unless it must be quoted (a reserved
    word, upper case, other characters): ``order_id``, ``"Order"``, ```Order```."""
    return _preparer(dialect).quote(name)


def table_sql(spec: TableSpec, dialect: str) -> str:
    """The declaration's source table as ``dialect``'s SQL: ``orders``, ``shop.payments``,
    ``"Order"``."""
    schema, _, name = spec.table.rpartition(".")
    preparer = _preparer(dialect)
    return f"{preparer.quote_schema(schema)}.{preparer.quote(name)}" if schema \
        else preparer.quote(name)


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


def _read_as(src: SourceTable, column: Column, dialect: str) -> str:
    """One declared column as the scan selects it (the rules: :func:`scan_sql`)."""
    name = quote(column.name, dialect)
    col_type = src.table.c[column.name].type
    kind = column.type.kind
    stored = src.cursor_kind if column.name == src.spec.cursor else _kind(dialect, col_type)
    if dialect == "sqlite":
        return f"CAST({name} AS TEXT) AS {name}"
    if kind == "integer" and isinstance(col_type, sa.Integer):
        return name
    if dialect == MYSQL:
        if kind in ("timestamp", "date") and stored == "timestamptz":
            return f"CONCAT(CAST({name} AS CHAR), '+00:00') AS {name}"
        if kind == "boolean" and type(col_type).__name__ == "BIT":
            return f"CAST({name} + 0 AS CHAR) AS {name}"  # BIT(1) as 0/1, not a byte
        return f"CAST({name} AS CHAR) AS {name}"
    if kind in ("timestamp", "date") and stored != "text":
        return name
    if kind == "boolean" and isinstance(col_type, sa.Boolean):
        return name
    return f"CAST({name} AS TEXT) AS {name}"


def _numeric_key(column: str, dialect: str) -> str:
    """The key of a text key column as the integer it holds; a value that is none sorts
    last, where validation names it."""
    if dialect == "sqlite":
        return f"CAST({column} AS INTEGER), {column}"
    if dialect == MYSQL:
        return f"CAST({column} AS SIGNED), {column}"
    return (rf"CASE WHEN trim(CAST({column} AS TEXT)) ~ '^-?[0-9]{{1,18}}$' "
            f"THEN CAST(trim(CAST({column} AS TEXT)) AS BIGINT) END, {column}")


def _order_by(src: SourceTable, dialect: str, *, plus: bool) -> str:
    """The primary key's columns in key order, each compared as its type, never by a
    database's collation (``plus``: SQLite's ``+``, no index serves the order)."""
    table = table_sql(src.spec, dialect)
    terms = []
    for key in src.spec.primary_key:
        kind = src.spec.column(key).type.kind
        col_type = src.table.c[key].type
        # the column, qualified: a bare name is the text alias of the select list
        column = f"{table}.{quote(key, dialect)}"
        if kind == "integer":
            terms.append(_numeric_key(column, dialect) if not isinstance(col_type, sa.Integer)
                         else f"+{column}" if plus else column)
        elif dialect != "sqlite" and kind in ("date", "timestamp") and \
                _kind(dialect, col_type) != "text":
            terms.append(column)  # a native date or instant orders as one
        elif dialect == "sqlite":  # BINARY: code point order of UTF-8, whatever the column's
            terms.append(f"{'+' if plus else ''}{column} COLLATE BINARY")
        elif dialect == MYSQL:
            terms.append(f"CAST({column} AS BINARY)")
        else:
            terms.append(f'CAST({column} AS TEXT) COLLATE "C"')
    return ", ".join(terms)


def _nullable(spec: TableSpec) -> list[int]:
    """The positions of the nullable columns among the declared ones."""
    return [i for i, c in enumerate(spec.columns) if c.nullable]


def scan_sql(src: SourceTable, dialect: str, tz: tzinfo, start: datetime | None,
             end: datetime | None, *, by_index: bool = False) -> str:
    """The window's rows as plain SQL for the Arrow reader: the declared columns, in
    declaration order, ordered by the primary key.

    How each declared type is read, per dialect (an integer column "native" only where the
    source column is an integer type; otherwise as text, parsed as text):

    ============  ===================  ==================================  =================
    type          SQLite               MySQL / MariaDB                     PostgreSQL
    ============  ===================  ==================================  =================
    integer       TEXT                 native (else CHAR)                  native (else TEXT)
    text          TEXT                 CHAR                                TEXT
    decimal(P,S)  TEXT                 CHAR (exact spelling)               TEXT (exact)
    float         TEXT (round-trips)   CHAR                                TEXT (shortest
                                                                           exact spelling)
    boolean       TEXT ('0'/'1')       CHAR ('0'/'1'; BIT as col+0)        native bool (else
                                                                           TEXT)
    date          TEXT                 CHAR ('YYYY-MM-DD')                 native date (else
                                                                           TEXT)
    timestamp     TEXT                 CHAR; a TIMESTAMP + '+00:00'        native (else TEXT)
    ============  ===================  ==================================  =================

    On SQLite every value is read as text (a column may mix types row by row, and a
    columnar reader fixes one type per column); the exact parser reads it as before. A
    nullable column is read there as ``ifnull(…, '')`` with a ``… IS NULL`` column after
    the declared ones, which :func:`scan_window` folds back into NULLs: SQLite's Arrow
    reader guesses a column's type from its first batch, and a column NULL throughout
    it would make a later text an error.

    The order: integer key columns by value (one that is not an integer column is sorted
    as the integers it holds, 9 before 10, as every reader of the scan expects), text by
    code point (``COLLATE BINARY`` on SQLite, ``CAST(… AS BINARY)`` on MySQL,
    ``COLLATE "C"`` on PostgreSQL; never the database's collation), native dates and
    instants as such. All copies of one key are adjacent.

    ``by_index`` (SQLite): ``ORDER BY +orders.order_id``, which keeps the planner from
    scanning the table in key order, so it reads the window through the ``updated_at``
    index and sorts what it read. Without it a bounded window is filtered on
    ``+updated_at``: SQLite, which keeps no statistics, would otherwise read a range of a
    month through the index and sort it all (3.5 s for a million rows, against 1 s for the
    scan in key order).
    """
    spec = src.spec
    columns = [_read_as(src, c, dialect) for c in spec.columns]
    if dialect == "sqlite":
        for i in _nullable(spec):
            name = quote(spec.columns[i].name, dialect)
            columns[i] = f"ifnull(CAST({name} AS TEXT), '') AS {name}"
            flag = quote(f"{spec.columns[i].name} is null", dialect)
            columns.append(f"{name} IS NULL AS {flag}")
    cursor = quote(spec.cursor, dialect)
    where = window_filter(src, dialect, tz, start, end,
                          column=f"+{cursor}" if dialect == "sqlite" and not by_index
                          else cursor)
    order = _order_by(src, dialect, plus=bool(by_index and where))
    return f"SELECT {', '.join(columns)} FROM {table_sql(spec, dialect)}{where} ORDER BY {order}"


def window_filter(src: SourceTable, dialect: str, tz: tzinfo, start: datetime | None,
                  end: datetime | None, *, column: str | None = None) -> str:
    """`` WHERE …`` on the cursor for ``[start, end)``, in the column's own type ("" for
    all): the window rule of every reader. For a text column it is the safe superset
    :func:`_sql_bound` gives; readers of rows apply the exact bounds after parsing.
    ``column``: the cursor as SQL (default: its quoted name); ``+updated_at`` keeps SQLite
    from reading the window through the index."""
    if column is None:
        column = quote(src.spec.cursor, dialect)
    cast = {"timestamptz": "::timestamptz", "timestamp": "::timestamp",
            "date": "::date"}.get(src.cursor_kind, "") if dialect == "postgresql" else ""
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
    table = table_sql(src.spec, "sqlite")
    cur.execute(f"EXPLAIN QUERY PLAN SELECT 1 FROM {table}{where}")
    if not any("INDEX" in str(row[-1]) for row in cur.fetchall()):
        return False  # no index on the cursor: the count would scan the table itself
    cur.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table}{where} LIMIT {SMALL_WINDOW})")
    return cur.fetchone()[0] < SMALL_WINDOW


# --- the scan ----------------------------------------------------------------------------

def _fold_nulls(batch: pa.RecordBatch, spec: TableSpec, nullable: list[int]
                ) -> pa.RecordBatch:
    """A SQLite batch of :func:`scan_sql` with its ``… IS NULL`` columns folded back."""
    import pyarrow as pa
    import pyarrow.compute as pc

    count = len(spec.columns)
    arrays = list(batch.columns[:count])
    for n, i in enumerate(nullable):
        is_null = pc.equal(batch.column(count + n), 1)
        arrays[i] = pc.if_else(is_null, pa.scalar(None, arrays[i].type), arrays[i])
    return pa.RecordBatch.from_arrays(arrays, names=list(spec.column_names))


def scan_window(engine: Engine, src: SourceTable, tz: tzinfo, start: datetime | None,
                end: datetime | None, batch_rows: int = SCAN_BATCH
                ) -> Iterator[pa.RecordBatch]:
    """The raw rows of the window's SQL superset as Arrow batches, in key order: the
    declared columns, typed as :func:`scan_sql` reads them.

    Read through the Arrow ADBC driver of the source database (SQLite, or PostgreSQL
    over binary ``COPY``), or connectorx for MySQL and MariaDB, streamed: at most a few
    batches of ``batch_rows`` rows are in memory whatever the table size. Nothing is
    validated here (see :mod:`.columnar`).
    """
    dialect = dialect_of(engine)
    if dialect == MYSQL:
        yield from mysql_batches(engine, scan_sql(src, dialect, tz, start, end), batch_rows)
        return
    nullable = _nullable(src.spec) if dialect == "sqlite" else []
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
                if nullable:
                    batch = _fold_nulls(batch, src.spec, nullable)
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


def keys_sql(src: SourceTable, dialect: str) -> str:
    """Every row's primary key, whatever its cursor, as plain SQL (unordered); each key
    column read as :func:`scan_sql` reads it."""
    keys = [_read_as(src, src.spec.column(k), dialect) for k in src.spec.primary_key]
    return f"SELECT {', '.join(keys)} FROM {table_sql(src.spec, dialect)}"


def _is_orders(spec: TableSpec) -> bool:
    return spec.table == ORDERS.table and spec.primary_key == ORDERS.primary_key


def scan_keys(source: Engine, src: SourceTable, batch_rows: int = 65_536
              ) -> Iterator[pa.Array | pa.Table]:
    """Every key the source holds, whatever its cursor, streamed: what a range load asks
    before it deletes a row it no longer finds in its range.

    For ``orders``: int64 arrays of ``order_id`` (null for a value that is no integer
    key). For another declaration: Arrow tables of the key columns, named as declared, an
    integer key column as int64 (null where a value is no integer), every other key column
    as :func:`scan_window` reads it (text on SQLite and MySQL; on PostgreSQL text, or a
    native date or timestamp).
    """
    import pyarrow as pa

    from .columnar import keys_of

    orders = _is_orders(src.spec)
    integer = [src.spec.column(k).type.kind == "integer" for k in src.spec.primary_key]

    def keys(batch):
        if orders:
            return keys_of(batch.column(0))
        columns = [keys_of(c) if is_int else c for c, is_int in zip(batch.columns, integer,
                                                                       strict=True)]
        return pa.Table.from_arrays(columns, names=list(src.spec.primary_key))

    dialect = dialect_of(source)
    sql = keys_sql(src, dialect)
    if dialect == MYSQL:
        for batch in mysql_batches(source, sql, batch_rows):
            if batch.num_rows:
                yield keys(batch)
        return
    try:
        with closing(arrow_connect(source, "SOURCE_DATABASE_URL")) as conn, \
                closing(conn.cursor()) as cur:
            if dialect == "sqlite":
                cur.adbc_statement.set_options(
                    **{"adbc.sqlite.query.batch_rows": str(max(1, min(batch_rows, 65_536)))})
            cur.execute(sql)
            for batch in cur.fetch_record_batch():
                if batch.num_rows:
                    yield keys(batch)
    except arrow_errors() as exc:
        raise connect_error(exc, source, "SOURCE_DATABASE_URL") from None


def scan_table(source: Engine, src: SourceTable, tz: tzinfo, start: datetime | None,
               end: datetime | None, batch_rows: int = SCAN_BATCH
               ) -> Iterator[tuple[pa.Table, int]]:
    """The window's rows of ``src.spec``, validated and normalized, one row per primary
    key, in ascending key order across all batches, with the number of older copies
    dropped (a source without a primary key): the newest copy of a key wins.

    The source is read in key order, so every copy of a key is in the same scanned batch
    or the next: the rows of the key the batch ends with (its last row's) wait for the
    next batch before :func:`~.columnar.newest_per_key` picks its newest copy. An invalid
    row raises :class:`~.rows.InvalidRowError` naming it.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from .columnar import newest_per_key, normalize, within

    spec = src.spec
    held = None
    for raw in scan_window(source, src, tz, start, end, batch_rows):
        if raw.num_rows == 0:
            continue
        rows = within(normalize(raw, tz, spec), start, end)
        last = normalize(raw.slice(raw.num_rows - 1), tz, spec)
        if held is not None:
            rows = pa.concat_tables([held, rows])
        if rows.num_rows == 0:
            continue
        is_last = None
        for key in spec.primary_key:
            same = pc.equal(rows[key], last[key][0])
            is_last = same if is_last is None else pc.and_(is_last, same)
        held = rows.filter(is_last)
        ready = rows.filter(pc.invert(is_last))
        if ready.num_rows:
            yield newest_per_key(ready, spec)
    if held is not None and held.num_rows:
        yield newest_per_key(held, spec)


def scan_orders(source: Engine, src: SourceTable, tz: tzinfo, start: datetime | None,
                end: datetime | None, batch_rows: int = SCAN_BATCH
                ) -> Iterator[tuple[pa.Table, int]]:
    """:func:`scan_table` of ``orders``: one row per ``order_id``."""
    return scan_table(source, src, tz, start, end, batch_rows)


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
