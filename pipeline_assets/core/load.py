"""The incremental, idempotent load of ``orders``: one batch, one warehouse transaction.

Rules 1, 2, 3 and 5 meet here: rows are written by key (upsert), the watermark is
advanced in the same transaction as the rows, the read starts ``lookback`` before the
watermark, and every batch has an id derived from its window and content, recorded in
the ledger in that same transaction.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import closing
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, tzinfo
from queue import Empty, Full, Queue

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from . import watermark as wm
from .columnar import INSTANT, day_text, digest_rows, newest_per_order, normalize, within
from .crash import crash_point
from .db import (
    batches,
    ensure_schema,
    guard,
    orders,
    prepare_warehouse,
    require_distinct,
    writing,
)
from .errors import PipelineError
from .source import SCAN_BATCH, SourceTable, inspect_source, scan_window
from .staging import Changes, Stage
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
    duplicate_rows: int = 0  # older copies of an order in the source, not loaded

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
    """What the scan saw, batch by batch, before any comparison with the warehouse."""

    rows_read: int = 0
    duplicates: int = 0  # older copies of an order in the same batch, dropped
    newest: datetime | None = None  # newest updated_at read, future rows excepted
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)
    late_before: datetime | None = None  # changed rows older than this arrived late
    future_limit: datetime | None = None  # rows newer than this do not move the watermark
    future_rows: int = 0
    future_ids: list[int] = field(default_factory=list)
    # as if every row read were a change (true when the warehouse held no orders):
    all_days: set[int] = field(default_factory=set)  # days since 1970-01-01
    all_late: int = 0
    all_oldest_late: datetime | None = None

    def count(self, rows: pa.Table) -> None:
        """Tally one normalized, deduplicated batch (sorted by order_id)."""
        self.rows_read += rows.num_rows
        digest_rows(self.digest, rows)
        instant = rows["instant"]
        if self.future_limit is not None:
            future = pc.greater(instant, pa.scalar(self.future_limit, INSTANT))
            hits = pc.sum(future).as_py() or 0
            if hits:
                self.future_rows += hits
                ids = rows["order_id"].filter(future).slice(0, 20 - len(self.future_ids))
                self.future_ids.extend(ids.to_pylist())
                instant = instant.filter(pc.invert(future))
        newest = pc.max(instant).as_py()
        if newest is not None and (self.newest is None or newest > self.newest):
            self.newest = newest
        self.all_days.update(pc.unique(rows["day"]).to_pylist())
        if self.late_before is not None:
            late = pc.less(rows["instant"], pa.scalar(self.late_before, INSTANT))
            hits = pc.sum(late).as_py() or 0
            if hits:
                self.all_late += hits
                oldest = pc.min(rows["instant"].filter(late)).as_py()
                if self.all_oldest_late is None or oldest < self.all_oldest_late:
                    self.all_oldest_late = oldest


def batch_id_for(kind: str, start: datetime | None, end: datetime | None, digest: str) -> str:
    """Same window and same rows → same id, so a retry of a committed batch is recognized.

    Derived from content only: never from the wall clock or the run id.
    """
    key = json.dumps([kind, start and canonical(start), end and canonical(end), digest])
    return "orders-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def load_orders(source: Engine, warehouse: Engine, *, tz: tzinfo, lookback_days: int,
                now: datetime, start: datetime | None = None, end: datetime | None = None,
                chunk_size: int = SCAN_BATCH, dry_run: bool = False,
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
            stage = Stage(conn)
            trans = conn.begin()
            try:
                # 1. window: lock, read the watermark, decide what to read
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
                was_empty = conn.execute(sa.select(orders.c.order_id).limit(1)).first() is None
                # 2. scan + 3. stage: validated batches into the temporary table
                stage.create(direct=was_empty and not dry_run)
                def scanned_and_prepared():  # runs in ahead()'s thread
                    for rows, older_copies in scan_orders(source, src, tz, start, end,
                                                          chunk_size):
                        tally.duplicates += older_copies
                        tally.count(rows)  # the tally is read only after the scan ends
                        yield stage.prepare(rows)

                with closing(ahead(scanned_and_prepared())) as ready:
                    for prepared in ready:
                        stage.write(prepared)
                crash_point("load_after_stage")
                changes = _measure(stage, tally, tz, was_empty)
                crash_point("load_after_read")
                # 4. merge: one upsert of the changed rows
                if not dry_run:
                    stage.merge()
                    crash_point("load_after_merge")
                # 5. commit: watermark, ledger, one commit (a dry run rolls back)
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
                            rows_read=tally.rows_read, inserted=changes.inserted,
                            updated=changes.updated, unchanged=changes.unchanged,
                            watermark_before=before and canonical(before),
                            watermark_after=after and canonical(after),
                            committed_at=canonical(now),
                            days_touched=json.dumps(sorted(changes.days)),
                        ))
                    crash_point("load_before_commit")
                    trans.commit()
                    crash_point("load_after_commit")
            except BaseException:
                if trans.is_active:
                    trans.rollback()
                raise
            finally:
                stage.close()
    changed = changes.inserted + changes.updated
    return LoadResult(
        batch_id=batch_id, kind=kind, skipped=seen and changed == 0,
        window_start=start, window_end=end, watermark_before=before, watermark_after=after,
        rows_read=tally.rows_read, inserted=changes.inserted, updated=changes.updated,
        unchanged=changes.unchanged,
        days_touched=tuple(sorted(changes.days | unannounced)),
        newest_read=tally.newest, dry_run=dry_run,
        late_rows=changes.late_rows,
        max_lateness=(before - changes.oldest_late) if changes.oldest_late else None,
        future_rows=tally.future_rows, future_order_ids=tuple(tally.future_ids),
        duplicate_rows=tally.duplicates,
    )


def scan_orders(source: Engine, src: SourceTable, tz: tzinfo, start: datetime | None,
                end: datetime | None, batch_rows: int = SCAN_BATCH
                ) -> Iterator[tuple[pa.Table, int]]:
    """The window's orders, validated and normalized, one row per order, in key order,
    with the number of older copies dropped (a source without a primary key).

    The source is read in ``order_id`` order, so every copy of an order is in the same
    scanned batch or the next: the rows of the key the batch ends with (its last row's,
    whatever order the source's key type sorts in) wait for the next batch before
    :func:`~.columnar.newest_per_order` picks its newest copy.
    """
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


def _measure(stage: Stage, tally: _Tally, tz: tzinfo, was_empty: bool) -> Changes:
    """What the merge will change; nothing to compare when the warehouse held no orders."""
    if not was_empty:
        return stage.measure(tz, late_before=tally.late_before)
    return Changes(inserted=tally.rows_read, days={day_text(n) for n in tally.all_days},
                   late_rows=tally.all_late, oldest_late=tally.all_oldest_late)


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
