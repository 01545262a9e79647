"""The incremental, idempotent load of a declared table (``orders`` is one): one batch,
one warehouse transaction.

Rules 1, 2, 3 and 5 meet here: rows are written by key (upsert), the watermark is
advanced in the same transaction as the rows, the read starts ``lookback`` before the
watermark, and every batch has an id derived from its window and content, recorded in
the ledger in that same transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..crash import crash_point
from ..db.engines import guard, require_distinct, writing
from ..db.schema import warehouse_table
from ..db.state import batches, prepare_warehouse
from ..errors import LoadError
from ..source.scan import SCAN_BATCH, ahead, inspect_source, scan_table
from ..source.sql import SourceTable
from ..table.spec import TableSpec
from ..times import EPOCH, canonical, whole_days
from ..times.arrays import day_text
from ..warehouse import declaration, evolve
from ..warehouse import watermark as wm
from ..warehouse.staging import Changes, Stage
from . import holes
from .deletions import GUARDED, DeletePolicy, Deletions, delete_lost
from .ledger import batch_id_for, days_committed_after
from .result import LoadResult, Tally
from .window import Window, window_for

FUTURE_TOLERANCE = timedelta(hours=1)
_NOTHING = object()  # announced_batch not given: do not look for unannounced batches


def load_table(
    source: Engine,
    warehouse: Engine,
    *,
    spec: TableSpec,
    tz: tzinfo,
    lookback_days: int,
    now: datetime,
    start: datetime | None = None,
    end: datetime | None = None,
    chunk_size: int = SCAN_BATCH,
    dry_run: bool = False,
    announced_batch: str | None | object = _NOTHING,
    deletes: DeletePolicy = GUARDED,
) -> LoadResult:
    """Read the window of ``spec``'s table, upsert it, record the batch and advance the
    watermark, atomically.

    With ``start``/``end`` (a backfill of the load) exactly ``[start, end)`` is read and
    the watermark is left alone. With ``dry_run`` everything is computed and nothing is
    written. Any invalid row aborts the whole batch before commit.

    Rows stamped later than ``now +`` :data:`FUTURE_TOLERANCE` (a clock gone wrong in the
    app) are loaded but do not move the watermark, which would otherwise skip every row
    written until that time; they are counted in ``future_rows``.

    ``announced_batch`` is the id of the last batch whose ``days_touched`` reached the
    files (the last successful materialization; None before any). The days of batches
    committed after it, whose run died before it could say so (a lost acknowledgement),
    are added to this batch's ``days_touched``, so no day file is left stale.

    A range load replaces its range by key: the warehouse rows stamped in ``[start,
    end)`` whose key the source no longer holds at all are deleted in the same
    transaction, within ``deletes`` (:class:`DeletePolicy`; more than its share refuses
    the load, writing nothing: :class:`DeleteRefused`). An incremental load never deletes.

    The steps: window (lock, watermark, what to read; :mod:`.window`), then, each below,
    scan (validated batches), stage (into a temporary table, or straight into an empty
    table), compare (with the table), delete (range loads), merge, commit (watermark,
    ledger, one commit).
    """
    kind = _kind(start, end)
    if kind == "incremental" and spec.compares_whole:
        kind = "full"  # no change stamp: every run reads and compares the whole table
    require_distinct(source, warehouse)
    src = inspect_source(source, spec)
    if not dry_run:
        prepare_warehouse(warehouse, spec)
    with (
        guard(warehouse, "WAREHOUSE_DATABASE_URL"),
        (warehouse if dry_run else writing(warehouse)).connect() as conn,
        _transaction(conn, spec) as (stage, trans),
    ):
        window = window_for(conn, spec, kind, start, end, lookback_days, dry_run, tz)
        tally = _tally(window, now, tz, spec)
        changes, gone = _write(source, src, tz, window, stage, tally, chunk_size, deletes, dry_run)
        committed = _commit(
            conn, trans, spec, window, tally, changes, gone, now, announced_batch, dry_run
        )
    return _result(window, tally, changes, gone, committed, dry_run, src.undeclared)


@contextmanager
def _transaction(conn: sa.Connection, spec: TableSpec) -> Iterator[tuple[Stage, sa.Transaction]]:
    """The load's stage and its one transaction: any failure (a crash point's too) rolls
    back everything, and the stage is closed after it either way."""
    stage = Stage(conn, spec)
    trans = conn.begin()
    try:
        yield stage, trans
    except BaseException:
        if trans.is_active:
            trans.rollback()
        raise
    finally:
        stage.close()


def _kind(start: datetime | None, end: datetime | None) -> str:
    """ "incremental" or "range"; refuses half a range or an empty one."""
    if (start is None) != (end is None):
        raise LoadError("an explicit range needs both start (inclusive) and end (exclusive)")
    if start is not None and end <= start:
        raise LoadError(
            f"the range is empty: end {end.isoformat()} is not after start {start.isoformat()}"
        )
    return "incremental" if start is None else "range"


@dataclass(frozen=True)
class _Committed:
    batch_id: str
    after: datetime | None  # the watermark the batch leaves
    seen: bool  # the ledger already had the batch
    unannounced: set[str]  # days of batches committed after the last announced one
    holes: holes.Holes = holes.Holes()  # an id cursor's: what it remembers and filled


def _tally(window: Window, now: datetime, tz: tzinfo, spec: TableSpec) -> Tally:
    apart = spec.day_apart or spec.counts_ids  # the window's column is not the day's
    if apart and window.kind == "incremental" and window.start is not None:
        # a window on the cursor holds no day of another column whole
        first, last = EPOCH + timedelta(days=1), EPOCH
    else:
        first, last = whole_days(window.start, window.end, tz)
    tally = Tally(
        tz,
        (
            None if first is None else (first - EPOCH).days,
            None if last is None else (last - EPOCH).days,
        ),
        spec,
    )
    if window.kind == "incremental":
        tally.late_before = window.before
        # an id is never "in the future"; a stamp may be (a clock gone wrong in the app)
        tally.future_limit = None if spec.counts_ids else now + FUTURE_TOLERANCE
    return tally


def _write(
    source: Engine,
    src: SourceTable,
    tz: tzinfo,
    window: Window,
    stage: Stage,
    tally: Tally,
    chunk_size: int,
    deletes: DeletePolicy,
    dry_run: bool,
) -> tuple[Changes, Deletions | None]:
    """Steps 2 to 5, in the load's transaction: scan and stage, compare, delete what a
    range load's source lost, merge (a dry run merges nothing)."""
    first_key = warehouse_table(stage.spec).c[stage.spec.primary_key[0]]
    was_empty = stage.conn.execute(sa.select(first_key).limit(1)).first() is None
    _scan_and_stage(
        source, src, tz, window, stage, tally, chunk_size, direct=was_empty and not dry_run
    )
    crash_point("load_after_stage")
    changes = _compare(stage, tally, tz, was_empty)
    crash_point("load_after_compare")
    gone = (
        delete_lost(source, src, stage, window.start, window.end, tz, deletes, dry_run)
        if window.kind in ("range", "full")
        else None
    )
    if not dry_run:
        stage.merge()
        crash_point("load_after_merge")
    return changes, gone


