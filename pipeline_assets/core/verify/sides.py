"""The two sides of every comparison, read as Arrow batches of stored rows with their day.

- The source: through :func:`~pipeline_assets.core.source.scan_orders`, the load's own scan
  (validated, normalized, one row per order — its newest copy — in ``order_id`` order),
  so that a comparison sees the source exactly as a load would store it.
- The warehouse: ``orders`` through the warehouse database's Arrow driver, each
  ``updated_at`` read back as the instant it stands for and given its day by the same
  rule (:func:`~pipeline_assets.core.columnar.day_numbers`).

Each side is streamed (a few batches in memory, whatever the table size) and, where only
totals are needed, folded into per-day digests (:mod:`pipeline_assets.core.digest`).
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
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .. import sqlite_reader
from ..columnar import INSTANT, day_numbers
from ..db import (
    UNREACHABLE,
    DatabaseError,
    arrow_connect,
    arrow_errors,
    connect_error,
    guard,
    has_table,
    orders,
    sqlite_name,
)
from ..digest import DayDigest, add_days
from ..errors import VerifyError
from ..secrets import redact
from ..source import SCAN_BATCH, SMALL_WINDOW, inspect_source, scan_orders
from ..times import canonical, from_canonical

Span = tuple[datetime | None, datetime | None]  # [start, end); None: open on that side
EVERYTHING: tuple[Span, ...] = ((None, None),)
STORED = ("order_id", "status", "amount", "updated_at")
_ENV = "WAREHOUSE_DATABASE_URL"


def source_rows(source: Engine, tz: tzinfo, spans: Sequence[Span] = EVERYTHING, *,
                batch_rows: int = SCAN_BATCH) -> Iterator[pa.Table]:
    """The source's orders stamped in ``spans`` as the load stores them, with ``day``;
    in ``order_id`` order within each span. An invalid row raises
    :class:`~pipeline_assets.core.rows.InvalidRowError`, which each caller words."""
    src = inspect_source(source)
    for start, end in spans:
        for rows, _ in scan_orders(source, src, tz, start, end, batch_rows):
            yield rows


def warehouse_rows(warehouse: Engine, tz: tzinfo, spans: Sequence[Span] = EVERYTHING, *,
                   ordered: bool = False, batch_rows: int = SCAN_BATCH,
                   keys: tuple[int, int] | None = None) -> Iterator[pa.Table]:
    """The warehouse's orders stamped in ``spans``, with ``day`` (in ``order_id`` order
    within each span when ``ordered``; only ``keys[0] <= order_id < keys[1]`` when given).
    Nothing when no load has made the table yet.

    PostgreSQL is read through its Arrow driver. SQLite never through a second copy of the
    SQLite library in this process (:mod:`~pipeline_assets.core.sqlite_reader` says why):
    up to :data:`READER_ROWS` through the engine's own driver, more through the Arrow
    driver in a reader process of their own, three times as fast on a million.
    """
    if not has_table(warehouse, orders.name, _ENV):
        return
    if warehouse.dialect.name == "sqlite":
        yield from _sqlite_rows(warehouse, tz, spans, ordered, batch_rows, keys)
        return
    try:
        with closing(arrow_connect(warehouse, _ENV)) as conn, closing(conn.cursor()) as cur:
            for start, end in spans:
                cur.execute(_stored_sql(start, end, ordered=ordered, keys=keys))
                for batch in cur.fetch_record_batch():
                    yield from _tables(batch, batch_rows, tz)
    except arrow_errors() as exc:
        raise connect_error(exc, warehouse, _ENV) from None


def _tables(batch: pa.RecordBatch, batch_rows: int, tz: tzinfo) -> Iterator[pa.Table]:
    for offset in range(0, batch.num_rows, batch_rows):
        yield _with_days(pa.Table.from_batches([batch.slice(offset, batch_rows)]), tz)


# From this many rows a SQLite warehouse is read by the reader process: its 0.35 s start
# is paid back at 1.4 µs a row (2.2 µs through sqlite3's tuples, 0.8 µs through Arrow).
READER_ROWS = 250_000


def _sqlite_rows(warehouse: Engine, tz: tzinfo, spans: Sequence[Span], ordered: bool,
                 batch_rows: int, keys: tuple[int, int] | None) -> Iterator[pa.Table]:
    """:func:`warehouse_rows` of a SQLite warehouse."""
    with guard(warehouse, _ENV), warehouse.connect() as conn:
        cur = conn.connection.driver_connection.cursor()
        try:
            plans = []
            for start, end in spans:
                large = _at_least(cur, start, end, keys, SMALL_WINDOW)
                # SQLite keeps no statistics: a large range reads faster by a table scan
                plans.append((_stored_sql(start, end, ordered=ordered, keys=keys,
                                          column="+updated_at" if large else "updated_at"),
                              large and _at_least(cur, start, end, keys, READER_ROWS)))
            if not any(large for _, large in plans):
                for sql, _ in plans:
                    cur.execute(sql)
                    while part := cur.fetchmany(batch_rows):
                        columns = list(zip(*part, strict=True))
                        yield _with_days(pa.table(
                            [pa.array(columns[0], pa.int64()),
                             *(pa.array(c, pa.string()) for c in columns[1:])],
                            names=list(STORED)), tz)
                return
        finally:
            cur.close()
    database = sqlite_name(warehouse.url)
    try:
        for batch in sqlite_reader.read(database, [sql for sql, _ in plans], batch_rows):
            yield from _tables(batch, batch_rows, tz)
    except sqlite_reader.ReaderError as exc:
        raise DatabaseError(f"cannot read the warehouse database at {redact(warehouse.url)}: "
                            f"{exc}. Check {_ENV}.", kind=UNREACHABLE) from None


def _at_least(cur, start: datetime | None, end: datetime | None,
              keys: tuple[int, int] | None, rows: int) -> bool:
    """Whether ``orders`` holds ``rows`` or more in the range (counted through its indexes,
    at most that many: bounded whatever the table)."""
    condition = _condition(start, end, keys, "updated_at")
    cur.execute("SELECT count(*) FROM (SELECT 1 FROM orders"
                + (f" WHERE {condition}" if condition else "") + f" LIMIT {rows})")
    return cur.fetchone()[0] >= rows


def _condition(start, end, keys, column: str) -> str:
    where = []
    if start is not None:
        where.append(f"{column} >= '{canonical(start)}'")
    if end is not None:
        where.append(f"{column} < '{canonical(end)}'")
    if keys is not None:
        where.append(f"order_id >= {int(keys[0])} AND order_id < {int(keys[1])}")
    return " AND ".join(where)


def _stored_sql(start: datetime | None, end: datetime | None, *, ordered: bool,
                keys: tuple[int, int] | None = None, column: str = "updated_at") -> str:
    """``orders`` in ``[start, end)``: canonical UTC text compares as the instants do, so
    the range is the ``updated_at`` index's (``+updated_at``: not through the index)."""
    condition = _condition(start, end, keys, column)
    texts = ", ".join(f"CAST({c} AS TEXT) AS {c}" for c in STORED[1:])
    return (f"SELECT order_id, {texts} FROM orders"
            + (f" WHERE {condition}" if condition else "")
            + (" ORDER BY order_id" if ordered else ""))


