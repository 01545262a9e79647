"""Reading the source: the one reader of a declared table, which it only reads.

Everything that reads the source reads it here — the load, the ``<name>_match_source``
check, ``pipeline-assets verify`` and the new-rows sensor's observation — through one
window rule (:func:`~.sql.window_filter`) and, for rows, one scan
(:func:`scan_window`; :func:`scan_table` validates it, with one rule for a key the source
holds more than once: its newest copy). The SQL itself is written in :mod:`.sql`.

The table read is always the declaration given (a
:class:`~pipeline_assets.core.table.spec.TableSpec`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import closing
from datetime import datetime, tzinfo
from queue import Empty, Full, Queue
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..commands import DEMO_INIT
from ..db.engines import (
    MYSQL,
    arrow_connect,
    arrow_errors,
    connect_error,
    connectorx_url,
    dialect_of,
    guard,
)
from ..errors import DatabaseError
from ..secrets import redact
from ..table.spec import TableSpec
from .sql import (
    SourceTable,
    _kind,
    _nullable,
    keys_sql,
    scan_sql,
    table_sql,
    window_filter,
)

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


def inspect_source(engine: Engine, spec: TableSpec) -> SourceTable:
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
            if dialect_of(engine) == MYSQL:
                columns = _exact_mysql_names(conn, schema, name, columns)
    except sa.exc.NoSuchTableError:
        if spec.legacy is not None:  # orders' words, which name the demo that makes it
            raise DatabaseError(
                spec.legacy.missing_table.format(url=redact(engine.url), init=DEMO_INIT)
            ) from None
        raise DatabaseError(
            f"the source database {redact(engine.url)} has no table '{spec.table}' "
            f"(declared as the table of {spec.name}): point the source URL at the app's "
            "database or correct the declaration's table"
        ) from None
    table = sa.Table(
        name,
        sa.MetaData(),
        *(sa.Column(c["name"], c["type"]) for c in columns),
        schema=schema or None,
    )
    declared = spec.column_names
    missing = [c for c in declared if c not in table.c]
    if missing:
        raise DatabaseError(
            f"the source table {spec.table} in {redact(engine.url)} lacks column(s) "
            f"{', '.join(missing)}; it needs {', '.join(declared)}. Correct the declaration's "
            "columns (a column's name is the source's, case included), or add the column "
            "to the source table"
        )
    undeclared = sorted(c.name for c in table.columns if c.name not in declared)
    kind = _kind(dialect_of(engine), table.c[spec.stamp].type)
    day_kind = _kind(dialect_of(engine), table.c[spec.day].type) if spec.day_apart else None
    return SourceTable(table, kind, spec, undeclared, day_kind)


def _exact_mysql_names(conn, schema: str, name: str, columns: list[dict]) -> list[dict]:
    """The reflected columns under the names the server holds: SQLAlchemy reads MySQL's
    names out of ``SHOW CREATE TABLE`` and leaves a backtick doubled (```a``b``` reads
    ``a``b``); the catalog has them as they are, in the same order."""
    exact = conn.execute(
        sa.text(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_NAME = :t AND "
            "TABLE_SCHEMA = "
            + ("DATABASE()" if not schema else ":s")
            + " ORDER BY ORDINAL_POSITION"
        ),
        {"t": name, **({"s": schema} if schema else {})},
    ).scalars()
    exact = list(exact)
    if len(exact) != len(columns):
        return columns
    return [{**column, "name": real} for column, real in zip(columns, exact, strict=True)]


def _small_sqlite_window(
    cur,
    src: SourceTable,
    tz: tzinfo,
    start: datetime | None,
    end: datetime | None,
    by_day: bool = False,
    also: tuple[int, ...] = (),
) -> bool:
    """Whether an index serves the window's filter and it holds < :data:`SMALL_WINDOW` rows
    (counted through that index, at most that many: bounded whatever the table)."""
    where = window_filter(src, "sqlite", tz, start, end, by_day=by_day, also=also)
    if not where:
        return False
    table = table_sql(src.spec, "sqlite")
    cur.execute(f"EXPLAIN QUERY PLAN SELECT 1 FROM {table}{where}")
    if not any("INDEX" in str(row[-1]) for row in cur.fetchall()):
        return False  # no index on the cursor: the count would scan the table itself
    cur.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table}{where} LIMIT {SMALL_WINDOW})")
    return cur.fetchone()[0] < SMALL_WINDOW


# --- the scan ----------------------------------------------------------------------------


def _fold_nulls(batch: pa.RecordBatch, spec: TableSpec, nullable: list[int]) -> pa.RecordBatch:
    """A SQLite batch of :func:`scan_sql` with its ``… IS NULL`` columns folded back."""
    import pyarrow as pa
    import pyarrow.compute as pc

    count = len(spec.columns)
    arrays = list(batch.columns[:count])
    for n, i in enumerate(nullable):
        is_null = pc.equal(batch.column(count + n), 1)
        arrays[i] = pc.if_else(is_null, pa.scalar(None, arrays[i].type), arrays[i])
    return pa.RecordBatch.from_arrays(arrays, names=list(spec.column_names))


def scan_window(
    engine: Engine,
    src: SourceTable,
    tz: tzinfo,
    start: datetime | None,
    end: datetime | None,
    batch_rows: int = SCAN_BATCH,
    *,
    by_day: bool = False,
    also: tuple[int, ...] = (),
) -> Iterator[pa.RecordBatch]:
    """The raw rows of the window's SQL superset as Arrow batches, in key order: the
    declared columns, typed as :func:`scan_sql` reads them. ``by_day``: the window is on
    the day column (a range load), not the cursor; ``also``: ids read besides.

    Read through the Arrow ADBC driver of the source database (SQLite, or PostgreSQL
    over binary ``COPY``), or connectorx for MySQL and MariaDB, streamed: at most a few
    batches of ``batch_rows`` rows are in memory whatever the table size. Nothing is
    validated here (see :mod:`~pipeline_assets.core.rows.normalize`).
    """
    dialect = dialect_of(engine)
    if dialect == MYSQL:
        sql = scan_sql(src, dialect, tz, start, end, by_day=by_day, also=also)
        yield from mysql_batches(engine, sql, batch_rows)
        return
    nullable = _nullable(src.spec) if dialect == "sqlite" else []
    try:
        with (
            closing(arrow_connect(engine, "SOURCE_DATABASE_URL")) as conn,
            closing(conn.cursor()) as cur,
        ):
            by_index = False
            if dialect == "sqlite":
                by_index = _small_sqlite_window(cur, src, tz, start, end, by_day, also)
                cur.adbc_statement.set_options(
                    **{"adbc.sqlite.query.batch_rows": str(max(1, min(batch_rows, 65_536)))}
                )
            else:  # the driver's batches are sized in bytes (16 MiB unless told)
                cur.adbc_statement.set_options(
                    **{"adbc.postgresql.batch_size_hint_bytes": str(PG_BATCH_BYTES)}
                )
            cur.execute(
                scan_sql(src, dialect, tz, start, end, by_index=by_index, by_day=by_day, also=also)
            )
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
        raise DatabaseError(
            "reading a MySQL or MariaDB source needs the mysql extra "
            "(pip install 'pipeline_assets[mysql]')"
        ) from None
    try:
        reader = connectorx.read_sql(
            connectorx_url(engine),
            sql,
            return_type="arrow_stream",
            batch_size=batch_rows,
            pre_execution_query=["SET time_zone = '+00:00'"],
        )
        for batch in reader:
            for offset in range(0, batch.num_rows, batch_rows):
                yield batch.slice(offset, batch_rows)
    except RuntimeError as exc:  # connectorx's errors carry the server's error number
        raise connect_error(exc, engine, "SOURCE_DATABASE_URL") from None


def scan_keys(
    source: Engine, src: SourceTable, batch_rows: int = 65_536
) -> Iterator[pa.Array | pa.Table]:
    """Every key the source holds, whatever its cursor, streamed: what a range load asks
    before it deletes a row it no longer finds in its range.

    Arrow tables of the key columns, named as declared: an integer key column as int64
    (null where a value is no integer), every other key column as :func:`scan_window`
    reads it (text on SQLite and MySQL; on PostgreSQL text, or a native date or
    timestamp).
    """
    import pyarrow as pa

    from ..rows.fast import keys_of

    integer = [src.spec.column(k).type.codec.orders_numerically for k in src.spec.primary_key]

    def keys(batch):
        columns = [
            keys_of(c) if is_int else c for c, is_int in zip(batch.columns, integer, strict=True)
        ]
        return pa.Table.from_arrays(columns, names=list(src.spec.primary_key))

    dialect = dialect_of(source)
    sql = keys_sql(src, dialect)
    if dialect == MYSQL:
        for batch in mysql_batches(source, sql, batch_rows):
            if batch.num_rows:
                yield keys(batch)
        return
    try:
        with (
            closing(arrow_connect(source, "SOURCE_DATABASE_URL")) as conn,
            closing(conn.cursor()) as cur,
        ):
            if dialect == "sqlite":
                cur.adbc_statement.set_options(
                    **{"adbc.sqlite.query.batch_rows": str(max(1, min(batch_rows, 65_536)))}
                )
            cur.execute(sql)
            for batch in cur.fetch_record_batch():
                if batch.num_rows:
                    yield keys(batch)
    except arrow_errors() as exc:
        raise connect_error(exc, source, "SOURCE_DATABASE_URL") from None


def scan_table(
    source: Engine,
    src: SourceTable,
    tz: tzinfo,
    start: datetime | None,
    end: datetime | None,
    batch_rows: int = SCAN_BATCH,
    *,
    by_day: bool = False,
    also: tuple[int, ...] = (),
) -> Iterator[tuple[pa.Table, int]]:
    """The window's rows of ``src.spec``, validated and normalized, one row per primary
    key, in ascending key order across all batches, with the number of older copies
    dropped (a source without a primary key): the newest copy of a key wins. ``by_day``:
    the window is on the day column (a range load), not the cursor; ``also``: holes.

    The source is read in key order, so every copy of a key is in the same scanned batch
    or the next: the rows of the key the batch ends with (its last row's) wait for the
    next batch before :func:`~pipeline_assets.core.rows.normalize.newest_per_key` picks its newest
    copy. An invalid row raises :class:`~pipeline_assets.core.errors.InvalidRowError` naming it.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..rows.checks import newest_per_key
    from ..rows.normalize import normalize, within

    spec = src.spec
    held = None
    for raw in scan_window(source, src, tz, start, end, batch_rows, by_day=by_day, also=also):
        if raw.num_rows == 0:
            continue
        rows = normalize(raw, tz, spec)
        if spec.counts_ids and not by_day:  # a window of ids: from start on, and ``also``
            if start is not None:
                kept = pc.greater_equal(rows[spec.cursor], start)
                holes = pc.is_in(rows[spec.cursor], pa.array(also, pa.int64()))
                rows = rows.filter(pc.or_(kept, holes))
        else:
            rows = within(rows, start, end, by_day=by_day)
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
