"""The days the ``orders_match_source`` check compares: anchored on the data, not the clock.

The window is the ``RECONCILE_DAYS`` days ending on the day of the newest data the
warehouse holds — the watermark, or, before any incremental load has set one, the newest
``updated_at`` stored — plus every day the last batch touched. A window counted back
from the wall clock would compare nothing whenever the source has been quiet for longer
than the window (a stalled replica, a history loaded after the fact, a quiet season),
which is exactly when the check is needed. And a check that compared no day while the
warehouse holds rows fails, saying why: it never passes by comparing nothing.

:func:`horizon` is the window, a pure function of plain values; :func:`judge` turns the
per-day comparison into the verdict; :func:`reconcile_horizon` reads the databases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from . import watermark as wm
from .days import days_between, runs
from .db import guard, has_table, orders
from .times import from_canonical, parse_day
from .verify import DayCounts, compare_days, differing_days, repair_commands
from .verify.compare import add_deleted, deletes_to_allow
from .verify.report import deleted_ids

WATERMARK = "watermark"
NEWEST_ROW = "newest warehouse row"
NOTHING = "nothing"


@dataclass(frozen=True)
class Horizon:
    """The days to compare: ``first``…``last`` (inclusive) and the touched days outside it."""

    anchored_on: str  # WATERMARK | NEWEST_ROW | NOTHING (an empty warehouse)
    anchor: datetime | None
    first: date | None
    last: date | None
    touched: tuple[date, ...]  # days the batch touched outside first…last, sorted
    reconcile_days: int

    @property
    def days(self) -> list[date]:
        window = [] if self.first is None else \
            [parse_day(day) for day in days_between(self.first, self.last)]
        return sorted(set(window) | set(self.touched))

    def spans(self) -> list[tuple[date, date]]:
        """The days as blocks of consecutive days, each ``(first, last)`` inclusive."""
        return [(parse_day(a), parse_day(b)) for a, b in runs(d.isoformat() for d in self.days)]

    def describe(self) -> str:
        parts = []
        if self.first is not None:
            parts.append(f"{self.first}…{self.last}, the {self.reconcile_days} day(s) ending "
                         f"at the {self.anchored_on} {self.anchor.isoformat()}")
        if self.touched:
            parts.append("the touched day(s) " + ", ".join(map(str, self.touched)))
        return " and ".join(parts) or "no day"


def horizon(*, watermark: datetime | None, newest_row: datetime | None,
            days_touched: Iterable[str | date], reconcile_days: int, tz: tzinfo) -> Horizon:
    """The days to compare, from the data alone (never the clock).

    The anchor is the watermark; without one (only explicit-range loads so far) the
    newest ``updated_at`` the warehouse holds; without either, nothing (an empty
    warehouse). The window is the ``reconcile_days`` days ending on the anchor's day in
    ``tz``; the batch's ``days_touched`` are added, wherever they fall.
    """
    if reconcile_days < 0:
        raise ValueError(f"RECONCILE_DAYS={reconcile_days} must be 0 or more")
    anchor, anchored_on = (watermark, WATERMARK) if watermark is not None else \
        (newest_row, NEWEST_ROW) if newest_row is not None else (None, NOTHING)
    first = last = None
    if anchor is not None and reconcile_days > 0:
        last = anchor.astimezone(tz).date()
        first = last - timedelta(days=reconcile_days - 1)
    touched = sorted({d if isinstance(d, date) else parse_day(d) for d in days_touched})
    outside = tuple(d for d in touched if first is None or not first <= d <= last)
    return Horizon(anchored_on, anchor, first, last, outside, reconcile_days)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    days_compared: int
    differing: list[str]
    repair: list[str]
    description: str | None


def judge(h: Horizon, days: Mapping[str, DayCounts], *, warehouse_holds_rows: bool,
          max_delete_share: float = 0.5) -> Verdict:
    """Pass when every compared day agrees and at least one day was compared.

    ``days`` holds the days of the horizon with a row on either side. None of them while
    the warehouse holds rows is a failure: the check could vouch for nothing.
    """
    bad = differing_days(dict(days))
    allow, refused = deletes_to_allow(days.values(), max_delete_share)
    repair = repair_commands(bad, [], allow)
    if bad:
        deleted = [d for d in bad if days[d].only_in_warehouse]
        late = [d for d in bad if not days[d].only_deletions]
        why = ""
        if deleted:
            why += " Orders the source no longer has: " + "; ".join(
                f"{d}: {days[d].only_in_warehouse} ({deleted_ids(days[d])})"
                for d in deleted) + "."
            if refused:
                why += f" Careful: {refused}."
        if late:
            why += " Rows arrived later than the lookback window" + (
                f" on {', '.join(late)}" if deleted else "") + "."
        return Verdict(False, len(days), bad, repair, (
            f"{len(bad)} day(s) differ between source and warehouse: {', '.join(bad)}."
            f"{why} Repair: " + "; ".join(repair)
            + " (the refresh sensor then rebuilds their files)."))
    if days:
        return Verdict(True, len(days), [], [], None)
    if not warehouse_holds_rows:
        return Verdict(True, 0, [], [], "the warehouse holds no orders yet: nothing to compare")
    if h.reconcile_days == 0:
        why = ("RECONCILE_DAYS is 0 and the last batch touched no day; set RECONCILE_DAYS "
               "to 1 or more")
    else:
        why = (f"no row on either side in {h.describe()}, though the warehouse holds orders: "
               "the watermark points at days without data (rewound past them?)")
    return Verdict(False, 0, [], [], (
        f"compared no day, so this check cannot vouch for anything: {why}. Run "
        "`pipeline-assets verify` to reconcile every day."))


def newest_row(warehouse: Engine) -> datetime | None:
    """The newest ``updated_at`` in the warehouse ``orders`` (None: no table, or empty)."""
    if not has_table(warehouse, orders.name, "WAREHOUSE_DATABASE_URL"):
        return None
    with guard(warehouse, "WAREHOUSE_DATABASE_URL"), warehouse.connect() as conn:
        newest = conn.execute(sa.select(sa.func.max(orders.c.updated_at))).scalar()
    return from_canonical(newest) if newest else None


def reconcile_horizon(source: Engine, warehouse: Engine, tz: tzinfo, *, reconcile_days: int,
                      days_touched: Iterable[str | date] = (), read_whole=None,
                      max_delete_share: float = 0.5
                      ) -> tuple[Horizon, dict[str, DayCounts], Verdict]:
    """Compare source and warehouse over the :func:`horizon`; one range read per span.

    ``read_whole`` (the :class:`~pipeline_assets.core.load.WholeDays` of the load that just
    ran) is the source side of the days that load read whole: the source as the load saw
    it, which is what the warehouse must now hold. Every other day is read again.
    """
    newest = newest_row(warehouse)
    h = horizon(watermark=wm.current(warehouse), newest_row=newest,
                days_touched=days_touched, reconcile_days=reconcile_days, tz=tz)
    days = compare_days(source, warehouse, tz, h.days, known=read_whole)
    add_deleted(source, warehouse, tz, {d: days[d] for d in differing_days(days)})
    return h, days, judge(h, days, warehouse_holds_rows=newest is not None,
                          max_delete_share=max_delete_share)
