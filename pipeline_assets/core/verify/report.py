"""What ``verify`` reports: the problems found, each with its repair, as text or JSON.

The repairs are the commands :mod:`pipeline_assets.core.commands` builds; :class:`Repairs`
is the one place here that calls it, for a table (``spec``) and a code location
(``module``), so that a new argument of those commands is passed in one place.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date

from ..commands import rebuild_command, repair_commands
from ..daily_files import COMMITTED
from ..table.spec import DailyFiles, TableSpec
from .counts import DayCounts
from .files import FileCheck

# kinds of problem, as shown in the output and the JSON
DIFFERS_FROM_SOURCE = "differs from source"
FILE_UNCOMMITTED = "uncommitted"
FILE_DIFFERS = "file differs from warehouse"
FILE_NOT_BUILT = "not built"
FILE_STALE = "written with another declaration"  # committed in a shape no longer declared
LACKS_COLUMN = "lacks a column"  # rows stored before a column was declared, not read since


@dataclass(frozen=True)
class Repairs:
    """The commands that repair ``spec``'s problems: range loads of its asset, rebuilds of
    its daily files, for the code location ``module`` (None: the commands' default)."""

    spec: TableSpec
    module: str | None = None

    def _named(self) -> dict:
        named: dict = {"spec": self.spec}
        if self.module is not None:
            named["module"] = self.module
        return named

    def commands(
        self, loads: Iterable[str], rebuilds: Iterable[str], allow: Iterable[str] = ()
    ) -> list[str]:
        """Loads first, then the rebuilds that read them (one per range of days)."""
        return repair_commands(loads, rebuilds, allow, **self._named())

    def rebuild(self, first: str, last: str | None = None, files: DailyFiles | None = None) -> str:
        """The rebuild of days ``first``…``last`` (of ``files`` alone when the table has
        several daily files)."""
        named = self._named()
        if files is not None and len(self.spec.daily_files) > 1:
            named["files"] = files.name
        return rebuild_command(first, last, **named)


@dataclass(frozen=True)
class Problem:
    """A day that differs, is uncommitted or is not built, with the commands that repair it.

    ``subject`` names what has the problem for a table other than ``orders``: the table
    (differs from source) or the daily file; None for ``orders``, whose report reads as
    it always has."""

    day: str
    kind: str
    detail: str
    fails: bool
    repair: tuple[str, ...]
    subject: str | None = None

    def to_json(self) -> dict:
        return {
            "day": self.day,
            "kind": self.kind,
            "fails": self.fails,
            "detail": self.detail,
            "repair": list(self.repair),
            **({} if self.subject is None else {"subject": self.subject}),
        }

    def line(self) -> str:
        subject = "" if self.subject is None else f"{self.subject} "
        return f"{'FAIL' if self.fails else 'INFO'} {self.day} {subject}{self.kind}: {self.detail}"


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
    spec: TableSpec = field(compare=False, repr=False)
    to_fill: tuple = ()  # the open gaps of columns added since rows were stored (evolve.Gap)

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
        table = {} if self.spec.legacy else {"table": self.spec.name}  # orders' never did
        return {
            **table,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "require_all": self.require_all,
            "timezone": self.timezone,
            "today": self.today,
            "partitions_start": self.partitions_start,
            "days_from": self.days_from,
            "days_to": self.days_to,
            "source_rows": self.source_rows,
            "warehouse_rows": self.warehouse_rows,
            "failing_days": self.failing_days,
            "problems": [p.to_json() for p in self.problems],
            "repair": list(self.repair),
            "days": [d.to_json(self.spec) for d in self.days],
            "files": [f.to_json() for f in self.files],
            **({"columns_to_fill": [g.to_json() for g in self.to_fill]} if self.to_fill else {}),
        }

    def lines(self) -> list[str]:
        """The human-readable report: a summary, one block per problem, the repair plan."""
        scope = ""
        if self.days_from or self.days_to:
            scope = f", days {self.days_from or 'first'}…{self.days_to or 'last'}"
        differing = sum(1 for d in self.days if not d.agrees)
        committed = sum(1 for f in self.files if f.state == COMMITTED)
        equal = sum(1 for f in self.files if f.matches_warehouse)
        table = self.spec.say("report_prefix")
        out = [
            f"{table}source vs warehouse: {len(self.days)} days, {self.source_rows} source rows, "
            f"{self.warehouse_rows} warehouse rows, {differing} day(s) differ "
            f"(time zone {self.timezone}{scope})",
            f"{table}day files: {len(self.files)} days with a file, {committed} committed, "
            f"{equal} equal to the warehouse; "
            f"{sum(1 for p in self.problems if p.kind == FILE_NOT_BUILT)} day(s) not built",
        ]
        for p in self.problems:
            out.append(p.line())
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


def source_detail(c: DayCounts, spec: TableSpec) -> str:
    """What differs between source and warehouse on one day, in words."""
    parts = []
    if c.not_loaded:
        parts.append(f"{c.not_loaded} not loaded")
    if c.changed:
        parts.append(f"{c.changed} changed since the last load")
    if c.only_in_warehouse:
        parts.append(
            f"{c.only_in_warehouse} only in the warehouse: the source no longer has "
            f"them ({deleted_ids(c, spec)}); a range load of the day deletes them"
        )
    elsewhere = sorted(c.load_days - {c.day})
    moved = f"; the source now puts them on {', '.join(elsewhere)}" if elsewhere else ""
    return (
        f"source {c.source_rows} rows, warehouse {c.warehouse_rows} rows: {', '.join(parts)}{moved}"
    )


def deleted_ids(c: DayCounts, spec: TableSpec) -> str:
    """``orders 101, 102 …`` / ``payments (payment_id=7, attempt=2) …``: the first keys of
    a day's rows the source no longer has."""
    return spec.rows_named(c.deleted_ids, c.only_in_warehouse)


def file_problem(
    day: str,
    kind: str,
    detail: str,
    can_build: bool,
    *,
    fails: bool,
    repairs: Repairs,
    files: DailyFiles | None = None,
) -> Problem:
    """A problem with a day file (of ``files``: the table's first file set unless told);
    its repair is a rebuild when the partition exists."""
    repair = (repairs.rebuild(day, day, files),) if can_build else ()
    if kind == FILE_NOT_BUILT and not fails and can_build:
        detail += " (fails only with --require-all)"
    subject = None if repairs.spec.legacy or files is None else files.name
    return Problem(day, kind, detail, fails, repair, subject)


def no_partition(day: str, today: date | None) -> str:
    """Why a day has no partition to rebuild."""
    if today is not None and day >= today.isoformat():
        return "the day is not over, so its partition does not exist yet"
    return "the day is before PARTITIONS_START_DATE, so it has no partition"
