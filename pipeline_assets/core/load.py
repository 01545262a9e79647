"""The incremental, idempotent load of ``orders``: one batch, one warehouse transaction.

Rules 1, 2, 3 and 5 meet here: rows are written by key (upsert), the watermark is
advanced in the same transaction as the rows, the read starts ``lookback`` before the
watermark, and every batch has an id derived from its window and content, recorded in
the ledger in that same transaction.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta, tzinfo

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from . import watermark as wm
from .crash import crash_point
from .db import (
    DatabaseError,
    batches,
    ensure_schema,
    guard,
    orders,
    prepare_warehouse,
    require_distinct,
    writing,
)
from .errors import PipelineError
from .rows import Order, digest_text, from_stored
from .source import DEFAULT_CHUNK, inspect_source, read_window
from .times import canonical

FUTURE_TOLERANCE = timedelta(hours=1)
_NOTHING = object()  # announced_batch not given: do not look for unannounced batches


class LoadError(PipelineError):
    """A load asked for something impossible (say, an empty range)."""

    retryable = False  # bad input does not fix itself on a retry


@dataclass(frozen=True)
class LoadResult:
    """What one batch did; every field is shown as materialization metadata."""

    batch_id: str
    kind: str  # "incremental" or "range"
    skipped: bool  # the ledger already had this batch and nothing needed writing
    window_start: datetime | None  # None: the first load reads everything
    window_end: datetime | None  # exclusive; None: open-ended (incremental)
    watermark_before: datetime | None
    watermark_after: datetime | None
    rows_read: int
    inserted: int
    updated: int
    unchanged: int
    days_touched: tuple[str, ...]
    newest_read: datetime | None  # future rows excepted
    dry_run: bool = False
    late_rows: int = 0  # changed rows older than the watermark before the run
    max_lateness: timedelta | None = None  # how far the latest of them was behind it
    future_rows: int = 0  # rows stamped after now + tolerance: loaded, watermark not moved
    future_order_ids: tuple[int, ...] = ()  # the first 20 of them

    def to_json(self) -> dict:
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, datetime):
                out[key] = value.isoformat()
            elif isinstance(value, timedelta):
                out[key] = value.total_seconds()
            elif isinstance(value, tuple):
                out[key] = list(value)
        return out


@dataclass
class _Tally:
    rows_read: int = 0
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    newest: datetime | None = None  # newest updated_at read, future rows excepted
    days: set[date] = field(default_factory=set)
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)
    late_before: datetime | None = None  # changed rows older than this arrived late
    late_rows: int = 0
    max_lateness: timedelta | None = None
    future_limit: datetime | None = None  # rows newer than this do not move the watermark
    future_rows: int = 0
    future_ids: list[int] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return self.inserted + self.updated


def batch_id_for(kind: str, start: datetime | None, end: datetime | None, digest: str) -> str:
    """Same window and same rows → same id, so a retry of a committed batch is recognized.

    Derived from content only: never from the wall clock or the run id.
    """
    key = json.dumps([kind, start and canonical(start), end and canonical(end), digest])
    return "orders-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def load_orders(source: Engine, warehouse: Engine, *, tz: tzinfo, lookback_days: int,
                now: datetime, start: datetime | None = None, end: datetime | None = None,
                chunk_size: int = DEFAULT_CHUNK, dry_run: bool = False,
                future_tolerance: timedelta = FUTURE_TOLERANCE,
                announced_batch: str | None | object = _NOTHING) -> LoadResult:
    """Read the window, upsert it, record the batch and advance the watermark, atomically.

    With ``start``/``end`` (a backfill of the load) exactly ``[start, end)`` is read and
    the watermark is left alone. With ``dry_run`` everything is computed and nothing is
    written. Any invalid row aborts the whole batch before commit.

    Rows stamped later than ``now + future_tolerance`` (a clock gone wrong in the app)
    are loaded but do not move the watermark, which would otherwise skip every row
    written until that time; they are counted in ``future_rows``.

    ``announced_batch`` is the id of the last batch whose ``days_touched`` reached the
    files (the last successful materialization; None before any). The days of batches
    committed after it, whose run died before it could say so (a lost acknowledgement),
    are added to this batch's ``days_touched``, so no day file is left stale.
    """
    if (start is None) != (end is None):
        raise LoadError("an explicit range needs both start (inclusive) and end (exclusive)")
    if start is not None and end <= start:
        raise LoadError(f"the range is empty: end {end.isoformat()} is not after start "
                        f"{start.isoformat()}")
    require_distinct(source, warehouse)
    kind = "incremental" if start is None else "range"
    src = inspect_source(source)
    if not dry_run:
        prepare_warehouse(warehouse)
    with guard(warehouse, "WAREHOUSE_DATABASE_URL"):
        with (warehouse if dry_run else writing(warehouse)).connect() as conn:
            trans = conn.begin()
            try:
                if dry_run:
                    ensure_schema(conn)  # rolled back below: a dry run writes nothing
                else:
                    wm.lock(conn, kind)
                before = wm.read(conn)
                if kind == "incremental":
                    start = wm.window_start(before, lookback_days)
                tally = _Tally()
                if kind == "incremental":
                    tally.late_before = before
                    tally.future_limit = now + future_tolerance
                for chunk in read_window(source, src, tz, start, end, chunk_size):
                    _apply(conn, chunk, tally, tz, write=not dry_run)
                crash_point("load_after_read")
                batch_id = batch_id_for(kind, start, end, tally.digest.hexdigest())
                after = wm.advance(before, tally.newest) if kind == "incremental" else before
                seen = conn.execute(
                    sa.select(batches.c.batch_id).where(batches.c.batch_id == batch_id)
                ).first() is not None
                unannounced = _days_committed_after(conn, announced_batch, batch_id) \
                    if announced_batch is not _NOTHING else set()
                if dry_run:
                    trans.rollback()
                else:
                    wm.write(conn, before, after, kind="load", at=now, batch_id=batch_id)
                    crash_point("load_after_watermark")
                    if not seen:
                        conn.execute(batches.insert().values(
                            batch_id=batch_id, kind=kind,
                            window_start=start and canonical(start),
                            window_end=end and canonical(end),
                            rows_read=tally.rows_read, inserted=tally.inserted,
                            updated=tally.updated, unchanged=tally.unchanged,
                            watermark_before=before and canonical(before),
                            watermark_after=after and canonical(after),
                            committed_at=canonical(now),
                            days_touched=json.dumps(sorted(d.isoformat() for d in tally.days)),
                        ))
                    crash_point("load_before_commit")
                    trans.commit()
                    crash_point("load_after_commit")
            except BaseException:
                if trans.is_active:
                    trans.rollback()
                raise
    return LoadResult(
        batch_id=batch_id, kind=kind, skipped=seen and tally.changed == 0,
        window_start=start, window_end=end, watermark_before=before, watermark_after=after,
        rows_read=tally.rows_read, inserted=tally.inserted, updated=tally.updated,
        unchanged=tally.unchanged,
        days_touched=tuple(sorted({d.isoformat() for d in tally.days} | unannounced)),
        newest_read=tally.newest, dry_run=dry_run,
        late_rows=tally.late_rows, max_lateness=tally.max_lateness,
        future_rows=tally.future_rows, future_order_ids=tuple(tally.future_ids),
    )


def _apply(conn: sa.Connection, chunk: list[Order], tally: _Tally, tz: tzinfo, *,
           write: bool) -> None:
    """Diff one chunk against the warehouse, count it, and upsert what changed."""
    o = orders.c
    previous = {
        row[0]: row for row in conn.execute(
            sa.select(o.order_id, o.status, o.amount, o.updated_at)
            .where(o.order_id.in_([order.order_id for order in chunk]))
        )
    }
    changed = []
    for order in chunk:
        stored = order.stored
        tally.digest.update(digest_text(stored) + b"\n")
        tally.rows_read += 1
        if tally.future_limit is not None and order.updated_at > tally.future_limit:
            tally.future_rows += 1
            if len(tally.future_ids) < 20:
                tally.future_ids.append(order.order_id)
        elif tally.newest is None or order.updated_at > tally.newest:
            tally.newest = order.updated_at
        old = previous.get(order.order_id)
        if old is None:
            tally.inserted += 1
        elif tuple(old) == stored:
            tally.unchanged += 1
            continue
        else:
            tally.updated += 1
            was = from_stored(tuple(old))
            if was.is_paid:  # its old day's file must lose or change it
                tally.days.add(was.day(tz))
        tally.days.add(order.day(tz))
        changed.append(stored)
        if tally.late_before is not None and order.updated_at < tally.late_before:
            tally.late_rows += 1
            lateness = tally.late_before - order.updated_at
            tally.max_lateness = max(tally.max_lateness or lateness, lateness)
    if write and changed:
        upsert(conn, changed)


def _days_committed_after(conn: sa.Connection, announced: str | None, current: str) -> set[str]:
    """Days touched by batches committed after ``announced`` (all, if None), not ``current``."""
    b = batches.c
    query = sa.select(b.days_touched).where(b.batch_id != current)
    if announced is not None:
        mark = conn.execute(sa.select(b.id).where(b.batch_id == announced)).scalar()
        if mark is None:  # unknown to this warehouse (reset, or another one): nothing owed
            return set()
        query = query.where(b.id > mark)
    days: set[str] = set()
    for (text,) in conn.execute(query):
        days.update(json.loads(text))
    return days


_UPSERT = (
    "INSERT INTO orders (order_id, status, amount, updated_at) VALUES ({p}, {p}, {p}, {p}) "
    "ON CONFLICT (order_id) DO UPDATE SET status = excluded.status, "
    "amount = excluded.amount, updated_at = excluded.updated_at"
)


def upsert(conn: sa.Connection, rows: list[tuple]) -> None:
    """Insert-or-update by ``order_id``, sorted by key, through the driver's executemany.

    SQLAlchemy keeps the connection and the dialect; the bulk statement goes straight to
    the driver because per-row parameter processing cost more than the upsert itself
    (see benchmarks/). Both SQLite and PostgreSQL speak ``ON CONFLICT … DO UPDATE``.
    """
    marker = {"sqlite": "?", "postgresql": "%s"}.get(conn.dialect.name)
    if marker is None:
        raise DatabaseError(f"the warehouse dialect {conn.dialect.name!r} is not supported; "
                            "use SQLite or PostgreSQL")
    rows.sort(key=lambda row: row[0])
    conn.exec_driver_sql(_UPSERT.format(p=marker), rows)
