"""Putting the parts together: the full reconciliation of ``pipeline-assets verify``, for
one declared table (``orders`` unless ``spec`` says otherwise) and each of its daily files."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, tzinfo
from pathlib import Path

from sqlalchemy.engine import Engine

from ..daily_files import COMMITTED, UNCOMMITTED, Store, known_days, open_store
from ..db.engines import has_table, require_distinct
from ..errors import VerifyError
from ..source.scan import SCAN_BATCH
from ..table.spec import DailyFiles, TableSpec
from ..warehouse.evolve import Gap, days_to_fill, open_gaps
from .compare import compare_rows, deletes_to_allow
from .counts import DayCounts
from .files import FileCheck, check_files
from .report import (
    DIFFERS_FROM_SOURCE,
    FILE_DIFFERS,
    FILE_NOT_BUILT,
    FILE_STALE,
    FILE_UNCOMMITTED,
    LACKS_COLUMN,
    Problem,
    Repairs,
    VerifyResult,
    file_problem,
    no_partition,
    source_detail,
)

Folder = str | Path | Store


def verify(
    source: Engine,
    warehouse: Engine,
    folder: Folder | Mapping[str, Folder],
    *,
    tz: tzinfo,
    today: date | None = None,
    partitions_start: date | None = None,
    days_from: date | None = None,
    days_to: date | None = None,
    require_all: bool = False,
    chunk_size: int = SCAN_BATCH,
    max_delete_share: float = 0.5,
    spec: TableSpec,
    module: str | None = None,
) -> VerifyResult:
    """Reconcile source, warehouse and day files of ``spec``; see the package docstring.

    ``folder``: where the day files are, a folder (or object-store URL, or store) for a
    table with one daily file, or ``{file name: folder}``. ``module``: the code location
    the printed commands name (None: the commands' default).

    ``today`` (from the caller's clock) and ``partitions_start`` bound the days that have
    a partition to rebuild: a day not over yet, or before the first partition, is never
    "not built" and gets no rebuild command. ``days_from``/``days_to`` (inclusive) limit
    what is reported; the passes still read everything, so that a row which moved in or
    out of the range is judged on both of its days.
    """
    if days_from and days_to and days_from > days_to:
        raise VerifyError(f"--days-from {days_from} is after --days-to {days_to}")
    require_distinct(source, warehouse)
    wh = warehouse if has_table(warehouse, spec.name, "WAREHOUSE_DATABASE_URL") else None
    to_fill = open_gaps(wh, spec) if wh is not None else []
    days, n_source, n_warehouse = compare_rows(
        source, wh, tz, batch_rows=chunk_size, spec=spec, lacking={g.column for g in to_fill}
    )
    scope = _Scope(today, partitions_start, days_from, days_to, require_all)
    repairs = Repairs(spec, module)
    differing, loads, rebuilds, allow = _source_problems(
        days, to_fill, scope, max_delete_share, repairs
    )
    files, file_problems, file_rebuilds = _daily_files(folder, wh, tz, days, scope, repairs)
    problems = sorted([*differing, *file_problems], key=lambda p: (p.day, p.kind, p.subject or ""))
    return VerifyResult(
        timezone=str(getattr(tz, "key", tz)),
        today=today and today.isoformat(),
        partitions_start=partitions_start and partitions_start.isoformat(),
        days_from=days_from and days_from.isoformat(),
        days_to=days_to and days_to.isoformat(),
        require_all=require_all,
        source_rows=n_source,
        warehouse_rows=n_warehouse,
        days=tuple(c for d, c in sorted(days.items()) if scope.covers(d)),
        files=tuple(files),
        problems=tuple(problems),
        repair=tuple(repairs.commands(loads, rebuilds | file_rebuilds, allow)),
        spec=spec,
        to_fill=tuple(to_fill),
    )


def _source_problems(
    days: dict[str, DayCounts],
    to_fill: list[Gap],
    scope: _Scope,
    max_delete_share: float,
    repairs: Repairs,
) -> tuple[list[Problem], set[str], set[str], set[str]]:
    """The rows against the source: a problem per day that differs or lacks an added
    column, the days to load and to rebuild that repair them all, and the days whose
    load may delete (:func:`~.compare.deletes_to_allow`)."""
    allow, refused = deletes_to_allow(days.values(), max_delete_share, spec=repairs.spec)
    differing, loads, rebuilds = _differs_from_source(
        days, scope, allow, refused, max_delete_share, repairs
    )
    differing, fill_loads, fill_rebuilds = _to_fill(to_fill, days, differing, scope, repairs)
    return differing, loads | fill_loads, rebuilds | fill_rebuilds, allow


def _folder_of(folder: Folder | Mapping[str, Folder], spec: TableSpec, view: DailyFiles) -> Store:
    """The store of one daily file: ``folder`` itself, or its entry for the file."""
    if not isinstance(folder, Mapping):
        if len(spec.daily_files) > 1:
            raise VerifyError(
                f"{spec.name} has {len(spec.daily_files)} daily files: give "
                "the folder of each, by name"
            )
        return open_store(folder)  # a local folder or an object-store URL
    if view.name not in folder:
        raise VerifyError(f"no folder given for the day files of {view.name}")
    return open_store(folder[view.name])


def _daily_files(
    folder: Folder | Mapping[str, Folder],
    wh: Engine | None,
    tz: tzinfo,
    days: dict[str, DayCounts],
    scope: _Scope,
    repairs: Repairs,
) -> tuple[list[FileCheck], list[Problem], set[str]]:
    """Every daily file of the table: checks, problems and days to rebuild, together."""
    files, problems, rebuilds = [], [], set()
    for index, view in enumerate(repairs.spec.daily_files):
        checks, found, rebuilt = _daily_file(
            _folder_of(folder, repairs.spec, view), wh, tz, days, scope, repairs, index
        )
        files += checks
        problems += found
        rebuilds |= rebuilt
    return files, problems, rebuilds


def _daily_file(
    folder: Store,
    wh: Engine | None,
    tz: tzinfo,
    days: dict[str, DayCounts],
    scope: _Scope,
    repairs: Repairs,
    index: int,
) -> tuple[list[FileCheck], list[Problem], set[str]]:
    """One daily file: its checks, its problems (bad files, days not built) and the days
    to rebuild."""
    spec = repairs.spec
    view = spec.daily_files[index]
    on_disk = set(known_days(folder))
    in_view = {d: c.in_file(spec, index) for d, c in days.items()}
    files = check_files(
        folder,
        wh,
        tz,
        sorted(d for d in on_disk if scope.covers(d)),
        in_view,
        spec=spec,
        files=view,
    )
    bad_files, file_rebuilds = _file_problems(files, scope, repairs, view)
    unbuilt, unbuilt_rebuilds = _not_built(in_view, on_disk, scope, repairs, view)
    return files, [*bad_files, *unbuilt], file_rebuilds | unbuilt_rebuilds


@dataclass(frozen=True)
class _Scope:
    """The days reported (``days_from``…``days_to``) and those with a partition to build."""

    today: date | None
    partitions_start: date | None
    days_from: date | None
    days_to: date | None
    require_all: bool

    def covers(self, day: str) -> bool:
        return (self.days_from is None or day >= self.days_from.isoformat()) and (
            self.days_to is None or day <= self.days_to.isoformat()
        )

    def buildable(self, day: str) -> bool:
        return (self.partitions_start is None or day >= self.partitions_start.isoformat()) and (
            self.today is None or day < self.today.isoformat()
        )


def _differs_from_source(
    days: dict[str, DayCounts],
    scope: _Scope,
    allow: set[str],
    refused: str,
    max_delete_share: float,
    repairs: Repairs,
) -> tuple[list[Problem], set[str], set[str]]:
    """Rows not loaded, changed or deleted from the source: a problem per day, and the
    days to load and to rebuild that repair them all."""
    problems: list[Problem] = []
    all_loads: set[str] = set()
    all_rebuilds: set[str] = set()
    for counts in sorted(days.values(), key=lambda c: c.day):
        if counts.agrees or not scope.covers(counts.day):
            continue
        # After the load, rebuild every day whose daily files it changes, built or not
        # (what the refresh sensor does with days_touched). Rows only in the warehouse
        # are deleted by a range load of their day, like any other difference.
        rebuild = {d for d in counts.rebuild_days if scope.buildable(d)}
        all_loads |= counts.load_days
        all_rebuilds |= rebuild
        detail = source_detail(counts, repairs.spec)
        if counts.only_in_warehouse and refused:
            detail += f"; {refused}"
        elif counts.day in allow:
            detail += (
                f"; that is more than MAX_DELETE_SHARE={max_delete_share:g} of the "
                "day, so its command allows the deletes"
            )
        subject = None if repairs.spec.legacy else repairs.spec.name
        problems.append(
            Problem(
                counts.day,
                DIFFERS_FROM_SOURCE,
                detail,
                True,
                tuple(repairs.commands(counts.load_days, rebuild, allow)),
                subject,
            )
        )
    return problems, all_loads, all_rebuilds


def _to_fill(
    to_fill: list[Gap],
    days: dict[str, DayCounts],
    differing: list[Problem],
    scope: _Scope,
    repairs: Repairs,
) -> tuple[list[Problem], set[str], set[str]]:
    """The days whose rows were stored before a column was declared and not read whole
    since (core/warehouse/evolve.py): the day's problem names the columns (a problem of their own
    when the rows agree otherwise), and a range load of the day fills them; then its
    files are rebuilt, when a daily file holds one of the columns."""
    spec = repairs.spec
    by_day = {p.day: p for p in differing}
    problems = [p for p in differing]
    loads: set[str] = set()
    rebuilds: set[str] = set()
    for day, columns in days_to_fill(to_fill).items():
        if not scope.covers(day):
            continue
        counts = days.get(day, DayCounts(day))
        named = "; ".join(_lacks(gap, counts) for gap in to_fill if gap.column in columns)
        filed = any(c in f.columns for f in spec.daily_files for c in columns)
        rebuild = {day} if filed and scope.buildable(day) else set()
        loads.add(day)
        rebuilds |= rebuild
        held = by_day.get(day)
        if held is not None:  # the same day differs: one problem, which names the columns
            problems[problems.index(held)] = replace(held, detail=f"{held.detail}; {named}")
            continue
        problems.append(
            Problem(
                day,
                LACKS_COLUMN,
                named,
                True,
                tuple(repairs.commands({day}, rebuild)),
                None if spec.legacy else spec.name,
            )
        )
    return problems, loads, rebuilds


def _lacks(gap: Gap, counts: DayCounts) -> str:
    """What one day lacks of one added column, in words."""
    held = counts.lacking.get(gap.column, 0)
    return (
        f"its rows were stored before column {gap.column} was declared (batch "
        f"{gap.added_batch_id}, {gap.added_at[:10]}) and not read since"
        + (f": {held} of them hold no {gap.column} though the source has one" if held else "")
        + "; a range load of the day fills them"
    )


def _file_problems(
    files: list[FileCheck], scope: _Scope, repairs: Repairs, view: DailyFiles
) -> tuple[list[Problem], set[str]]:
    """Day files that differ from the warehouse, are uncommitted, or went away while
    verify looked: a problem each, and the days to rebuild."""
    problems: list[Problem] = []
    rebuilds: set[str] = set()
    for check in files:
        if check.state == COMMITTED and check.matches_warehouse:
            continue
        if check.stale:
            kind, detail = FILE_STALE, check.detail
        elif check.state == COMMITTED:
            kind, detail = FILE_DIFFERS, check.detail
        elif check.state == UNCOMMITTED:
            kind, detail = FILE_UNCOMMITTED, check.detail
        else:  # NOT_BUILT: the file went away while we looked
            kind, detail = FILE_NOT_BUILT, check.detail
        if not scope.buildable(check.day):
            detail += f"; {no_partition(check.day, scope.today)}"
        fails = kind != FILE_NOT_BUILT or (scope.require_all and scope.buildable(check.day))
        problems.append(
            file_problem(
                check.day,
                kind,
                detail,
                scope.buildable(check.day),
                fails=fails,
                repairs=repairs,
                files=view,
            )
        )
        if fails and scope.buildable(check.day):
            rebuilds.add(check.day)
    return problems, rebuilds


def _not_built(
    in_view: dict[str, int], on_disk: set[str], scope: _Scope, repairs: Repairs, view: DailyFiles
) -> tuple[list[Problem], set[str]]:
    """Days with rows of the file's view in the warehouse and no file: a problem each
    (failing only with ``require_all``), and the days to rebuild then."""
    problems: list[Problem] = []
    rebuilds: set[str] = set()
    held = repairs.spec.say("file_rows_counted", file=view.name)
    for day, rows in sorted(in_view.items()):
        if rows and day not in on_disk and scope.covers(day):
            can = scope.buildable(day)
            detail = f"{rows} {held} in the warehouse, no file yet" + (
                "" if can else f"; {no_partition(day, scope.today)}"
            )
            problems.append(
                file_problem(
                    day,
                    FILE_NOT_BUILT,
                    detail,
                    can,
                    fails=scope.require_all and can,
                    repairs=repairs,
                    files=view,
                )
            )
            if scope.require_all and can:
                rebuilds.add(day)
    return problems, rebuilds
