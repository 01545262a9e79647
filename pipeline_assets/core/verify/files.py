"""Day files vs the warehouse: each committed file must hold the warehouse's paid orders.

The statuses come from :func:`~pipeline_assets.core.daily_files.settled_statuses` (a
writer is waited for instead of being called torn: under the shared lock on local disk,
by polling the head, briefly, on an object store). What each file should hold is the
sha256 of the bytes the warehouse's paid orders of its day would be written as
(:class:`~pipeline_assets.core.daily_files.DayFileHashes`), computed in one ordered read
of the warehouse over the days' ranges, streamed: a hash per day is all it keeps. Only a
day whose hash differs is read again row by row
(:func:`~pipeline_assets.core.paid.paid_orders_by_day`), to say how its file differs, or
that only the byte layout of an older writer does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta, tzinfo
from pathlib import Path

from sqlalchemy.engine import Engine

from ..daily_files import (
    COMMITTED,
    DayFileHashes,
    DayStatus,
    Store,
    serialize_day,
    settled_statuses,
    sha256_hex,
)
from ..days import runs
from ..paid import paid_orders_by_day
from ..times import EPOCH, day_start, parse_day
from .sides import warehouse_rows

# object stores: how long a day is re-checked while the head says a run is writing (a
# run killed mid-write leaves it so until the next run: verify does not wait long)
WRITER_WAIT_SECONDS = 5.0


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


def check_files(folder: str | Path | Store, warehouse: Engine | None, tz: tzinfo,
                days: Sequence[str], warehouse_paid: dict[str, int]) -> list[FileCheck]:
    """Status of each day file in ``days``, and for committed ones: rows == warehouse rows?"""
    statuses = settled_statuses(folder, days, wait_for_writer=WRITER_WAIT_SECONDS)
    committed = [s.day for s in statuses if s.state == COMMITTED]
    hashes = file_hashes(warehouse, tz, committed) if warehouse is not None else {}
    out = []
    for status in statuses:
        paid = warehouse_paid.get(status.day, 0)
        if status.state != COMMITTED:
            out.append(FileCheck(status.day, status.state, None, None, paid, status.reason))
            continue
        rows, sha = hashes.get(status.day, (None, None))
        if sha == status.sha256:
            out.append(FileCheck(status.day, status.state, True, rows, paid))
            continue
        expected = [] if warehouse is None else \
            paid_orders_by_day(warehouse, [status.day], tz)[status.day]
        out.append(_compare_file(status, expected, paid))
    return out


def file_hashes(warehouse: Engine, tz: tzinfo, days: Sequence[str]
                ) -> dict[str, tuple[int, str]]:
    """``{day: (paid rows, sha256 of its file's bytes)}`` from the warehouse, for ``days``
    (a day it cannot vouch for is left out), in one ordered read of their ranges."""
    numbers = {(parse_day(day) - EPOCH).days: day for day in days}
    hashes = DayFileHashes(numbers, tz)
    spans = [(day_start(parse_day(first), tz), day_start(parse_day(last) + timedelta(1), tz))
             for first, last in runs(days)]
    for table in warehouse_rows(warehouse, tz, spans, ordered=True):
        hashes.add(table)
    return {numbers[number]: found for number, found in hashes.result().items()}


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
