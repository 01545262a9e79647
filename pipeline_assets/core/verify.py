"""Reconciliation (CONTRACT §8, ``pipeline-assets verify``): source vs warehouse per day,
and every day file vs its manifest and vs the warehouse.

One streaming pass over each database, whatever the number of days:

- the source through :func:`~.source.read_window` (validated, in ``order_id`` order) and
  the warehouse ``orders`` table with one ``SELECT … ORDER BY order_id``, merged by key.
  The merge tells, per row, *not loaded* (only in the source), *changed* (the stored
  values differ), or *only in the warehouse* (deleted from the source, which a load never
  propagates); and it tells which source day a load must read to fix a row, so a row that
  moved from day X to day Y marks both days and repairs both with a load of Y. Per day it
  also keeps a count and an order-independent checksum of each side's rows (sum mod 2**64
  of a 64-bit BLAKE2b of ``order_id, status, amount text, canonical updated_at``).
- the committed day files through :func:`~.daily_files.describe_days`, compared with the
  warehouse's paid orders from :func:`~.paid.paid_orders_by_day`: one range query per
  span of at most :data:`FILE_BATCH_DAYS` days, so memory stays bounded on a year.

Repairs are the commands a user types, CONTRACT §2: an explicit-range ``orders`` run
(leaves the watermark alone) for a day whose warehouse rows differ from the source, then
a rebuild of the ``paid_orders`` and ``daily_revenue`` partitions whose files are stale,
uncommitted or missing. Consecutive days share one command (a range).

Plain Python, no Dagster: the caller passes the engines, the folder, the time zone and
``today`` (from its clock), and prints the :class:`VerifyResult`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .daily_files import (
    COMMITTED,
    UNCOMMITTED,
    DayStatus,
    describe_days,
    folder_lock,
    known_days,
    serialize_day,
    sha256_hex,
)
from .db import DatabaseError, connect_error, has_table, orders, redact
from .paid import paid_orders_by_day
from .rows import PAID, InvalidRowError
from .source import DEFAULT_CHUNK, inspect_source, read_window
from .times import UTC, canonical, day_start, from_canonical

FILE_BATCH_DAYS = 31  # days per paid_orders_by_day query when comparing files

DEFINITIONS = "-m pipeline_assets.definitions"
ORDERS_RANGE_COMMAND = "dagster asset materialize {defs} --select orders --config-json '{config}'"
REBUILD_COMMAND = "dagster asset materialize {defs} --select paid_orders,daily_revenue {which}"

# kinds of problem, as shown in the output and the JSON
DIFFERS_FROM_SOURCE = "differs from source"
FILE_UNCOMMITTED = "uncommitted"
FILE_DIFFERS = "file differs from warehouse"
FILE_NOT_BUILT = "not built"

_MASK = (1 << 64) - 1


class VerifyError(ValueError):
    """Verify could not compare: an invalid source row, an unreadable warehouse row."""


# --- repair commands ----------------------------------------------------------------------


def runs(days: Iterable[str]) -> list[tuple[str, str]]:
    """Consecutive days grouped: ``["01-03", "01-04", "01-09"]`` → ``[(03, 04), (09, 09)]``."""
    out: list[list[date]] = []
    for d in sorted({date.fromisoformat(day) for day in days}):
        if out and d - out[-1][1] == timedelta(days=1):
            out[-1][1] = d
        else:
            out.append([d, d])
    return [(a.isoformat(), b.isoformat()) for a, b in out]


def orders_range_command(first: str, last: str) -> str:
    """The explicit-range ``orders`` run that reloads days ``first``…``last`` (inclusive)."""
    end = (date.fromisoformat(last) + timedelta(days=1)).isoformat()
    config = json.dumps({"ops": {"orders": {"config": {"start": first, "end": end}}}})
    return ORDERS_RANGE_COMMAND.format(defs=DEFINITIONS, config=config)


def rebuild_command(first: str, last: str) -> str:
    """The ``paid_orders`` + ``daily_revenue`` run that rebuilds days ``first``…``last``."""
    which = f"--partition {first}" if first == last else f"--partition-range {first}...{last}"
    return REBUILD_COMMAND.format(defs=DEFINITIONS, which=which)


def repair_commands(load_days: Iterable[str], rebuild_days: Iterable[str]) -> list[str]:
    """Loads first (they change the warehouse), then the rebuilds that read it."""
    return ([orders_range_command(a, b) for a, b in runs(load_days)]
            + [rebuild_command(a, b) for a, b in runs(rebuild_days)])


# --- the result ---------------------------------------------------------------------------


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


@dataclass(frozen=True)
class FileCheck:
    """One day file: its committed status and whether its rows equal the warehouse's."""

    day: str
    state: str  # committed | uncommitted | not built (daily_files' words)
    matches_warehouse: bool | None  # None when the file is not committed
    file_rows: int | None
    warehouse_paid: int
    detail: str = ""

    def to_json(self) -> dict:
        return {"day": self.day, "state": self.state,
                "matches_warehouse": self.matches_warehouse, "file_rows": self.file_rows,
                "warehouse_paid": self.warehouse_paid, "detail": self.detail}