def _with_days(table: pa.Table, tz: tzinfo) -> pa.Table:
    """The stored rows and the day of each, read from its canonical ``updated_at``."""
    table = table.set_column(0, "order_id", pc.cast(table["order_id"], pa.int64()))
    text = table["updated_at"]
    try:
        instants = pc.cast(text, INSTANT)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        instants = pa.array([_instant(order_id, value) for order_id, value in zip(
            table["order_id"].to_pylist(), text.to_pylist(), strict=True)], INSTANT)
    return table.append_column("day", day_numbers(instants, tz))


def _instant(order_id: int, text: str) -> datetime:
    try:
        return from_canonical(text)
    except (TypeError, ValueError):
        raise VerifyError(
            f"the warehouse row of order {order_id} has updated_at {text!r}, which is not "
            "a canonical timestamp; reload it with an explicit-range orders run"
        ) from None


def digest_by_day(tables: Iterable[pa.Table]) -> tuple[dict[int, DayDigest], int]:
    """Per-day digests of the rows in ``tables``, and how many rows there were."""
    days: dict[int, DayDigest] = {}
    rows = 0
    for table in tables:
        add_days(days, table)
        rows += table.num_rows
    return days, rows


def day_digests(source: Engine, warehouse: Engine, tz: tzinfo, *,
                source_spans: Sequence[Span], warehouse_spans: Sequence[Span]
                ) -> tuple[dict[int, DayDigest], dict[int, DayDigest]]:
    """Per-day digests of the source over ``source_spans`` and of the warehouse over
    ``warehouse_spans``, both read at once (the warehouse in a thread of its own). With
    no source day to read (a first load read them all), the warehouse is read as two
    halves of its keys at once instead: its read is then all there is to wait for."""
    halves = _key_halves(warehouse) if not source_spans else None
    with ThreadPoolExecutor(2, thread_name_prefix="pipeline-assets-warehouse") as pool:
        parts = [pool.submit(lambda keys=keys: digest_by_day(
            warehouse_rows(warehouse, tz, warehouse_spans, keys=keys))[0])
            for keys in (halves or [None])]
        read = digest_by_day(source_rows(source, tz, source_spans))[0] \
            if source_spans else {}
        stored = parts[0].result()
        for part in parts[1:]:
            for day, digest in part.result().items():
                stored.setdefault(day, DayDigest()).add(digest.rows, digest.checksum,
                                                        digest.paid)
        return read, stored


