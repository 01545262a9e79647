"""Source vs warehouse: one merge-join by ``order_id`` over both databases.

The source is read through :func:`~pipeline_assets.core.source.read_window` (validated,
in ``order_id`` order) and the warehouse ``orders`` table with one ``SELECT … ORDER BY
order_id``; both stream, so memory stays bounded whatever the table size. Per row the
merge tells *not loaded* (only in the source), *changed* (the stored values differ) or
*only in the warehouse* (deleted from the source, which a load never propagates), and
which source day a load must read to fix it: a row that moved from day X to day Y marks
both days and repairs both with a load of Y. Per day it keeps a count and an
order-independent checksum of each side (sum mod 2**64 of a 64-bit BLAKE2b of the row's
digest text, :func:`~pipeline_assets.core.rows.digest_text`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta, tzinfo

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..db import guard, orders
from ..errors import PipelineError
from ..rows import PAID, InvalidRowError, digest_text
from ..source import DEFAULT_CHUNK, inspect_source, read_window
from ..times import UTC, canonical, day_start, from_canonical

_MASK = (1 << 64) - 1


class VerifyError(PipelineError):
    """Verify could not compare: an invalid source row, an unreadable warehouse row."""


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
            "warehouse_paid": self.warehouse_paid,
        }


def checksum(stored: tuple) -> int:
    """The 64-bit checksum of one stored row; a day's checksum is their sum mod 2**64."""
    return int.from_bytes(hashlib.blake2b(digest_text(stored), digest_size=8).digest(), "big")


def add_source(counts: DayCounts, stored: tuple, paid: bool) -> None:
    counts.source_rows += 1
    counts.source_checksum = (counts.source_checksum + checksum(stored)) & _MASK
    counts.source_paid += paid


def add_warehouse(counts: DayCounts, row: tuple) -> None:
    counts.warehouse_rows += 1
    counts.warehouse_checksum = (counts.warehouse_checksum + checksum(tuple(row))) & _MASK
    counts.warehouse_paid += row[1] == PAID


def _source_stream(engine: Engine, tz: tzinfo, chunk_size: int) -> Iterator:
    src = inspect_source(engine)
    for chunk in read_window(engine, src, tz, None, None, chunk_size):
        yield from chunk


def _warehouse_stream(engine: Engine, chunk_size: int) -> Iterator[tuple]:
    o = orders.c
    query = sa.select(o.order_id, o.status, o.amount, o.updated_at).order_by(o.order_id)
    with guard(engine, "WAREHOUSE_DATABASE_URL"):
        with engine.connect() as conn:
            result = conn.execution_options(stream_results=True, yield_per=chunk_size
                                            ).execute(query)
            for part in result.partitions(chunk_size):
                yield from part