def _scan_and_stage(
    source: Engine,
    src: SourceTable,
    tz: tzinfo,
    window: Window,
    stage: Stage,
    tally: Tally,
    chunk_size: int,
    *,
    direct: bool,
) -> None:
    """Steps 2 and 3: validated batches from the source, tallied and prepared in the scan's
    thread, written into the stage (or straight into an empty table) here."""
    stage.create(direct=direct)

    def scanned_and_prepared() -> Iterator:  # runs in ahead()'s thread
        by_day = window.kind == "range"  # a range is of days; an incremental window, not
        scanned = scan_table(
            source, src, tz, window.start, window.end, chunk_size, by_day=by_day, also=window.also
        )
        for rows, older_copies in scanned:
            tally.count(rows, older_copies)
            yield stage.prepare(rows)

    with closing(ahead(scanned_and_prepared())) as ready:
        for prepared in ready:
            stage.write(prepared)


def _compare(stage: Stage, tally: Tally, tz: tzinfo, was_empty: bool) -> Changes:
    """Step 4: what the merge will change; nothing to compare when the table was empty."""
    if not was_empty:
        return stage.measure(tz, late_before=tally.late_before)
    return Changes(
        inserted=tally.rows_read,
        days={day_text(n) for n in tally.all_days},
        late_rows=tally.all_late,
        oldest_late=tally.all_oldest_late,
    )