def _key_halves(warehouse: Engine) -> list[tuple[int, int]] | None:
    """Two ranges of ``order_id`` that split the warehouse's keys (the ends of its key
    index: two index probes), or None when there is nothing to split."""
    if not has_table(warehouse, orders.name, _ENV):
        return None
    with guard(warehouse, _ENV), warehouse.connect() as conn:  # two aggregates in one
        low = conn.execute(sa.select(sa.func.min(orders.c.order_id))).scalar()  # query: a scan
        high = conn.execute(sa.select(sa.func.max(orders.c.order_id))).scalar()
    if low is None or high - low < 2 or warehouse.dialect.name != "sqlite":
        return None
    middle = low + (high - low) // 2
    return [(low, middle), (middle, high + 1)]


# --- the warehouse by key: what the check's deleted orders need -----------------------------

KEYS_PER_LIST = 1_000  # keys per IN list of warehouse_rows_by_key


def warehouse_keys(warehouse: Engine, spans: Sequence[Span]) -> Iterator[pa.Array]:
    """The keys (int64) of the warehouse's orders stamped in ``spans``: only the key is
    read, through the ``updated_at`` index (on SQLite the key is the rowid, which that
    index holds: no row is read at all). Through the engine's own driver: a few small
    reads, no Arrow driver to connect."""
    if not has_table(warehouse, orders.name, _ENV):
        return
    sqls = [f"SELECT order_id FROM orders WHERE {_condition(start, end, None, 'updated_at')}"
            if start is not None or end is not None else "SELECT order_id FROM orders"
            for start, end in spans]
    with guard(warehouse, _ENV), warehouse.connect() as conn:
        cur = conn.connection.driver_connection.cursor()
        try:
            for sql in sqls:
                cur.execute(sql)
                while part := cur.fetchmany(65_536):
                    yield pa.array([row[0] for row in part], pa.int64())
        finally:
            cur.close()


def warehouse_rows_by_key(warehouse: Engine, tz: tzinfo, keys: Sequence[int]
                          ) -> Iterator[pa.Table]:
    """The warehouse's orders whose key is one of ``keys`` (sorted), with ``day``, in key
    order: :data:`KEYS_PER_LIST` keys per ``IN`` list, a probe of the key each."""
    if not keys or not has_table(warehouse, orders.name, _ENV):
        return
    texts = ", ".join(f"CAST({c} AS TEXT) AS {c}" for c in STORED[1:])
    with guard(warehouse, _ENV), warehouse.connect() as conn:
        cur = conn.connection.driver_connection.cursor()
        try:
            for i in range(0, len(keys), KEYS_PER_LIST):
                listed = ", ".join(str(int(k)) for k in keys[i:i + KEYS_PER_LIST])
                cur.execute(f"SELECT order_id, {texts} FROM orders "
                            f"WHERE order_id IN ({listed}) ORDER BY order_id")
                if part := cur.fetchall():
                    columns = list(zip(*part, strict=True))
                    yield _with_days(pa.table(
                        [pa.array(columns[0], pa.int64()),
                         *(pa.array(c, pa.string()) for c in columns[1:])],
                        names=list(STORED)), tz)
        finally:
            cur.close()