@dataclass(frozen=True)
class Problem:
    """A day that differs, is uncommitted or is not built, with the commands that repair it."""

    day: str
    kind: str
    detail: str
    fails: bool
    repair: tuple[str, ...]

    def to_json(self) -> dict:
        return {"day": self.day, "kind": self.kind, "fails": self.fails,
                "detail": self.detail, "repair": list(self.repair)}


@dataclass(frozen=True)
class VerifyResult:
    timezone: str
    today: str | None
    partitions_start: str | None
    days_from: str | None
    days_to: str | None
    require_all: bool
    source_rows: int
    warehouse_rows: int
    days: tuple[DayCounts, ...]  # in the range asked, with a row on either side
    files: tuple[FileCheck, ...]  # in the range asked, with a file or a pointer
    problems: tuple[Problem, ...]  # sorted by day, then kind
    repair: tuple[str, ...]  # every command, grouped by ranges, in the order to run them

    @property
    def failing_days(self) -> list[str]:
        return sorted({p.day for p in self.problems if p.fails})

    @property
    def ok(self) -> bool:
        return not self.failing_days

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_json(self) -> dict:
        return {
            "ok": self.ok, "exit_code": self.exit_code, "require_all": self.require_all,
            "timezone": self.timezone, "today": self.today,
            "partitions_start": self.partitions_start,
            "days_from": self.days_from, "days_to": self.days_to,
            "source_rows": self.source_rows, "warehouse_rows": self.warehouse_rows,
            "failing_days": self.failing_days,
            "problems": [p.to_json() for p in self.problems],
            "repair": list(self.repair),
            "days": [d.to_json() for d in self.days],
            "files": [f.to_json() for f in self.files],
        }

    def lines(self) -> list[str]:
        """The human-readable report: a summary, one block per problem, the repair plan."""
        scope = ""
        if self.days_from or self.days_to:
            scope = f", days {self.days_from or 'first'}…{self.days_to or 'last'}"
        differing = sum(1 for d in self.days if not d.agrees)
        committed = sum(1 for f in self.files if f.state == COMMITTED)
        equal = sum(1 for f in self.files if f.matches_warehouse)
        out = [
            f"source vs warehouse: {len(self.days)} days, {self.source_rows} source rows, "
            f"{self.warehouse_rows} warehouse rows, {differing} day(s) differ "
            f"(time zone {self.timezone}{scope})",
            f"day files: {len(self.files)} days with a file, {committed} committed, "
            f"{equal} equal to the warehouse; "
            f"{sum(1 for p in self.problems if p.kind == FILE_NOT_BUILT)} day(s) not built",
        ]
        for p in self.problems:
            out.append(f"{'FAIL' if p.fails else 'INFO'} {p.day} {p.kind}: {p.detail}")
            out.extend(f"     repair: {command}" for command in p.repair)
        if self.ok:
            out.append("OK: source, warehouse and committed day files agree")
        else:
            days = self.failing_days
            out.append(f"FAILED: {len(days)} day(s) need repair: {', '.join(days)}")
        if self.repair:
            out.append("to repair, run in this order:")
            out.extend(f"  {command}" for command in self.repair)
        return out


# --- the passes ---------------------------------------------------------------------------


