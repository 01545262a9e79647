"""Putting the parts together: the full reconciliation of ``pipeline-assets verify``."""

from __future__ import annotations

from datetime import date, tzinfo
from pathlib import Path

from sqlalchemy.engine import Engine

from ..commands import repair_commands
from ..daily_files import COMMITTED, UNCOMMITTED, Store, known_days, open_store
from ..db import has_table, require_distinct
from ..source import SCAN_BATCH
from .compare import compare_orders, deletes_to_allow
from .files import check_files
from .report import (
    DIFFERS_FROM_SOURCE,
    FILE_DIFFERS,
    FILE_NOT_BUILT,
    FILE_UNCOMMITTED,
    Problem,
    VerifyResult,
    file_problem,
    no_partition,
    source_detail,
)
from .sides import VerifyError


def _has_orders_table(engine: Engine) -> bool:
    return has_table(engine, "orders", "WAREHOUSE_DATABASE_URL")


def verify(source: Engine, warehouse: Engine, folder: str | Path | Store, *, tz: tzinfo,
           today: date | None = None, partitions_start: date | None = None,
           days_from: date | None = None, days_to: date | None = None,
           require_all: bool = False, chunk_size: int = SCAN_BATCH,
           max_delete_share: float = 0.5) -> VerifyResult:
    """Reconcile source, warehouse and day files; see the package docstring.

    ``today`` (from the caller's clock) and ``partitions_start`` bound the days that have
    a partition to rebuild: a day not over yet, or before the first partition, is never
    "not built" and gets no rebuild command. ``days_from``/``days_to`` (inclusive) limit
    what is reported; the passes still read everything, so that a row which moved in or
    out of the range is judged on both of its days.
    """
    if days_from and days_to and days_from > days_to:
        raise VerifyError(f"--days-from {days_from} is after --days-to {days_to}")
    require_distinct(source, warehouse)
    wh = warehouse if _has_orders_table(warehouse) else None
    days, n_source, n_warehouse = compare_orders(source, wh, tz, batch_rows=chunk_size)

    def in_scope(day: str) -> bool:
        return ((days_from is None or day >= days_from.isoformat())
                and (days_to is None or day <= days_to.isoformat()))

    def buildable(day: str) -> bool:
        return ((partitions_start is None or day >= partitions_start.isoformat())
                and (today is None or day < today.isoformat()))

    folder = open_store(folder)  # a local folder or an object-store URL
    on_disk = set(known_days(folder))
    warehouse_paid = {d: c.warehouse_paid for d, c in days.items()}
    files = check_files(folder, wh, tz, sorted(d for d in on_disk if in_scope(d)),
                        warehouse_paid)

    problems: list[Problem] = []
    all_loads: set[str] = set()
    all_rebuilds: set[str] = set()
    allow, refused = deletes_to_allow(days.values(), max_delete_share)
    for counts in sorted(days.values(), key=lambda c: c.day):
        if counts.agrees or not in_scope(counts.day):
            continue
        # After the load, rebuild every day whose paid orders it changes, built or not
        # (what paid_orders_refresh_sensor does with days_touched). Rows only in the
        # warehouse are deleted by a range load of their day, like any other difference.
        rebuild = {d for d in counts.rebuild_days if buildable(d)}
        all_loads |= counts.load_days
        all_rebuilds |= rebuild
        detail = source_detail(counts)
        if counts.only_in_warehouse and refused:
            detail += f"; {refused}"
        elif counts.day in allow:
            detail += (f"; that is more than MAX_DELETE_SHARE={max_delete_share:g} of the "
                       "day, so its command allows the deletes")
        problems.append(Problem(counts.day, DIFFERS_FROM_SOURCE, detail, True,
                                tuple(repair_commands(counts.load_days, rebuild, allow))))
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
            detail += f"; {no_partition(check.day, today)}"
        fails = kind != FILE_NOT_BUILT or (require_all and buildable(check.day))
        problems.append(file_problem(check.day, kind, detail, buildable(check.day),
                                     fails=fails))
        if fails and buildable(check.day):
            all_rebuilds.add(check.day)
    for day, counts in sorted(days.items()):
        if counts.warehouse_paid and day not in on_disk and in_scope(day):
            can = buildable(day)
            detail = (f"{counts.warehouse_paid} paid order(s) in the warehouse, no file yet"
                      + ("" if can else f"; {no_partition(day, today)}"))
            problems.append(file_problem(day, FILE_NOT_BUILT, detail, can,
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
        repair=tuple(repair_commands(all_loads, all_rebuilds, allow)),
    )
