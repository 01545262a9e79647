"""Source vs warehouse, per day: the two comparisons, both over whole Arrow batches.

- :func:`compare_days`, behind the ``orders_match_source`` check: for the days asked, the
  count, paid count and checksum (:mod:`pipeline_assets.core.digest`) of each side. Days a
  load has just read whole may come from that load instead of a second read of the source
  (``known``).
- :func:`compare_orders`, behind ``pipeline-assets verify``: every row of both sides,
  matched by ``order_id``, so that each differing day also says what differs — *not
  loaded* (only in the source), *changed* (the stored values differ) or *only in the
  warehouse* (deleted from the source, which a load never propagates) — and which source
  day a load must read to fix it: a row that moved from day X to day Y marks both days
  and repairs both with a load of Y.

Both read the sides through :mod:`.sides`; per-day figures are :class:`DayCounts`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta, tzinfo

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy.engine import Engine

from ..columnar import day_text
from ..days import runs
from ..digest import DayDigest, add_days
from ..rows import PAID, InvalidRowError
from ..source import SCAN_BATCH, ahead
from ..times import EPOCH, day_start, parse_day
from .lost import lost_keys
from .sides import (
    VerifyError,
    day_digests,
    source_rows,
    warehouse_keys,
    warehouse_rows,
    warehouse_rows_by_key,
)


@dataclass
class DayCounts:
    """Source vs warehouse for one day (in the pipeline's time zone)."""

    day: str
    source_rows: int = 0
    source_checksum: int = 0
    source_paid: int = 0
    warehouse_rows: int = 0
    warehouse_checksum: int = 0
    warehouse_paid: int = 0
    not_loaded: int = 0  # rows on this day in the source, missing from the warehouse
    changed: int = 0  # rows whose stored values differ, on this day on either side
    only_in_warehouse: int = 0  # rows on this day in the warehouse, gone from the source
    load_days: set[str] = field(default_factory=set)  # source days a load must read
    rebuild_days: set[str] = field(default_factory=set)  # days whose paid orders it changes
    deleted_ids: list[int] = field(default_factory=list)  # the first few of those rows
    deleted_checksum: int = 0  # the checksum of those rows alone

    @property
    def only_deletions(self) -> bool:
        """Whether the orders the source lost are the whole difference of the day."""
        return bool(self.only_in_warehouse) and (
            self.source_rows, self.source_checksum) == (
            self.warehouse_rows - self.only_in_warehouse,
            (self.warehouse_checksum - self.deleted_checksum) % 2**64)

    @property
    def agrees(self) -> bool:
        return not (self.not_loaded or self.changed or self.only_in_warehouse)

    def to_json(self) -> dict:
        return {
            "day": self.day, "agrees": self.agrees,
            "source_rows": self.source_rows,
            "source_checksum": f"{self.source_checksum:016x}",
            "warehouse_rows": self.warehouse_rows,
            "warehouse_checksum": f"{self.warehouse_checksum:016x}",
            "not_loaded": self.not_loaded, "changed": self.changed,
            "only_in_warehouse": self.only_in_warehouse,
            "deleted_order_ids": self.deleted_ids,
            "warehouse_paid": self.warehouse_paid,
        }


def _counts(source: dict[int, DayDigest], warehouse: dict[int, DayDigest]
            ) -> dict[str, DayCounts]:
    """The day counts of two digests, for every day with a row on either side."""
    out = {}
    for number in sorted(set(source) | set(warehouse)):
        s, w = source.get(number, DayDigest()), warehouse.get(number, DayDigest())
        day = day_text(number)
        out[day] = DayCounts(day, s.rows, s.checksum, s.paid, w.rows, w.checksum, w.paid)
    return out


# --- the check: per-day totals --------------------------------------------------------------

def compare_days(source: Engine, warehouse: Engine, tz: tzinfo, days: Iterable[date], *,
                 known=None) -> dict[str, DayCounts]:
    """Per-day count and checksum of both sides, for ``days`` (those with a row on either
    side). ``known`` (a load's :class:`~pipeline_assets.core.load.WholeDays`) gives the
    source side of the days that load read whole; every other day is read here, both
    sides at once, one range read per run of consecutive days.
    """
    days = sorted(set(days))
    given = [d for d in days if known is not None and known.covers(d)]
    taken = set(given)
    unread = [d for d in days if d not in taken]
    try:
        read, stored = day_digests(source, warehouse, tz, source_spans=_spans(unread, tz),
                                   warehouse_spans=_spans(days, tz))
    except InvalidRowError as exc:
        raise VerifyError(f"cannot reconcile: {exc}") from None
    for day in given:
        digest = known.digests.get(day.isoformat())
        if digest is not None:
            read[(day - EPOCH).days] = digest
    return _counts(read, stored)


def _spans(days: list[date], tz: tzinfo) -> list[tuple]:
    """Runs of consecutive days as ``[midnight, next midnight)`` ranges in ``tz``."""
    return [(day_start(parse_day(first), tz), day_start(parse_day(last) + timedelta(days=1),
                                                          tz))
            for first, last in runs(d.isoformat() for d in days)]


def differing_days(days: dict[str, DayCounts]) -> list[str]:
    """The days whose count or checksum differ between source and warehouse."""
    return [d for d, c in days.items()
            if (c.source_rows, c.source_checksum) != (c.warehouse_rows, c.warehouse_checksum)]


DELETED_IDS_SHOWN = 5  # per day, in messages


def add_deleted(source: Engine, warehouse: Engine, tz: tzinfo,
                days: dict[str, DayCounts]) -> None:
    """Fill in, for each of ``days``, the warehouse orders the source holds nowhere any
    more (``only_in_warehouse``, the first ids, their checksum): the warehouse keys of
    those days, then the source asked only about those it no longer stamps on them, by
    key (:mod:`.lost`), then the warehouse rows of the keys it lost, by key. For the
    check, on the days it found different; ``verify`` knows them from its own match."""
    if not days:
        return
    from ..source import inspect_source

    spans = _spans([parse_day(d) for d in days], tz)
    # the keys of those days first (8 bytes a row), then only the rows the source lost
    keys = list(warehouse_keys(warehouse, spans))
    if not keys:
        return
    keys = pa.concat_arrays(keys)
    lost = lost_keys(source, inspect_source(source), tz, keys, spans)
    if not len(lost):
        return
    digests: dict[int, DayDigest] = {}
    shown: dict[int, list[int]] = {}
    for gone in warehouse_rows_by_key(warehouse, tz, sorted(lost.to_pylist())):
        add_days(digests, gone)
        for number in pc.unique(gone["day"]).to_pylist():
            ids = shown.setdefault(number, [])
            if len(ids) < DELETED_IDS_SHOWN:
                on_day = gone.filter(pc.equal(gone["day"], number))["order_id"]
                ids.extend(on_day.slice(0, DELETED_IDS_SHOWN - len(ids)).to_pylist())
    for number, digest in digests.items():
        counts = days.get(day_text(number))
        if counts is not None:
            counts.only_in_warehouse = digest.rows
            counts.deleted_checksum = digest.checksum
            counts.deleted_ids = shown[number]


def deletes_to_allow(days: Iterable[DayCounts], max_share: float) -> tuple[set[str], str]:
    """The days whose range load must allow deletes to delete the orders named on them
    (more than ``max_share`` of the day's warehouse rows), and, when those commands must
    not say so, why: the source lost more than ``max_share`` of every order compared,
    which is what a wrong database or a half-restored one looks like, and the point of
    the guard is that nobody empties the warehouse by running what was printed."""
    days = list(days)
    allow = {c.day for c in days
             if c.only_in_warehouse and c.only_in_warehouse > max_share * c.warehouse_rows}
    lost = sum(c.only_in_warehouse for c in days)
    held = sum(c.warehouse_rows for c in days)
    if allow and lost > max_share * held:
        return set(), (f"the source no longer has {lost} of the {held} order(s) compared, "
                       f"more than MAX_DELETE_SHARE={max_share:g}: check SOURCE_DATABASE_URL "
                       "before repairing; the range loads refuse to delete them until run "
                       "with allow_deletes: true")
    return allow, ""


# --- verify: every row, matched by order_id --------------------------------------------------

def compare_orders(source: Engine, warehouse: Engine | None, tz: tzinfo, *,
                   batch_rows: int = SCAN_BATCH) -> tuple[dict[str, DayCounts], int, int]:
    """Match the source and the warehouse by ``order_id``: per-day counts, checksums, diffs.

    Returns ``(days, source_rows, warehouse_rows)``. ``warehouse=None``: an empty one.
    Both sides stream in ``order_id`` order; the rows of each run of keys that both have
    read past are compared at once, so memory holds a few batches whatever the tables.
    """
    merge = _Merge()
    try:
        with _stream(source_rows(source, tz, batch_rows=batch_rows)) as theirs, \
                _stream(warehouse_rows(warehouse, tz, ordered=True, batch_rows=batch_rows)
                        if warehouse is not None else iter(())) as ours:
            for part_s, part_w in _aligned(theirs, ours):
                merge.add(part_s, part_w)
    except InvalidRowError as exc:
        who = "a row with no order_id" if exc.order_id is None else f"order {exc.order_id}"
        raise VerifyError(
            f"cannot verify: the source's {who} has column {exc.column} = {exc.value!r}: "
            f"{exc.reason}. Fix the row in the source and run verify again."
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


def _aligned(source: Iterator[pa.Table], warehouse: Iterator[pa.Table]
             ) -> Iterator[tuple[pa.Table, pa.Table]]:
    """Pairs of (source rows, warehouse rows) over the same run of keys, in key order."""
    held = {"s": None, "w": None}
    streams = {"s": source, "w": warehouse}
    done = {"s": False, "w": False}

    def fill(side: str) -> None:
        while not done[side] and (held[side] is None or held[side].num_rows == 0):
            batch = next(streams[side], None)
            if batch is None:
                done[side] = True
            else:
                held[side] = batch if held[side] is None else pa.concat_tables(
                    [held[side], batch])

    def cut(side: str, bound: int | None) -> pa.Table:
        table = held[side]
        if table is None:
            return None
        if bound is None:
            held[side] = None
            return table
        upto = pc.sum(pc.less_equal(table["order_id"], bound)).as_py() or 0
        held[side] = table.slice(upto)
        return table.slice(0, upto)

    while True:
        fill("s")
        fill("w")
        if done["s"] and done["w"] and held["s"] is None and held["w"] is None:
            return
        # keys up to the smaller of the two last keys read are complete on both sides
        ends = [held[side]["order_id"][-1].as_py() for side in ("s", "w")
                if not done[side] and held[side] is not None and held[side].num_rows]
        bound = min(ends) if ends else None
        part_s, part_w = cut("s", bound), cut("w", bound)
        yield _or_empty(part_s), _or_empty(part_w)


_EMPTY = pa.table({"order_id": pa.array([], pa.int64()), "status": pa.array([], pa.string()),
                   "amount": pa.array([], pa.string()), "updated_at": pa.array([], pa.string()),
                   "day": pa.array([], pa.int32())})


def _or_empty(table: pa.Table | None) -> pa.Table:
    return _EMPTY if table is None else table.select(list(_EMPTY.column_names))


class _Merge:
    """What the matched rows say, accumulated run of keys by run of keys."""

    def __init__(self):
        self.source: dict[int, DayDigest] = {}
        self.warehouse: dict[int, DayDigest] = {}
        self.source_rows = self.warehouse_rows = 0
        self.not_loaded: dict[tuple[int, bool], int] = {}  # (day, paid): rows
        self.gone: dict[tuple[int, bool], int] = {}  # (day, paid): rows only in the warehouse
        self.gone_ids: dict[int, list[int]] = {}  # day: the first few of them
        self.gone_sums: dict[int, DayDigest] = {}
        self.changed: dict[tuple[int, int, bool, bool], int] = {}  # (s day, w day, paid…)

    def add(self, s: pa.Table, w: pa.Table) -> None:
        """One run of keys: both sides hold every row of theirs with a key in it."""
        add_days(self.source, s)
        add_days(self.warehouse, w)
        self.source_rows += s.num_rows
        self.warehouse_rows += w.num_rows
        s_both = pc.is_in(s["order_id"], value_set=w["order_id"])
        w_both = pc.is_in(w["order_id"], value_set=s["order_id"])
        _tally(self.not_loaded, s.filter(pc.invert(s_both)), ["day", "paid"])
        gone = w.filter(pc.invert(w_both))
        if gone.num_rows:
            _tally(self.gone, gone, ["day", "paid"])
            add_days(self.gone_sums, gone)
            for number in pc.unique(gone["day"]).to_pylist():
                shown = self.gone_ids.setdefault(number, [])
                if len(shown) < DELETED_IDS_SHOWN:
                    on_day = gone.filter(pc.equal(gone["day"], number))["order_id"]
                    shown.extend(on_day.slice(0, DELETED_IDS_SHOWN - len(shown)).to_pylist())
        # both sides are sorted by key and unique: the rows they share line up one to one
        s_pair, w_pair = s.filter(s_both), w.filter(w_both)
        differ = pc.invert(pc.and_(pc.and_(
            pc.equal(s_pair["status"], w_pair["status"]),
            pc.equal(s_pair["amount"], w_pair["amount"])),
            pc.equal(s_pair["updated_at"], w_pair["updated_at"])))
        if pc.any(differ).as_py():
            s_pair, w_pair = s_pair.filter(differ), w_pair.filter(differ)
            pairs = pa.table({"s_day": s_pair["day"], "w_day": w_pair["day"],
                              "s_paid": pc.equal(s_pair["status"], PAID),
                              "w_paid": pc.equal(w_pair["status"], PAID)})
            _tally(self.changed, pairs, ["s_day", "w_day", "s_paid", "w_paid"])

    def days(self) -> dict[str, DayCounts]:
        days = _counts(self.source, self.warehouse)

        def at(number: int) -> DayCounts:
            return days.setdefault(day_text(number), DayCounts(day_text(number)))

        for (number, paid), rows in self.not_loaded.items():
            counts = at(number)
            counts.not_loaded += rows
            counts.load_days.add(counts.day)
            if paid:
                counts.rebuild_days.add(counts.day)
        for (number, paid), rows in self.gone.items():  # a range load of the day deletes them
            counts = at(number)
            counts.only_in_warehouse += rows
            counts.load_days.add(counts.day)
            if paid:
                counts.rebuild_days.add(counts.day)
        for number, shown in self.gone_ids.items():
            at(number).deleted_ids = shown
            at(number).deleted_checksum = self.gone_sums[number].checksum
        for (s_day, w_day, s_paid, w_paid), rows in self.changed.items():
            # the file of a day changes where a paid row arrives or leaves
            files = {day_text(d) for d, paid in ((s_day, s_paid), (w_day, w_paid)) if paid}
            for number in {s_day, w_day}:
                counts = at(number)
                counts.changed += rows
                counts.load_days.add(day_text(s_day))
                counts.rebuild_days.update(files)
        return dict(sorted(days.items()))


def _tally(into: dict, rows: pa.Table, keys: list[str]) -> None:
    """Count ``rows`` by the values of ``keys`` (``paid``: status is paid) into ``into``."""
    if rows.num_rows == 0:
        return
    if "paid" in keys and "paid" not in rows.column_names:
        rows = rows.append_column("paid", pc.equal(rows["status"], PAID))
    counted = rows.select(keys).group_by(keys).aggregate([([], "count_all")])
    for row in zip(*(counted[k].to_pylist() for k in [*keys, "count_all"]), strict=True):
        key = row[0] if len(keys) == 1 else tuple(row[:-1])
        into[key] = into.get(key, 0) + row[-1]