def _checksum(stored: tuple) -> int:
    text = "\x1f".join(map(str, stored)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def _source_stream(engine: Engine, tz: tzinfo, chunk_size: int) -> Iterator:
    src = inspect_source(engine)
    for chunk in read_window(engine, src, tz, None, None, chunk_size):
        yield from chunk


def _warehouse_stream(engine: Engine, chunk_size: int) -> Iterator[tuple]:
    o = orders.c
    query = sa.select(o.order_id, o.status, o.amount, o.updated_at).order_by(o.order_id)
    try:
        with engine.connect() as conn:
            result = conn.execution_options(stream_results=True, yield_per=chunk_size
                                            ).execute(query)
            for part in result.partitions(chunk_size):
                yield from part
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        raise connect_error(exc, engine, "WAREHOUSE_DATABASE_URL") from None


def _has_orders_table(engine: Engine) -> bool:
    return has_table(engine, "orders", "WAREHOUSE_DATABASE_URL")


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
                checksum = _checksum(stored)
                counts.source_rows += 1
                counts.warehouse_rows += 1
                counts.source_checksum = (counts.source_checksum + checksum) & _MASK
                counts.warehouse_checksum = (counts.warehouse_checksum + checksum) & _MASK
                if s.is_paid:
                    counts.source_paid += 1
                    counts.warehouse_paid += 1
            elif w is None or (s is not None and s_id < w_id):  # not loaded yet
                counts = at(s_day)
                _add_source(counts, stored, s.is_paid)
                counts.not_loaded += 1
                counts.load_days.add(s_day)
                if s.is_paid:
                    counts.rebuild_days.add(s_day)
            elif s is None or w_id < s_id:  # gone from the source
                counts = at(warehouse_day(w))
                _add_warehouse(counts, w)
                counts.only_in_warehouse += 1
            else:  # the same order, other values: on its old day and on its new one
                w_day = warehouse_day(w)
                _add_source(at(s_day), stored, s.is_paid)
                _add_warehouse(at(w_day), w)
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
            "order_id order, so order_id is not an integer key; CONTRACT §4 needs one")


def _add_source(counts: DayCounts, stored: tuple, paid: bool) -> None:
    counts.source_rows += 1
    counts.source_checksum = (counts.source_checksum + _checksum(stored)) & _MASK
    counts.source_paid += paid


def _add_warehouse(counts: DayCounts, row: tuple) -> None:
    counts.warehouse_rows += 1
    counts.warehouse_checksum = (counts.warehouse_checksum + _checksum(tuple(row))) & _MASK
    counts.warehouse_paid += row[1] == PAID


def _batches(days: Sequence[str], span: int = FILE_BATCH_DAYS) -> Iterator[list[str]]:
    """Sorted days cut so that each batch covers at most ``span`` calendar days."""
    batch: list[str] = []
    for day in sorted(days):
        if batch and (date.fromisoformat(day) - date.fromisoformat(batch[0])).days >= span:
            yield batch
            batch = []
        batch.append(day)
    if batch:
        yield batch


def check_files(folder: str | Path, warehouse: Engine | None, tz: tzinfo, days: Sequence[str],
                warehouse_paid: dict[str, int]) -> list[FileCheck]:
    """Status of each day file in ``days``, and for committed ones: rows == warehouse rows?"""
    with folder_lock(folder, shared=True):  # wait for a writer instead of calling it torn
        statuses = describe_days(folder, days)
    committed = [s for s in statuses if s.state == COMMITTED]
    expected: dict[str, list[dict]] = {}
    if warehouse is not None:
        for batch in _batches([s.day for s in committed]):
            expected.update(paid_orders_by_day(warehouse, batch, tz))
    out = []
    for status in statuses:
        paid = warehouse_paid.get(status.day, 0)
        if status.state != COMMITTED:
            out.append(FileCheck(status.day, status.state, None, None, paid, status.reason))
            continue
        rows = expected.get(status.day, [])
        out.append(_compare_file(status, rows, paid))
    return out


