"""Day files vs the warehouse: each committed file must hold the warehouse's paid orders.

The statuses come from :func:`~pipeline_assets.core.daily_files.settled_statuses` (a
writer is waited for instead of being called torn: under the shared lock on local disk,
by polling the head, briefly, on an object store); the expected rows
from :func:`~pipeline_assets.core.paid.paid_orders_by_day`, one range query per span of
at most :data:`FILE_BATCH_DAYS` days, so memory stays bounded on a year of files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, tzinfo
from pathlib import Path

from sqlalchemy.engine import Engine

from ..daily_files import (
    COMMITTED,
    DayStatus,
    Store,
    serialize_day,
    settled_statuses,
    sha256_hex,
)
from ..paid import paid_orders_by_day

FILE_BATCH_DAYS = 31  # days per paid_orders_by_day query when comparing files
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


def check_files(folder: str | Path | Store, warehouse: Engine | None, tz: tzinfo,
                days: Sequence[str], warehouse_paid: dict[str, int]) -> list[FileCheck]:
    """Status of each day file in ``days``, and for committed ones: rows == warehouse rows?"""
    statuses = settled_statuses(folder, days, wait_for_writer=WRITER_WAIT_SECONDS)
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
