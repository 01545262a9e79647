"""What ``verify`` reports: the problems found, each with its repair, as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from ..commands import rebuild_command
from ..daily_files import COMMITTED
from .compare import DayCounts
from .files import FileCheck

# kinds of problem, as shown in the output and the JSON
DIFFERS_FROM_SOURCE = "differs from source"
FILE_UNCOMMITTED = "uncommitted"
FILE_DIFFERS = "file differs from warehouse"
FILE_NOT_BUILT = "not built"


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


def source_detail(c: DayCounts) -> str:
    """What differs between source and warehouse on one day, in words."""
    parts = []
    if c.not_loaded:
        parts.append(f"{c.not_loaded} not loaded")
    if c.changed:
        parts.append(f"{c.changed} changed since the last load")
    if c.only_in_warehouse:
        parts.append(f"{c.only_in_warehouse} only in the warehouse: the source no longer has "
                     f"them ({deleted_ids(c)}); a range load of the day deletes them")
    elsewhere = sorted(c.load_days - {c.day})
    moved = f"; the source now puts them on {', '.join(elsewhere)}" if elsewhere else ""
    return (f"source {c.source_rows} rows, warehouse {c.warehouse_rows} rows: "
            f"{', '.join(parts)}{moved}")


def deleted_ids(c: DayCounts) -> str:
    """``orders 101, 102 …``: the first ids of a day's orders the source no longer has."""
    more = " …" if c.only_in_warehouse > len(c.deleted_ids) else ""
    return "order" + ("s " if c.only_in_warehouse > 1 else " ") + \
        ", ".join(map(str, c.deleted_ids)) + more


def file_problem(day: str, kind: str, detail: str, can_build: bool, *, fails: bool) -> Problem:
    """A problem with a day file; its repair is a rebuild when the partition exists."""
    repair = (rebuild_command(day, day),) if can_build else ()
    if kind == FILE_NOT_BUILT and not fails and can_build:
        detail += " (fails only with --require-all)"
    return Problem(day, kind, detail, fails, repair)


def no_partition(day: str, today: date | None) -> str:
    """Why a day has no partition to rebuild."""
    if today is not None and day >= today.isoformat():
        return "the day is not over, so its partition does not exist yet"
    return "the day is before PARTITIONS_START_DATE, so it has no partition"