def _compare_file(status: DayStatus, rows: list[dict], paid: int) -> FileCheck:
    want = serialize_day(status.day, rows)
    if sha256_hex(want) == status.sha256:
        return FileCheck(status.day, status.state, True, len(rows), paid)
    try:
        have = json.loads(status.data)
        have = {int(r["order_id"]): r for r in have}
    except (ValueError, TypeError, KeyError):
        return FileCheck(status.day, status.state, False, None, paid,
                         "the committed file does not hold rows with an order_id")
    want_rows = {r["order_id"]: r for r in json.loads(want)}
    missing = sum(1 for k in want_rows if k not in have)
    extra = sum(1 for k in have if k not in want_rows)
    different = sum(1 for k in want_rows if k in have and have[k] != want_rows[k])
    if not (missing or extra or different):  # same rows, older byte layout
        return FileCheck(status.day, status.state, True, len(have), paid)
    detail = (f"the committed file has {len(have)} row(s), the warehouse {len(want_rows)} paid "
              f"order(s): {missing} missing from the file, {extra} no longer paid on this day, "
              f"{different} with other values")
    return FileCheck(status.day, status.state, False, len(have), paid, detail)


# --- putting it together ------------------------------------------------------------------


def verify(source: Engine, warehouse: Engine, folder: str | Path, *, tz: tzinfo,
           today: date | None = None, partitions_start: date | None = None,
           days_from: date | None = None, days_to: date | None = None,
           require_all: bool = False, chunk_size: int = DEFAULT_CHUNK) -> VerifyResult:
    """Reconcile source, warehouse and day files; see the module docstring.

    ``today`` (from the caller's clock) and ``partitions_start`` bound the days that have
    a partition to rebuild: a day not over yet, or before the first partition, is never
    "not built" and gets no rebuild command. ``days_from``/``days_to`` (inclusive) limit
    what is reported; the passes still read everything, so that a row which moved in or
    out of the range is judged on both of its days.
    """
    if days_from and days_to and days_from > days_to:
        raise VerifyError(f"--days-from {days_from} is after --days-to {days_to}")
    if source.url == warehouse.url:
        raise DatabaseError(
            f"the source and the warehouse are the same database ({redact(source.url)}); "
            "both have a table named orders, so they must differ"
        )
    wh = warehouse if _has_orders_table(warehouse) else None
    days, n_source, n_warehouse = compare_orders(source, wh, tz, chunk_size=chunk_size)

    def in_scope(day: str) -> bool:
        return ((days_from is None or day >= days_from.isoformat())
                and (days_to is None or day <= days_to.isoformat()))

    def buildable(day: str) -> bool:
        return ((partitions_start is None or day >= partitions_start.isoformat())
                and (today is None or day < today.isoformat()))

    on_disk = set(known_days(folder))
    warehouse_paid = {d: c.warehouse_paid for d, c in days.items()}
    files = check_files(folder, wh, tz, sorted(d for d in on_disk if in_scope(d)),
                        warehouse_paid)

    problems: list[Problem] = []
    all_loads: set[str] = set()
    all_rebuilds: set[str] = set()
    for counts in sorted(days.values(), key=lambda c: c.day):
        if counts.agrees or not in_scope(counts.day):
            continue
        # After the load, rebuild every day whose paid orders it changes, built or not
        # (what paid_orders_refresh_sensor does with days_touched). Rows only in the
        # warehouse need no load, and no rebuild can remove them.
        rebuild = {d for d in counts.rebuild_days if buildable(d)}
        all_loads |= counts.load_days
        all_rebuilds |= rebuild
        problems.append(Problem(counts.day, DIFFERS_FROM_SOURCE, _source_detail(counts),
                                True, tuple(repair_commands(counts.load_days, rebuild))))
    for check in files:
        if check.state == COMMITTED and check.matches_warehouse:
            continue
        if check.state == COMMITTED:
            kind, detail = FILE_DIFFERS, check.detail
        elif check.state == UNCOMMITTED:
            kind, detail = FILE_UNCOMMITTED, check.detail
        else:  # NOT_BUILT: the file went away while we looked
            kind, detail = FILE_NOT_BUILT, check.detail
        if not buildable(check.day):
            detail += f"; {_no_partition(check.day, today)}"
        fails = kind != FILE_NOT_BUILT or (require_all and buildable(check.day))
        problems.append(_file_problem(check.day, kind, detail, buildable(check.day),
                                      fails=fails))
        if fails and buildable(check.day):
            all_rebuilds.add(check.day)
    for day, counts in sorted(days.items()):
        if counts.warehouse_paid and day not in on_disk and in_scope(day):
            can = buildable(day)
            detail = (f"{counts.warehouse_paid} paid order(s) in the warehouse, no file yet"
                      + ("" if can else f"; {_no_partition(day, today)}"))
            problems.append(_file_problem(day, FILE_NOT_BUILT, detail, can,
                                          fails=require_all and can))
            if require_all and can:
                all_rebuilds.add(day)
    problems.sort(key=lambda p: (p.day, p.kind))
    return VerifyResult(
        timezone=str(getattr(tz, "key", tz)), today=today and today.isoformat(),
        partitions_start=partitions_start and partitions_start.isoformat(),
        days_from=days_from and days_from.isoformat(), days_to=days_to and days_to.isoformat(),
        require_all=require_all, source_rows=n_source, warehouse_rows=n_warehouse,
        days=tuple(c for d, c in sorted(days.items()) if in_scope(d)),
        files=tuple(files), problems=tuple(problems),
        repair=tuple(repair_commands(all_loads, all_rebuilds)),
    )


