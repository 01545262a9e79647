"""The days the ``N_match_source`` check compares: anchored on the data, not the clock.

The window is the ``RECONCILE_DAYS`` days ending on the day of the newest data the
warehouse holds — the table's watermark, or, before any incremental load has set one, the
newest cursor value stored (``updated_at`` for ``orders``) — plus the days the last batch
touched that it read whole. A window counted back from the wall clock would compare
nothing whenever the source has been quiet for longer than the window (a stalled
replica, a history loaded after the fact, a quiet season), which is exactly when the
check is needed. And a check that compared no day while the warehouse holds rows fails,
saying why: it never passes by comparing nothing.

A load's own check proves what that load did, at a cost that follows what it read: it
compares the days the load read whole (the lookback window, a range load's range, a
first load's everything), the source side taken from that read, with what the
warehouse now holds. The days of the window the load did not read (``left``), and the
days its rows left without it reading them (``deferred``), are compared by the full
comparison of the daily schedule's run, with every day touched since the last one
(:mod:`.pending`), and by ``verify``: a row later than the lookback window is found
there, within a day.

:func:`horizon` is the window, a pure function of plain values; :func:`judge` turns the
per-day comparison into the verdict; :func:`reconcile_horizon` reads the databases. Each
takes the declared table (``spec``; ``orders`` unless told, in the words it always had).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, tzinfo

from sqlalchemy.engine import Engine

from ..commands import verify_command
from ..days import days_between, runs
from ..db.engines import dialect_of, guard, has_table
from ..db.quoting import quote, through_sqlalchemy
from ..table.spec import TableSpec
from ..times import UTC, day_start, from_canonical, parse_day
from ..warehouse import watermark as wm
from ..warehouse.evolve import Gap, days_to_fill, open_gaps
from . import DayCounts, Repairs, compare_days, differing_days
from .compare import add_deleted, deletes_to_allow
from .pending import owed_days, record_compared
from .report import deleted_ids

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
    deferred: tuple[date, ...] = ()  # of ``touched``: left to the full comparison
    owed: tuple[date, ...] = ()  # days earlier batches touched, outside the window
    left: tuple[date, ...] = ()  # days of the window a load did not read: as ``deferred``

    @property
    def window(self) -> list[date]:
        if self.first is None:
            return []
        return [parse_day(day) for day in days_between(self.first, self.last)]

    @property
    def days(self) -> list[date]:
        window = set(self.window) - set(self.left)
        return sorted(window | (set(self.touched) - set(self.deferred)) | set(self.owed))

    def spans(self) -> list[tuple[date, date]]:
        """The days as blocks of consecutive days, each ``(first, last)`` inclusive."""
        return [(parse_day(a), parse_day(b)) for a, b in runs(d.isoformat() for d in self.days)]

    def describe(self) -> str:
        parts = []
        if self.first is not None and len(self.left) < len(self.window):
            parts.append(
                f"{self.first}…{self.last}, the {self.reconcile_days} day(s) ending "
                f"at the {self.anchored_on} {self.anchor.isoformat()}"
                + (" (those the load read)" if self.left else "")
            )
        compared = [d for d in self.touched if d not in self.deferred]
        if compared:
            parts.append("the touched day(s) " + ", ".join(map(str, compared)))
        if self.owed:
            parts.append(f"{len(self.owed)} day(s) touched since the last full comparison")
        return " and ".join(parts) or "no day"


def horizon(
    *,
    watermark: datetime | None,
    newest_row: datetime | None,
    days_touched: Iterable[str | date],
    reconcile_days: int,
    tz: tzinfo,
    read_by_load: Callable[[date], bool] | None = None,
    owed: Iterable[date] = (),
) -> Horizon:
    """The days to compare, from the data alone (never the clock).

    The anchor is the watermark; without one (only explicit-range loads so far) the
    newest cursor value the warehouse holds; without either, nothing (an empty
    warehouse). The window is the ``reconcile_days`` days ending on the anchor's day in
    ``tz``; the batch's ``days_touched`` are added, wherever they fall.

    A load's own check passes ``read_by_load`` (whether the load read a day whole): a
    day of the window the load did not read is then ``left``, and a touched day outside
    the window it did not read (a row left it) ``deferred``, both to the full
    comparison, which passes the days ``owed`` to it instead (:mod:`.pending`). Without
    either, the whole window and every touched day are compared.
    """
    if reconcile_days < 0:
        raise ValueError(f"RECONCILE_DAYS={reconcile_days} must be 0 or more")
    anchor, anchored_on = (
        (watermark, WATERMARK)
        if watermark is not None
        else (newest_row, NEWEST_ROW)
        if newest_row is not None
        else (None, NOTHING)
    )
    first = last = None
    if anchor is not None and reconcile_days > 0:
        last = anchor.astimezone(tz).date()
        first = last - timedelta(days=reconcile_days - 1)
    touched = sorted({d if isinstance(d, date) else parse_day(d) for d in days_touched})
    outside = tuple(d for d in touched if first is None or not first <= d <= last)
    deferred = () if read_by_load is None else tuple(d for d in outside if not read_by_load(d))
    extra = tuple(sorted({d for d in owed if first is None or not first <= d <= last}))
    h = Horizon(anchored_on, anchor, first, last, outside, reconcile_days, deferred, extra)
    if read_by_load is None:
        return h
    return replace(h, left=tuple(d for d in h.window if not read_by_load(d)))


@dataclass(frozen=True)
class Verdict:
    passed: bool
    days_compared: int
    differing: list[str]
    repair: list[str]
    description: str | None
    to_fill: dict[str, list[str]] = field(default_factory=dict)  # column: days (evolve.Gap)


def judge(
    h: Horizon,
    days: Mapping[str, DayCounts],
    *,
    warehouse_holds_rows: bool,
    max_delete_share: float = 0.5,
    spec: TableSpec,
    repairs: Repairs | None = None,
    to_fill: Sequence[Gap] = (),
) -> Verdict:
    """Pass when every compared day agrees, at least one day was compared, and no column
    added to the declaration still lacks values on days stored before it (``to_fill``,
    whatever the horizon: those rows were never read for it).

    ``days`` holds the days of the horizon with a row on either side. None of them while
    the warehouse holds rows is a failure: the check could vouch for nothing.
    ``repairs``: the commands' table and code location (default: ``spec``'s, this one).
    """
    repairs = repairs or Repairs(spec)
    verdict = _judge(h, days, warehouse_holds_rows, max_delete_share, spec, repairs)
    return _with_gaps(verdict, to_fill, repairs) if to_fill else verdict


def _with_gaps(verdict: Verdict, to_fill: Sequence[Gap], repairs: Repairs) -> Verdict:
    """The verdict, failed by the days still to fill, naming each column, its days and the
    range loads that fill them (then the rebuilds of the files that hold the columns)."""
    by_day = days_to_fill(list(to_fill))
    filed = {c for f in repairs.spec.daily_files for c in f.columns}
    rebuilds = [d for d, columns in by_day.items() if filed & set(columns)]
    fill = repairs.commands(by_day, rebuilds)
    said = "; ".join(
        f"column {gap.column} was declared after {gap.rows_before} row(s) were stored (batch "
        f"{gap.added_batch_id}, {gap.added_at[:10]}), and {len(gap.days)} day(s) hold rows "
        "not read since, which lack its values: "
        + ", ".join(a if a == b else f"{a}…{b}" for a, b in runs(gap.days))
        for gap in to_fill
    )
    text = f"{said}. Fill them: " + "; ".join(fill)
    return replace(
        verdict,
        passed=False,
        repair=list(dict.fromkeys([*verdict.repair, *fill])),
        description=f"{verdict.description} {text}" if verdict.description else text,
        to_fill={gap.column: list(gap.days) for gap in to_fill},
    )


def _judge(
    h: Horizon,
    days: Mapping[str, DayCounts],
    warehouse_holds_rows: bool,
    max_delete_share: float,
    spec: TableSpec,
    repairs: Repairs,
) -> Verdict:
    bad = differing_days(dict(days))
    if bad:
        return _differing(days, bad, max_delete_share, repairs)
    if days:
        return Verdict(True, len(days), [], [], None)
    rows = spec.say("table_rows")
    if not warehouse_holds_rows:
        return Verdict(True, 0, [], [], f"the warehouse holds no {rows} yet: nothing to compare")
    if h.reconcile_days == 0:
        why = (
            "RECONCILE_DAYS is 0 and the last batch touched no day; set RECONCILE_DAYS to 1 or more"
        )
    else:
        why = (
            f"no row on either side in {h.describe()}, though the warehouse holds {rows}: "
            "the watermark points at days without data (rewound past them?)"
        )
    return Verdict(
        False,
        0,
        [],
        [],
        (
            f"compared no day, so this check cannot vouch for anything: {why}. Run "
            "`pipeline-assets verify` to reconcile every day."
        ),
    )


def _differing(
    days: Mapping[str, DayCounts], bad: list[str], max_delete_share: float, repairs: Repairs
) -> Verdict:
    """The failing verdict: which days differ, the rows deleted, and the repair."""
    spec = repairs.spec
    allow, refused = deletes_to_allow(days.values(), max_delete_share, spec=spec)
    repair = repairs.commands(bad, [], allow)
    deleted = [d for d in bad if days[d].only_in_warehouse]
    late = [d for d in bad if not days[d].only_deletions]
    why = ""
    if deleted:
        rows = spec.say("Table_rows")
        why += (
            f" {rows} the source no longer has: "
            + "; ".join(
                f"{d}: {days[d].only_in_warehouse} ({deleted_ids(days[d], spec)})" for d in deleted
            )
            + "."
        )
        if refused:
            why += f" Careful: {refused}."
    if late:
        why += (
            " Rows arrived later than the lookback window"
            + (f" on {', '.join(late)}" if deleted else "")
            + "."
        )
    return Verdict(
        False,
        len(days),
        bad,
        repair,
        (
            f"{len(bad)} day(s) differ between source and warehouse: {', '.join(bad)}."
            f"{why} Repair: "
            + "; ".join(repair)
            + " (the refresh sensor then rebuilds their files; without the daemon, "
            f"`{verify_command(repairs.module)}` afterwards prints those rebuilds)."
        ),
    )


def newest_row(warehouse: Engine, spec: TableSpec, *, tz: tzinfo = UTC) -> datetime | None:
    """The newest cursor value in ``spec``'s warehouse table (``updated_at`` of ``orders``;
    a date cursor: midnight of its newest date in ``tz``); None: no table, or empty."""
    if not has_table(warehouse, spec.name, "WAREHOUSE_DATABASE_URL"):
        return None
    dialect = dialect_of(warehouse)
    sql = f"SELECT max({quote(spec.stamp, dialect)}) FROM {quote(spec.name, dialect)}"
    with guard(warehouse, "WAREHOUSE_DATABASE_URL"), warehouse.connect() as conn:
        newest = conn.exec_driver_sql(through_sqlalchemy(sql, dialect)).scalar()
    if not newest:
        return None
    if spec.column(spec.stamp).type.codec.is_day:
        return day_start(parse_day(newest), tz)
    return from_canonical(newest)


def _read_by(read_whole) -> Callable[[date], bool]:
    """Whether the load of ``read_whole`` (None: no load) read a day whole."""
    return lambda day: read_whole is not None and read_whole.covers(day)


def reconcile_horizon(
    source: Engine,
    warehouse: Engine,
    tz: tzinfo,
    *,
    reconcile_days: int,
    days_touched: Iterable[str | date] = (),
    read_whole=None,
    max_delete_share: float = 0.5,
    spec: TableSpec,
    repairs: Repairs | None = None,
    full_at: datetime | None = None,
) -> tuple[Horizon, dict[str, DayCounts], Verdict]:
    """Compare source and warehouse of ``spec`` over the :func:`horizon`; one range read
    per span. ``repairs``: the table and code location the printed commands name.

    ``read_whole`` (the :class:`~pipeline_assets.core.load.batch.WholeDays` of the load that just
    ran) is the source side of the days that load read whole: the source as the load saw
    it, which is what the warehouse must now hold. Every other day is read again. A
    touched day outside the window that the load did not read whole is deferred.

    ``full_at``: the full comparison, made at that instant (the daily schedule's run):
    every touched day, and every day touched since the last full comparison that passed
    (:mod:`.pending`); when this one passes, it is recorded.
    """
    newest = newest_row(warehouse, spec, tz=tz)
    owed = owed_days(warehouse, spec) if full_at is not None else None
    mark = wm.current(warehouse, table=spec.name)
    h = horizon(  # an integer cursor's watermark is an id: the newest day anchors instead
        watermark=None if isinstance(mark, int) else mark,
        newest_row=newest,
        days_touched=days_touched,
        reconcile_days=reconcile_days,
        tz=tz,
        read_by_load=_read_by(read_whole) if owed is None else None,
        owed=() if owed is None else owed.days,
    )
    days = compare_days(source, warehouse, tz, h.days, known=read_whole, spec=spec)
    if not days and h.left:  # the load read no day with rows: never compare nothing
        h = replace(h, left=())
        days = compare_days(source, warehouse, tz, h.days, known=read_whole, spec=spec)
    add_deleted(source, warehouse, tz, {d: days[d] for d in differing_days(days)}, spec=spec)
    to_fill = open_gaps(warehouse, spec)
    verdict = judge(
        h,
        days,
        warehouse_holds_rows=newest is not None,
        max_delete_share=max_delete_share,
        spec=spec,
        repairs=repairs,
        to_fill=to_fill,
    )
    if owed is not None and verdict.passed:
        record_compared(warehouse, spec, owed, full_at)
    return h, days, verdict