def compare_orders(source: Engine, warehouse: Engine | None, tz: tzinfo, *,
                   chunk_size: int = DEFAULT_CHUNK) -> tuple[dict[str, DayCounts], int, int]:
    """Merge the source and the warehouse by ``order_id``: per-day counts, checksums, diffs.

    Returns ``(days, source_rows, warehouse_rows)``. ``warehouse=None``: an empty one.
    """
    days: dict[str, DayCounts] = {}
    day_of_text = _DayOfCanonical(tz)

    def at(day: str) -> DayCounts:
        counts = days.get(day)
        if counts is None:
            counts = days[day] = DayCounts(day)
        return counts

    def warehouse_day(row: tuple) -> str:
        try:
            from_canonical(row[3])  # only to refuse a malformed value
        except (TypeError, ValueError):
            raise VerifyError(
                f"the warehouse row of order {row[0]} has updated_at {row[3]!r}, which is not "
                "a canonical timestamp; reload it with an explicit-range orders run"
            ) from None
        return day_of_text(row[3])

    src_iter = _source_stream(source, tz, chunk_size)
    wh_iter = _warehouse_stream(warehouse, chunk_size) if warehouse is not None else iter(())
    n_source = n_warehouse = 0
    last_s = last_w = -(1 << 63) - 1
    try:
        s = next(src_iter, None)
        w = next(wh_iter, None)
        while s is not None or w is not None:
            s_id = s.order_id if s is not None else None
            w_id = w[0] if w is not None else None
            if s is not None:
                if s_id <= last_s:
                    raise VerifyError(_unordered("source", s_id, last_s))
                stored = s.stored
                s_day = day_of_text(stored[3])
            if w is not None and w_id <= last_w:
                raise VerifyError(_unordered("warehouse", w_id, last_w))

            if s_id == w_id and tuple(w) == stored:  # the common case: one checksum, one day
                counts = at(s_day)
                row_sum = checksum(stored)
                counts.source_rows += 1
                counts.warehouse_rows += 1
                counts.source_checksum = (counts.source_checksum + row_sum) & _MASK
                counts.warehouse_checksum = (counts.warehouse_checksum + row_sum) & _MASK
                if s.is_paid:
                    counts.source_paid += 1
                    counts.warehouse_paid += 1
            elif w is None or (s is not None and s_id < w_id):  # not loaded yet
                counts = at(s_day)
                add_source(counts, stored, s.is_paid)
                counts.not_loaded += 1
                counts.load_days.add(s_day)
                if s.is_paid:
                    counts.rebuild_days.add(s_day)
            elif s is None or w_id < s_id:  # gone from the source
                counts = at(warehouse_day(w))
                add_warehouse(counts, w)
                counts.only_in_warehouse += 1
            else:  # the same order, other values: on its old day and on its new one
                w_day = warehouse_day(w)
                add_source(at(s_day), stored, s.is_paid)
                add_warehouse(at(w_day), w)
                # the file of a day changes where a paid row arrives or leaves
                files = {d for d, paid in ((s_day, s.is_paid), (w_day, w[1] == PAID)) if paid}
                for day in {s_day, w_day}:
                    at(day).changed += 1
                    at(day).load_days.add(s_day)
                    at(day).rebuild_days.update(files)

            if s is not None and (w is None or s_id <= w_id):
                last_s, n_source, s = s_id, n_source + 1, next(src_iter, None)
            if w is not None and (s_id is None or w_id <= s_id):
                last_w, n_warehouse, w = w_id, n_warehouse + 1, next(wh_iter, None)
    except InvalidRowError as exc:
        who = "a row with no order_id" if exc.order_id is None else f"order {exc.order_id}"
        raise VerifyError(
            f"cannot verify: the source's {who} has column {exc.column} = {exc.value!r}: "
            f"{exc.reason}. Fix the row in the source and run verify again."
        ) from None
    finally:
        src_iter.close()
        if hasattr(wh_iter, "close"):
            wh_iter.close()
    return days, n_source, n_warehouse


class _DayOfCanonical:
    """The day (in ``tz``) of a canonical UTC timestamp text, mostly without parsing it.

    Canonical text sorts as it compares, so per UTC date the local-midnight bounds,
    computed once, tell the local day by string comparison. A UTC date on which the zone
    changes its offset takes the exact path (parse, ``astimezone``), so a zone that falls
    back across midnight still gets the same day as ``Order.day``.
    """

    def __init__(self, tz: tzinfo):
        self.tz = tz
        self.bounds: dict[str, list[tuple[str, str]] | None] = {}

    def _bounds(self, key: str) -> list[tuple[str, str]] | None:
        utc_day = date.fromisoformat(key)
        first = day_start(utc_day, UTC)
        if first.astimezone(self.tz).utcoffset() != \
                (first + timedelta(days=1)).astimezone(self.tz).utcoffset():
            return None
        return [(canonical(day_start(d, self.tz)), d.isoformat())
                for d in (utc_day + timedelta(days=k) for k in (1, 0, -1))]

    def __call__(self, text: str) -> str:
        key = text[:10]
        if key in self.bounds:
            bounds = self.bounds[key]
        else:
            bounds = self.bounds[key] = self._bounds(key)
        if bounds is not None:
            for start, day in bounds:
                if start <= text:
                    return day
        return from_canonical(text).astimezone(self.tz).date().isoformat()


def _unordered(side: str, order_id: int, previous: int) -> str:
    return (f"the {side} returned order {order_id} after order {previous}: orders are not in "
            "order_id order, so order_id is not an integer key; the pipeline needs one "
            "(see docs/contract.md)")