def _source_detail(c: DayCounts) -> str:
    parts = []
    if c.not_loaded:
        parts.append(f"{c.not_loaded} not loaded")
    if c.changed:
        parts.append(f"{c.changed} changed since the last load")
    if c.only_in_warehouse:
        parts.append(f"{c.only_in_warehouse} only in the warehouse (deleted from the source; "
                     "a load never deletes: remove them from the warehouse by hand)")
    elsewhere = sorted(c.load_days - {c.day})
    moved = f"; the source now puts them on {', '.join(elsewhere)}" if elsewhere else ""
    return (f"source {c.source_rows} rows, warehouse {c.warehouse_rows} rows: "
            f"{', '.join(parts)}{moved}")


def _file_problem(day: str, kind: str, detail: str, can_build: bool, *, fails: bool) -> Problem:
    repair = (rebuild_command(day, day),) if can_build else ()
    if kind == FILE_NOT_BUILT and not fails and can_build:
        detail += " (fails only with --require-all)"
    return Problem(day, kind, detail, fails, repair)


def _no_partition(day: str, today: date | None) -> str:
    if today is not None and day >= today.isoformat():
        return "the day is not over, so its partition does not exist yet"
    return "the day is before PARTITIONS_START_DATE, so it has no partition"


__all__ = [
    "DIFFERS_FROM_SOURCE", "FILE_DIFFERS", "FILE_NOT_BUILT", "FILE_UNCOMMITTED",
    "DayCounts", "FileCheck", "Problem", "VerifyError", "VerifyResult", "check_files",
    "compare_orders", "orders_range_command", "rebuild_command", "repair_commands", "runs",
    "verify",
]


# --- the horizon check behind the orders asset check ---------------------------------------


def reconcile_since(source: Engine, warehouse: Engine, tz: tzinfo, since: datetime, *,
                    chunk_size: int = DEFAULT_CHUNK) -> dict[str, DayCounts]:
    """Per-day count and checksum of both sides, for rows stamped at or after ``since``.

    Cheap enough for every load (both reads use the ``updated_at`` index), it finds what
    the lookback window missed: a source day whose rows the warehouse does not have, or
    has in another version. A row that moved from an older day shows on its new day.
    """
    days: dict[str, DayCounts] = {}

    def at(day: str) -> DayCounts:
        return days.setdefault(day, DayCounts(day))

    try:
        src = inspect_source(source)
        for chunk in read_window(source, src, tz, since, None, chunk_size):
            for order in chunk:
                _add_source(at(order.day(tz).isoformat()), order.stored, order.is_paid)
    except InvalidRowError as exc:
        raise VerifyError(f"cannot reconcile: {exc}") from None
    if _has_orders_table(warehouse):
        o = orders.c
        query = (sa.select(o.order_id, o.status, o.amount, o.updated_at)
                 .where(o.updated_at >= canonical(since)))
        try:
            with warehouse.connect() as conn:
                for row in conn.execute(query):
                    day = from_canonical(row[3]).astimezone(tz).date().isoformat()
                    _add_warehouse(at(day), row)
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
            raise connect_error(exc, warehouse, "WAREHOUSE_DATABASE_URL") from None
    return dict(sorted(days.items()))


def differing_days(days: dict[str, DayCounts]) -> list[str]:
    """The days whose count or checksum differ between source and warehouse."""
    return [d for d, c in days.items()
            if (c.source_rows, c.source_checksum) != (c.warehouse_rows, c.warehouse_checksum)]
