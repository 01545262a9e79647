"""The two sides of every comparison, read as Arrow batches of stored rows with their day.

- The source: through :func:`~pipeline_assets.core.source.scan.scan_table`, the load's own scan
  (validated, normalized, one row per key — its newest copy — in key order), so that a
  comparison sees the source exactly as a load would store it.
- The warehouse: the declared table (``orders`` unless ``spec`` says otherwise) through
  the warehouse database's Arrow driver, each stored cursor read back as the instant it
  stands for and given its day by the same rule
  (:func:`~pipeline_assets.core.rows.normalize.day_numbers`; a date cursor's day is its date);
  the SQL of each read and the typed table it gives are :mod:`.stored`'s.

Each side is streamed (a few batches in memory, whatever the table size) and, where only
totals are needed, folded into per-day digests (:mod:`pipeline_assets.core.rows.digest`).
:func:`day_digests` reads both sides at once, one in a thread of its own: both drivers and
Arrow's kernels spend their time outside the GIL, so on two cores the slower side sets
the time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from datetime import datetime, tzinfo

import pyarrow as pa
from sqlalchemy.engine import Engine

from ..db import sqlite_reader
from ..db.engines import (
    arrow_connect,
    arrow_errors,
    connect_error,
    dialect_of,
    guard,
    has_table,
    sqlite_name,
)
from ..db.quoting import quote
from ..db.schema import missing_columns
from ..errors import DatabaseError
from ..failures import UNREACHABLE
from ..rows.digest import DayDigest, add_days
from ..secrets import redact
from ..source.scan import SCAN_BATCH, SMALL_WINDOW, inspect_source, scan_table
from ..table.spec import TableSpec
from .stored import Stored, column_array

Span = tuple[datetime | None, datetime | None]  # [start, end); None: open on that side
EVERYTHING: tuple[Span, ...] = ((None, None),)
_ENV = "WAREHOUSE_DATABASE_URL"


def source_rows(
    source: Engine,
    tz: tzinfo,
    spans: Sequence[Span] = EVERYTHING,
    *,
    batch_rows: int = SCAN_BATCH,
    spec: TableSpec,
) -> Iterator[pa.Table]:
    """The source's rows of ``spec`` stamped in ``spans`` as the load stores them, with
    ``day``; in key order within each span. An invalid row raises
    :class:`~pipeline_assets.core.rows.orders.InvalidRowError`, which each caller words."""
    src = inspect_source(source, spec)
    for start, end in spans:
        for rows, _ in scan_table(source, src, tz, start, end, batch_rows, by_day=True):
            yield rows


def warehouse_rows(
    warehouse: Engine,
    tz: tzinfo,
    spans: Sequence[Span] = EVERYTHING,
    *,
    ordered: bool = False,
    batch_rows: int = SCAN_BATCH,
    keys: tuple[int, int] | None = None,
    spec: TableSpec,
) -> Iterator[pa.Table]:
    """The warehouse's rows of ``spec`` stamped in ``spans``, with ``day`` (in key order
    within each span when ``ordered``; only ``keys[0] <= key < keys[1]`` when given, for
    a key whose first column is an integer: that column's range). Nothing when no load has
    made the table yet.

    PostgreSQL is read through its Arrow driver. SQLite never through a second copy of the
    SQLite library in this process (:mod:`~pipeline_assets.core.db.sqlite_reader` says why):
    up to :data:`READER_ROWS` through the engine's own driver, more through the Arrow
    driver in a reader process of their own, three times as fast on a million.
    """
    if not has_table(warehouse, spec.name, _ENV):
        return
    with guard(warehouse, _ENV):
        absent = missing_columns(warehouse, spec)
    stored = Stored(spec, dialect_of(warehouse), tz, absent)
    if warehouse.dialect.name == "sqlite":
        yield from _sqlite_rows(warehouse, stored, spans, ordered, batch_rows, keys)
        return
    try:
        with closing(arrow_connect(warehouse, _ENV)) as conn, closing(conn.cursor()) as cur:
            for start, end in spans:
                cur.execute(stored.sql(start, end, ordered=ordered, keys=keys))
                for batch in cur.fetch_record_batch():
                    yield from _tables(batch, batch_rows, stored)
    except arrow_errors() as exc:
        raise connect_error(exc, warehouse, _ENV) from None


def _tables(batch: pa.RecordBatch, batch_rows: int, stored: Stored) -> Iterator[pa.Table]:
    for offset in range(0, batch.num_rows, batch_rows):
        yield stored.typed(pa.Table.from_batches([batch.slice(offset, batch_rows)]))


# From this many rows a SQLite warehouse is read by the reader process: its 0.35 s start
# is paid back at 1.4 µs a row (2.2 µs through sqlite3's tuples, 0.8 µs through Arrow).
READER_ROWS = 250_000


def _sqlite_rows(
    warehouse: Engine,
    stored: Stored,
    spans: Sequence[Span],
    ordered: bool,
    batch_rows: int,
    keys: tuple[int, int] | None,
) -> Iterator[pa.Table]:
    """:func:`warehouse_rows` of a SQLite warehouse."""
    with guard(warehouse, _ENV), warehouse.connect() as conn:
        cur = conn.connection.driver_connection.cursor()
        try:
            plans = []
            for start, end in spans:
                large = _at_least(cur, stored, start, end, keys, SMALL_WINDOW)
                # SQLite keeps no statistics: a large range reads faster by a table scan
                plans.append(
                    (
                        stored.sql(start, end, ordered=ordered, keys=keys, plus=large),
                        large and _at_least(cur, stored, start, end, keys, READER_ROWS),
                    )
                )
            if not any(large for _, large in plans):
                for sql, _ in plans:
                    cur.execute(sql)
                    while part := cur.fetchmany(batch_rows):
                        yield stored.arrow(part)
                return
        finally:
            cur.close()
    database = sqlite_name(warehouse.url)
    try:
        for batch in sqlite_reader.read(database, [sql for sql, _ in plans], batch_rows):
            yield from _tables(batch, batch_rows, stored)
    except sqlite_reader.ReaderError as exc:
        raise DatabaseError(
            f"cannot read the warehouse database at {redact(warehouse.url)}: {exc}. Check {_ENV}.",
            kind=UNREACHABLE,
        ) from None


def _at_least(
    cur,
    stored: Stored,
    start: datetime | None,
    end: datetime | None,
    keys: tuple[int, int] | None,
    rows: int,
) -> bool:
    """Whether the table holds ``rows`` or more in the range (counted through its indexes,
    at most that many: bounded whatever the table)."""
    condition = stored.condition(start, end, keys)
    cur.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {stored.table}"
        + (f" WHERE {condition}" if condition else "")
        + f" LIMIT {rows})"
    )
    return cur.fetchone()[0] >= rows


def digest_by_day(tables: Iterable[pa.Table], spec: TableSpec) -> tuple[dict[int, DayDigest], int]:
    """Per-day digests of the rows in ``tables``, and how many rows there were."""
    days: dict[int, DayDigest] = {}
    rows = 0
    for table in tables:
        add_days(days, table, spec)
        rows += table.num_rows
    return days, rows


def day_digests(
    source: Engine,
    warehouse: Engine,
    tz: tzinfo,
    *,
    source_spans: Sequence[Span],
    warehouse_spans: Sequence[Span],
    spec: TableSpec,
) -> tuple[dict[int, DayDigest], dict[int, DayDigest]]:
    """Per-day digests of the source over ``source_spans`` and of the warehouse over
    ``warehouse_spans``, both read at once (the warehouse in a thread of its own). With
    no source day to read (a first load read them all), the warehouse is read as two
    halves of its keys at once instead: its read is then all there is to wait for."""
    halves = _key_halves(warehouse, spec) if not source_spans else None
    with ThreadPoolExecutor(2, thread_name_prefix="pipeline-assets-warehouse") as pool:
        parts = [
            pool.submit(
                lambda keys=keys: digest_by_day(
                    warehouse_rows(warehouse, tz, warehouse_spans, keys=keys, spec=spec), spec
                )[0]
            )
            for keys in (halves or [None])
        ]
        read = (
            digest_by_day(source_rows(source, tz, source_spans, spec=spec), spec)[0]
            if source_spans
            else {}
        )
        stored = parts[0].result()
        for part in parts[1:]:
            for day, digest in part.result().items():
                stored.setdefault(day, DayDigest()).add(digest.rows, digest.checksum, digest.paid)
        return read, stored


def _key_halves(warehouse: Engine, spec: TableSpec) -> list[tuple[int, int]] | None:
    """Two ranges of the key's first column, an integer, that split the warehouse's keys
    (the ends of its key index: two index probes; every row of a composite key's first
    value falls in one half), or None when there is nothing to split."""
    if (
        warehouse.dialect.name != "sqlite"
        or not spec.column(spec.primary_key[0]).type.codec.orders_numerically
        or not has_table(warehouse, spec.name, _ENV)
    ):
        return None
    stored = Stored(spec, "sqlite", None)
    key = quote(spec.primary_key[0], "sqlite")
    # min and max apart: two index probes (both aggregates in one query would be a scan)
    with guard(warehouse, _ENV), warehouse.connect() as conn:
        low = conn.exec_driver_sql(f"SELECT min({key}) FROM {stored.table}").scalar()
        high = conn.exec_driver_sql(f"SELECT max({key}) FROM {stored.table}").scalar()
    if low is None or high - low < 2:
        return None
    middle = low + (high - low) // 2
    return [(low, middle), (middle, high + 1)]


# --- the warehouse by key: what the check's deleted rows need -------------------------------

KEYS_PER_LIST = 1_000  # keys per IN list of warehouse_rows_by_key


def warehouse_keys(
    warehouse: Engine, spans: Sequence[Span], *, spec: TableSpec
) -> Iterator[pa.Table]:
    """The keys of the warehouse's rows stamped in ``spans`` (a table of the key columns):
    only the key is read, through the cursor's index (on SQLite an integer key is the
    rowid, which that index holds: no row is read at all). Through the engine's own
    driver: a few small reads, no Arrow driver to connect."""
    if not has_table(warehouse, spec.name, _ENV):
        return
    stored = Stored(spec, dialect_of(warehouse), None)
    kinds = [spec.column(k).type for k in spec.primary_key]
    select = (
        f"SELECT {', '.join(quote(k, stored.dialect) for k in spec.primary_key)} "
        f"FROM {stored.table}"
    )
    sqls = [
        f"{select} WHERE {stored.condition(start, end, None)}"
        if start is not None or end is not None
        else select
        for start, end in spans
    ]
    with guard(warehouse, _ENV), warehouse.connect() as conn:
        cur = conn.connection.driver_connection.cursor()
        try:
            for sql in sqls:
                cur.execute(sql)
                while part := cur.fetchmany(65_536):
                    columns = list(zip(*part, strict=True))
                    yield pa.table(
                        [column_array(c, kind) for c, kind in zip(columns, kinds, strict=True)],
                        names=list(spec.primary_key),
                    )
        finally:
            cur.close()


def warehouse_rows_by_key(
    warehouse: Engine, tz: tzinfo, keys: Sequence, *, spec: TableSpec
) -> Iterator[pa.Table]:
    """The warehouse's rows whose key is one of ``keys`` (sorted; values for a one-column
    key, tuples otherwise), with ``day``, in key order: :data:`KEYS_PER_LIST` keys per
    ``IN`` list, a probe of the key each."""
    if not keys or not has_table(warehouse, spec.name, _ENV):
        return
    with guard(warehouse, _ENV):
        absent = missing_columns(warehouse, spec)
    stored = Stored(spec, dialect_of(warehouse), tz, absent)
    names = [quote(k, stored.dialect) for k in spec.primary_key]
    column = names[0] if len(names) == 1 else f"({', '.join(names)})"
    with guard(warehouse, _ENV), warehouse.connect() as conn:
        cur = conn.connection.driver_connection.cursor()
        try:
            for i in range(0, len(keys), KEYS_PER_LIST):
                listed = ", ".join(_key_literal(k) for k in keys[i : i + KEYS_PER_LIST])
                cur.execute(
                    f"SELECT {stored.columns} FROM {stored.table} "
                    f"WHERE {column} IN ({listed}) ORDER BY {stored.order}"
                )
                if part := cur.fetchall():
                    yield stored.arrow(part)
        finally:
            cur.close()


def _key_literal(key) -> str:
    """A key as SQL: an integer as it is, text quoted; a composite key as a row value."""
    if isinstance(key, tuple):
        return f"({', '.join(_key_literal(k) for k in key)})"
    if isinstance(key, int) and not isinstance(key, bool):
        return str(int(key))
    return "'" + str(key).replace("'", "''") + "'"
