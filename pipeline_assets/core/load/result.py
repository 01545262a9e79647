"""What a load reports, and what its scan tallies on the way: the result types of
:func:`~.batch.load_table`.

:class:`LoadResult` is what one batch did (shown as metadata, printed by ``plan``);
:class:`WholeDays` the days it read whole and their per-day digests, which the
``orders_match_source`` check takes as its source side; :class:`Tally` what the scan saw,
batch by batch (rows, duplicates, the newest change stamp, future and late rows, the
batch digest and the per-day digests of the days read whole), before any comparison with
the warehouse.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta, tzinfo

import pyarrow as pa
import pyarrow.compute as pc

from ..rows.digest import DayDigest, add_days, feed_batch_digest
from ..table import working
from ..table.spec import TableSpec
from ..times import EPOCH
from ..times.arrays import INSTANT, day_text


@dataclass(frozen=True)
class WholeDays:
    """The days a load read whole, and their per-day digests as the source held them.

    ``first``/``last`` bound them (None: unbounded on that side; a first load reads every
    day whole); a day between them with no entry in ``digests`` had no rows. The
    ``orders_match_source`` check takes these as its source side for these days instead
    of reading them again (docs/design.md says why that loses nothing it checks).
    """

    first: date | None
    last: date | None
    digests: dict[str, DayDigest] = field(default_factory=dict)

    def covers(self, day: date) -> bool:
        return (self.first is None or self.first <= day) and (self.last is None or day <= self.last)


@dataclass(frozen=True)
class LoadResult:
    """What one batch did; every field but ``read_whole`` is shown as metadata."""

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
    # the first 20 of them: keys (a tuple each for a key of several columns)
    future_keys: tuple = ()
    duplicate_rows: int = 0  # older copies of a row in the source, not loaded
    # range loads only (None: an incremental load cannot see a deletion)
    rows_deleted: int | None = None  # rows deleted: the source no longer holds them
    deleted_keys: tuple = ()  # the first 20 of their keys
    deleted_digest: str | None = None  # SHA-256 of their keys (Deletions.digest)
    mass_delete_allowed: bool = False  # more than MAX_DELETE_SHARE, let through
    # the declaration (core/warehouse/evolve.py): source columns it does not name (never read), its
    # fingerprint, and what the batch found changed since the table's latest batch
    undeclared_columns: tuple[str, ...] = ()
    declaration: str | None = None
    columns_added: tuple[str, ...] = ()  # added to the warehouse table (or found there)
    columns_removed: tuple[str, ...] = ()  # declared no more: kept, no longer written
    columns_widened: tuple[dict, ...] = ()  # {"column", "from", "to"}: values rewritten
    days_to_fill: tuple[str, ...] = ()  # days whose rows were stored without the added
    # (old day, new day) of rows a file held that moved day (a day_column's tables only)
    days_moved: tuple[tuple[str, str], ...] = ()
    # an id cursor's holes (core/load/holes.py): ids it remembers missing, and found
    holes_remembered: int = 0
    holes_filled: int = 0
    read_whole: WholeDays | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        out = asdict(self)
        out.pop("read_whole")
        if not self.days_moved:  # a day_column's tables only: the others' JSON as it was
            out.pop("days_moved")
        if not (self.holes_remembered or self.holes_filled):  # an id cursor's tables only
            out.pop("holes_remembered")
            out.pop("holes_filled")
        for key, value in out.items():
            if isinstance(value, datetime):
                out[key] = value.isoformat()
            elif isinstance(value, timedelta):
                out[key] = value.total_seconds()
            elif isinstance(value, tuple):
                out[key] = [list(v) if isinstance(v, tuple) else v for v in value]
        return out


@dataclass
class Tally:
    """What the scan saw, batch by batch, before any comparison with the warehouse.

    Filled in the scan's thread (:func:`~pipeline_assets.core.source.scan.ahead`) and read only
    after the scan ended."""

    tz: tzinfo
    whole: tuple[int | None, int | None]  # the days read whole, as day numbers
    spec: TableSpec
    late_before: datetime | int | None = None  # changed rows older than this arrived late
    future_limit: datetime | None = None  # rows newer than this do not move the watermark
    rows_read: int = 0
    duplicates: int = 0  # older copies of an order in the same batch, dropped
    newest: datetime | int | None = None  # newest stamp (or id) read, future rows excepted
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)
    future_rows: int = 0
    future_ids: list = field(default_factory=list)
    day_digests: dict[int, DayDigest] = field(default_factory=dict)  # whole days only
    # as if every row read were a change (true when the warehouse held no orders):
    all_days: set[int] = field(default_factory=set)  # days since 1970-01-01
    all_late: int = 0
    all_oldest_late: datetime | int | None = None

    def count(self, rows: pa.Table, older_copies: int) -> None:
        """Tally one normalized, deduplicated batch (sorted by key)."""
        self.rows_read += rows.num_rows
        self.duplicates += older_copies
        feed_batch_digest(self.digest, rows, self.spec)
        self._days(rows)
        if self.spec.counts_ids:
            self._ids(rows[self.spec.cursor])
            return
        instant = rows[working.INSTANT]
        if self.future_limit is not None:
            future = pc.greater(instant, pa.scalar(self.future_limit, INSTANT))
            hits = pc.sum(future).as_py() or 0
            if hits:
                self.future_rows += hits
                self.future_ids.extend(
                    _keys(rows.filter(future).slice(0, 20 - len(self.future_ids)), self.spec)
                )
                instant = instant.filter(pc.invert(future))
        newest = pc.max(instant).as_py()
        if newest is not None and (self.newest is None or newest > self.newest):
            self.newest = newest
        if self.late_before is not None:
            late = pc.less(rows[working.INSTANT], pa.scalar(self.late_before, INSTANT))
            hits = pc.sum(late).as_py() or 0
            if hits:
                self.all_late += hits
                oldest = pc.min(rows[working.INSTANT].filter(late)).as_py()
                if self.all_oldest_late is None or oldest < self.all_oldest_late:
                    self.all_oldest_late = oldest

    def _ids(self, ids) -> None:
        """An integer cursor: the highest id read, and the ids below the watermark the run
        started from (rows committed after a higher id was read)."""
        newest = pc.max(ids).as_py()
        if newest is not None and (self.newest is None or newest > self.newest):
            self.newest = newest
        if self.late_before is not None:
            late = pc.less(ids, self.late_before)
            hits = pc.sum(late).as_py() or 0
            if hits:
                self.all_late += hits
                oldest = pc.min(ids.filter(late)).as_py()
                if self.all_oldest_late is None or oldest < self.all_oldest_late:
                    self.all_oldest_late = oldest

    def _days(self, rows: pa.Table) -> None:
        self.all_days.update(pc.unique(rows[working.DAY]).to_pylist())
        first, last = self.whole
        keep = None
        if first is not None:
            keep = pc.greater_equal(rows[working.DAY], first)
        if last is not None:
            upper = pc.less_equal(rows[working.DAY], last)
            keep = upper if keep is None else pc.and_(keep, upper)
        add_days(self.day_digests, rows if keep is None else rows.filter(keep), self.spec)

    def read_whole(self) -> WholeDays:
        first, last = self.whole
        return WholeDays(
            None if first is None else EPOCH + timedelta(days=first),
            None if last is None else EPOCH + timedelta(days=last),
            {day_text(n): d for n, d in sorted(self.day_digests.items())},
        )


def _keys(rows: pa.Table, spec: TableSpec) -> list:
    """The key of each row: its value for a one-column key, else a tuple."""
    if len(spec.primary_key) == 1:
        return rows[spec.primary_key[0]].to_pylist()
    return list(zip(*(rows[k].to_pylist() for k in spec.primary_key), strict=True))
