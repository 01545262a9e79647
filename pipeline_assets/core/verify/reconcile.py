"""Putting the parts together: the full reconciliation of ``pipeline-assets verify``, and
the cheap horizon check behind the ``orders_match_source`` asset check."""

from __future__ import annotations

from datetime import date, datetime, tzinfo
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..commands import repair_commands
from ..daily_files import COMMITTED, UNCOMMITTED, Store, known_days, open_store
from ..db import guard, has_table, orders, require_distinct
from ..rows import PAID, InvalidRowError
from ..source import DEFAULT_CHUNK, inspect_source
from ..times import canonical, from_canonical
from .files import check_files
from .merge import DayCounts, VerifyError, add_source, add_warehouse, compare_orders
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


def _has_orders_table(engine: Engine) -> bool:
    return has_table(engine, "orders", "WAREHOUSE_DATABASE_URL")


def verify(source: Engine, warehouse: Engine, folder: str | Path | Store, *, tz: tzinfo,
           today: date | None = None, partitions_start: date | None = None,
           days_from: date | None = None, days_to: date | None = None,
           require_all: bool = False, chunk_size: int = DEFAULT_CHUNK) -> VerifyResult:
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
    days, n_source, n_warehouse = compare_orders(source, wh, tz, chunk_size=chunk_size)

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
    for counts in sorted(days.values(), key=lambda c: c.day):
        if counts.agrees or not in_scope(counts.day):
            continue
        # After the load, rebuild every day whose paid orders it changes, built or not
        # (what paid_orders_refresh_sensor does with days_touched). Rows only in the
        # warehouse need no load, and no rebuild can remove them.
        rebuild = {d for d in counts.rebuild_days if buildable(d)}
        all_loads |= counts.load_days
        all_rebuilds |= rebuild
        problems.append(Problem(counts.day, DIFFERS_FROM_SOURCE, source_detail(counts),
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
        repair=tuple(repair_commands(all_loads, all_rebuilds)),
    )


def reconcile_since(source: Engine, warehouse: Engine, tz: tzinfo, since: datetime, *,
                    until: datetime | None = None,
                    chunk_size: int = DEFAULT_CHUNK) -> dict[str, DayCounts]:
    """Per-day count and checksum of both sides, for rows stamped at or after ``since``
    (and before ``until``, when given).

    Cheap enough for every load (both reads use the ``updated_at`` index), it finds what
    the lookback window missed: a source day whose rows the warehouse does not have, or
    has in another version. A row that moved from an older day shows on its new day.
    """
    days: dict[str, DayCounts] = {}

    def at(day: str) -> DayCounts:
        return days.setdefault(day, DayCounts(day))

    # The source through the load's own columnar scan (validated and normalized in
    # batches, one row per order as the load stores it); only the checksum is per row.
    from ..columnar import day_text
    from ..load import scan_orders

    try:
        src = inspect_source(source)
        for rows, _ in scan_orders(source, src, tz, since, until, chunk_size):
            names = {n: day_text(n) for n in set(rows["day"].to_pylist())}
            for n, *stored in zip(*(rows[c].to_pylist() for c in
                                    ("day", "order_id", "status", "amount", "updated_at")),
                                  strict=True):
                add_source(at(names[n]), tuple(stored), stored[1] == PAID)
    except InvalidRowError as exc:
        raise VerifyError(f"cannot reconcile: {exc}") from None
    if _has_orders_table(warehouse):
        o = orders.c
        query = (sa.select(o.order_id, o.status, o.amount, o.updated_at)
                 .where(o.updated_at >= canonical(since)))
        if until is not None:
            query = query.where(o.updated_at < canonical(until))
        with guard(warehouse, "WAREHOUSE_DATABASE_URL"):
            with warehouse.connect() as conn:
                for row in conn.execute(query):
                    day = from_canonical(row[3]).astimezone(tz).date().isoformat()
                    add_warehouse(at(day), row)
    return dict(sorted(days.items()))


def differing_days(days: dict[str, DayCounts]) -> list[str]:
    """The days whose count or checksum differ between source and warehouse."""
    return [d for d, c in days.items()
            if (c.source_rows, c.source_checksum) != (c.warehouse_rows, c.warehouse_checksum)]