def _commit(
    conn: sa.Connection,
    trans: sa.Transaction,
    spec: TableSpec,
    window: Window,
    tally: Tally,
    changes: Changes,
    gone: Deletions | None,
    now: datetime,
    announced_batch,
    dry_run: bool,
) -> _Committed:
    """Step 6: the watermark, the ledger entry with its declaration (recorded if new) and
    one commit (a dry run rolls back)."""
    batch_id = batch_id_for(
        window.kind, window.start, window.end, tally.digest.hexdigest(), spec.name
    )
    before = window.before
    after = wm.advance(before, tally.newest) if window.kind == "incremental" else before
    seen = (
        conn.execute(sa.select(batches.c.batch_id).where(batches.c.batch_id == batch_id)).first()
        is not None
    )
    unannounced = (
        days_committed_after(conn, spec, announced_batch, batch_id)
        if announced_batch is not _NOTHING
        else set()
    )
    if dry_run:
        trans.rollback()
        return _Committed(batch_id, after, seen, unannounced)
    wm.write(conn, before, after, kind="load", at=now, batch_id=batch_id, table=spec.name)
    crash_point("load_after_watermark")
    # the rows of every day the batch read whole hold what the source holds: days stored
    # without a column added since are filled there (core/warehouse/evolve.py)
    evolve.record_gaps(conn, spec, window.evolution, batch_id, now)
    evolve.close_gaps(conn, spec, *_days_read_whole(tally))
    kept = holes.Holes()
    if spec.counts_ids and window.kind == "incremental":
        kept = holes.update(conn, spec, before, tally.newest, now)
    if not seen:
        _record_batch(conn, spec, batch_id, window, tally, changes, gone, after, now)
    crash_point("load_before_commit")
    trans.commit()
    crash_point("load_after_commit")
    return _Committed(batch_id, after, seen, unannounced, kept)


def _record_batch(
    conn: sa.Connection,
    spec: TableSpec,
    batch_id: str,
    window: Window,
    tally: Tally,
    changes: Changes,
    gone: Deletions | None,
    after: datetime | None,
    now: datetime,
) -> None:
    """The batch's ledger entry, with its declaration (recorded if new): a retry of the
    same batch finds it there."""
    fingerprint = declaration.record(conn, spec, batch_id, now)
    conn.execute(
        batches.insert().values(
            batch_id=batch_id,
            kind=window.kind,
            window_start=wm.stored(window.start),
            window_end=window.end and canonical(window.end),
            rows_read=tally.rows_read,
            inserted=changes.inserted,
            updated=changes.updated,
            unchanged=changes.unchanged,
            watermark_before=wm.stored(window.before),
            watermark_after=wm.stored(after),
            committed_at=canonical(now),
            days_touched=json.dumps(sorted(changes.days | (gone.days if gone else set()))),
            rows_deleted=None if gone is None else len(gone.keys),
            deleted_digest=None if gone is None else gone.digest,
            mass_delete_allowed=None if gone is None else gone.mass,
            table_name=spec.name,
            declaration=fingerprint,
        )
    )


def _days_read_whole(tally: Tally):
    """The first and last day the batch read whole (None: unbounded on that side)."""
    first, last = tally.whole
    return (
        None if first is None else EPOCH + timedelta(days=first),
        None if last is None else EPOCH + timedelta(days=last),
    )


def _result(
    window: Window,
    tally: Tally,
    changes: Changes,
    gone: Deletions | None,
    committed: _Committed,
    dry_run: bool,
    undeclared: list[str],
) -> LoadResult:
    changed = changes.inserted + changes.updated + (len(gone.keys) if gone else 0)
    return LoadResult(
        batch_id=committed.batch_id,
        kind=window.kind,
        skipped=committed.seen and changed == 0,
        window_start=window.start,
        window_end=window.end,
        watermark_before=window.before,
        watermark_after=committed.after,
        rows_read=tally.rows_read,
        inserted=changes.inserted,
        updated=changes.updated,
        unchanged=changes.unchanged,
        days_touched=tuple(
            sorted(changes.days | committed.unannounced | (gone.days if gone else set()))
        ),
        newest_read=tally.newest,
        dry_run=dry_run,
        late_rows=changes.late_rows,
        max_lateness=(window.before - changes.oldest_late)
        if changes.oldest_late is not None
        else None,
        future_rows=tally.future_rows,
        future_keys=tuple(tally.future_ids),
        duplicate_rows=tally.duplicates,
        rows_deleted=None if gone is None else len(gone.keys),
        deleted_keys=() if gone is None else gone.keys[:20],
        deleted_digest=None if gone is None else gone.digest,
        mass_delete_allowed=bool(gone and gone.mass),
        read_whole=tally.read_whole(),
        undeclared_columns=tuple(undeclared),
        declaration=window.evolution.fingerprint,
        columns_added=window.evolution.added,
        columns_removed=window.evolution.removed,
        columns_widened=tuple(w.to_json() for w in window.evolution.widened),
        days_to_fill=tuple(evolve.unread(window.evolution.gap_days, *_days_read_whole(tally))),
        days_moved=tuple(sorted(changes.moves)),
        holes_remembered=committed.holes.remembered,
        holes_filled=committed.holes.filled,
    )
