"""Source vs warehouse, per day: the two comparisons, both over whole Arrow batches.

- :func:`compare_days`, behind the ``N_match_source`` check: for the days asked, the
  count, paid count (rows of the first daily file) and checksum
  (:mod:`pipeline_assets.core.rows.digest`) of each side. Days a load has just read whole may
  come from that load instead of a second read of the source (``known``).
- :func:`compare_rows`, behind ``pipeline-assets verify``: every row
  of both sides, matched by the primary key, so that each differing day also says what
  differs — *not loaded* (only in the source), *changed* (the stored values differ) or
  *only in the warehouse* (deleted from the source, which a load never propagates) — and
  which source day a load must read to fix it: a row that moved from day X to day Y marks
  both days and repairs both with a load of Y.

Both read the sides through :mod:`.sides`, for any declared table (``spec``, ``orders``
unless told); keys are handled by :mod:`~pipeline_assets.core.rows.keys`; per-day figures are
:class:`DayCounts`, counted by :mod:`.merge`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import date, tzinfo

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy.engine import Engine

from ..days import spans
from ..errors import InvalidRowError, VerifyError
from ..rows.digest import DayDigest, add_days
from ..rows.keys import key_values, last_key, upto
from ..source.scan import SCAN_BATCH, ahead
from ..table import working
from ..table.spec import TableSpec
from ..times import EPOCH
from ..times.arrays import day_text
from .counts import DayCounts
from .lost import lost_keys
from .merge import Merge, day_counts, show_deleted
from .sides import day_digests, source_rows, warehouse_keys, warehouse_rows, warehouse_rows_by_key

# --- the check: per-day totals --------------------------------------------------------------


def compare_days(
    source: Engine,
    warehouse: Engine,
    tz: tzinfo,
    days: Iterable[date],
    *,
    known=None,
    spec: TableSpec,
) -> dict[str, DayCounts]:
    """Per-day count and checksum of both sides, for ``days`` (those with a row on either
    side). ``known`` (a load's :class:`~pipeline_assets.core.load.batch.WholeDays`) gives the
    source side of the days that load read whole; every other day is read here, both
    sides at once, one range read per run of consecutive days.
    """
    days = sorted(set(days))
    given = [d for d in days if known is not None and known.covers(d)]
    taken = set(given)
    unread = [d for d in days if d not in taken]
    try:
        read, stored = day_digests(
            source,
            warehouse,
            tz,
            source_spans=spans(unread, tz),
            warehouse_spans=spans(days, tz),
            spec=spec,
        )
    except InvalidRowError as exc:
        raise VerifyError(f"cannot reconcile: {exc}") from None
    for day in given:
        digest = known.digests.get(day.isoformat())
        if digest is not None:
            read[(day - EPOCH).days] = digest
    return day_counts(read, stored)


def differing_days(days: dict[str, DayCounts]) -> list[str]:
    """The days whose count or checksum differ between source and warehouse."""
    return [
        d
        for d, c in days.items()
        if (c.source_rows, c.source_checksum) != (c.warehouse_rows, c.warehouse_checksum)
    ]


def add_deleted(
    source: Engine,
    warehouse: Engine,
    tz: tzinfo,
    days: dict[str, DayCounts],
    *,
    spec: TableSpec,
) -> None:
    """Fill in, for each of ``days``, the warehouse rows the source holds nowhere any
    more (``only_in_warehouse``, the first keys, their checksum): the warehouse keys of
    those days, then the source asked only about those it no longer stamps on them, by
    key (:mod:`.lost`), then the warehouse rows of the keys it lost, by key. For the
    check, on the days it found different; ``verify`` knows them from its own match."""
    if not days:
        return
    from ..source.scan import inspect_source

    ranges = spans(days, tz)
    # the keys of those days first (8 bytes a row), then only the rows the source lost
    keys = list(warehouse_keys(warehouse, ranges, spec=spec))
    if not keys:
        return
    lost = lost_keys(source, inspect_source(source, spec), tz, pa.concat_tables(keys), ranges)
    if not lost.num_rows:
        return
    lost = lost.sort_by([(pc.field(k), "ascending") for k in spec.primary_key])  # not a path
    digests: dict[int, DayDigest] = {}
    shown: dict[int, list] = {}
    for gone in warehouse_rows_by_key(warehouse, tz, key_values(lost, spec), spec=spec):
        add_days(digests, gone, spec)
        show_deleted(shown, gone, spec)
    for number, digest in digests.items():
        counts = days.get(day_text(number))
        if counts is not None:
            counts.only_in_warehouse = digest.rows
            counts.deleted_checksum = digest.checksum
            counts.deleted_ids = shown[number]


def deletes_to_allow(
    days: Iterable[DayCounts], max_share: float, *, spec: TableSpec
) -> tuple[set[str], str]:
    """The days whose range load must allow deletes to delete the rows named on them
    (more than ``max_share`` of the day's warehouse rows), and, when those commands must
    not say so, why: the source lost more than ``max_share`` of every row compared,
    which is what a wrong database or a half-restored one looks like, and the point of
    the guard is that nobody empties the warehouse by running what was printed."""
    days = list(days)
    allow = {
        c.day
        for c in days
        if c.only_in_warehouse and c.only_in_warehouse > max_share * c.warehouse_rows
    }
    lost = sum(c.only_in_warehouse for c in days)
    held = sum(c.warehouse_rows for c in days)
    if allow and lost > max_share * held:
        what, where = spec.say("table_rows_counted"), spec.say("the_source")
        return set(), (
            f"the source no longer has {lost} of the {held} {what} compared, "
            f"more than MAX_DELETE_SHARE={max_share:g}: check {where} "
            "before repairing; the range loads refuse to delete them until run "
            "with allow_deletes: true"
        )
    return allow, ""


# --- verify: every row, matched by key -----------------------------------------------------


def compare_rows(
    source: Engine,
    warehouse: Engine | None,
    tz: tzinfo,
    *,
    batch_rows: int = SCAN_BATCH,
    spec: TableSpec,
    lacking: Iterable[str] = (),
) -> tuple[dict[str, DayCounts], int, int]:
    """Match the source and the warehouse by key: per-day counts, checksums, diffs.

    Returns ``(days, source_rows, warehouse_rows)``. ``warehouse=None``: an empty one.
    ``lacking``: columns added since rows were stored, whose NULLs the source fills are
    counted per day (:attr:`DayCounts.lacking`).
    Both sides stream in key order; the rows of each run of keys that both have read past
    are compared at once, so memory holds a few batches whatever the tables.
    """
    merge = Merge(spec, tuple(lacking))
    try:
        with (
            _stream(source_rows(source, tz, batch_rows=batch_rows, spec=spec)) as theirs,
            _stream(
                warehouse_rows(warehouse, tz, ordered=True, batch_rows=batch_rows, spec=spec)
                if warehouse is not None
                else iter(())
            ) as ours,
        ):
            for part_s, part_w in _aligned(theirs, ours, spec):
                merge.add(part_s, part_w)
    except InvalidRowError as exc:
        raise VerifyError(
            f"cannot verify: the source's {exc.row} has column {exc.column} "
            f"= {exc.value!r}: {exc.reason}. Fix the row in the source and run verify again."
        ) from None
    return merge.days(), merge.source_rows, merge.warehouse_rows


class _stream:
    """``ahead`` over a side's batches, closed (its thread joined) on leaving."""

    def __init__(self, batches: Iterator[pa.Table]):
        self.items = ahead(batches)

    def __enter__(self) -> Iterator[pa.Table]:
        return self.items

    def __exit__(self, *exc) -> None:
        self.items.close()


def _aligned(
    source: Iterator[pa.Table], warehouse: Iterator[pa.Table], spec: TableSpec
) -> Iterator[tuple[pa.Table, pa.Table]]:
    """Pairs of (source rows, warehouse rows) over the same run of keys, in key order."""
    held = {"s": None, "w": None}
    streams = {"s": source, "w": warehouse}
    done = {"s": False, "w": False}
    empty = _empty(spec)

    def fill(side: str) -> None:
        while not done[side] and (held[side] is None or held[side].num_rows == 0):
            batch = next(streams[side], None)
            if batch is None:
                done[side] = True
            else:
                held[side] = batch if held[side] is None else pa.concat_tables([held[side], batch])

    def cut(side: str, bound: tuple | None) -> pa.Table:
        table = held[side]
        if table is None:
            return empty
        if bound is None:
            held[side] = None
            return table.select(empty.column_names)
        count = upto(table, spec, bound)
        held[side] = table.slice(count)
        return table.slice(0, count).select(empty.column_names)

    while True:
        fill("s")
        fill("w")
        if done["s"] and done["w"] and held["s"] is None and held["w"] is None:
            return
        # keys up to the smaller of the two last keys read are complete on both sides
        ends = [
            last_key(held[side], spec)
            for side in ("s", "w")
            if not done[side] and held[side] is not None and held[side].num_rows
        ]
        bound = min(ends) if ends else None
        yield cut("s", bound), cut("w", bound)


def _empty(spec: TableSpec) -> pa.Table:
    """No rows: the stored columns of ``spec`` and ``day``."""
    return pa.schema(
        [(c.name, c.type.codec.arrow_type) for c in spec.columns] + [(working.DAY, pa.int32())]
    ).empty_table()
