"""Day files vs the warehouse: each committed file must hold the warehouse's rows of its
view (for ``orders``' ``paid_orders``: the paid orders; for any declared table, the rows of
one of its :class:`~pipeline_assets.core.table.spec.DailyFiles`, ``files``).

The statuses come from :func:`~pipeline_assets.core.daily_files.settled_statuses` (a
writer is waited for instead of being called torn: under the shared lock on local disk,
by polling the head, briefly, on an object store). What each file should hold is the
sha256 of the bytes the warehouse's paid orders of its day would be written as
(:class:`~pipeline_assets.core.daily_files.DayFileHashes`), computed in one ordered read
of the warehouse over the days' ranges, streamed: a hash per day is all it keeps. Only a
day whose hash differs is read again row by row
(:func:`~pipeline_assets.core.daily_files.views.day_rows`), to say how its file differs, or that
only the byte layout of an older writer does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path

import pyarrow as pa
from sqlalchemy.engine import Engine

from ..daily_files import (
    COMMITTED,
    DayFileHashes,
    DayStatus,
    Store,
    serialize_day,
    settled_statuses,
    sha256_hex,
    shape_of,
)
from ..daily_files.parquet import parquet_bytes, parquet_table, read_parquet, view_tables
from ..daily_files.serialize import file_of
from ..daily_files.views import day_rows
from ..days import spans
from ..errors import DayFilesError
from ..table.spec import DailyFiles, TableSpec
from ..times import EPOCH, parse_day
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
    warehouse_paid: int  # the warehouse rows of the file's view on the day
    detail: str = ""
    file: str | None = None  # which daily file (None: orders' own, which its JSON never named)
    stale: bool = False  # committed, but written with another shape than declared now

    def to_json(self) -> dict:
        return {
            "day": self.day,
            "state": self.state,
            "matches_warehouse": self.matches_warehouse,
            "file_rows": self.file_rows,
            "warehouse_paid": self.warehouse_paid,
            "detail": self.detail,
            **({} if self.file is None else {"file": self.file}),
            **({"stale": True} if self.stale else {}),
        }


def check_files(
    folder: str | Path | Store,
    warehouse: Engine | None,
    tz: tzinfo,
    days: Sequence[str],
    warehouse_paid: dict[str, int],
    *,
    spec: TableSpec,
    files: DailyFiles | None = None,
) -> list[FileCheck]:
    """Status of each day file of ``files`` (default: ``spec``'s first daily file) in
    ``days``, and for committed ones: rows == warehouse rows? ``warehouse_paid``: the
    warehouse rows of the file's view per day."""
    files = files or spec.daily_files[0]
    named = None if spec.legacy and files == spec.daily_files[0] else files.name
    shape = shape_of(spec, files)
    statuses = settled_statuses(
        folder, days, wait_for_writer=WRITER_WAIT_SECONDS, expect=files.format
    )
    committed = [s.day for s in statuses if s.state == COMMITTED and not shape.stale(s)]
    hashes = (
        file_hashes(warehouse, tz, committed, spec=spec, files=files)
        if warehouse is not None
        else {}
    )
    out = []
    for status in statuses:
        paid = warehouse_paid.get(status.day, 0)
        if status.state != COMMITTED:
            out.append(FileCheck(status.day, status.state, None, None, paid, status.reason, named))
            continue
        if shape.stale(status):  # a rebuild writes the declared shape: nothing to compare
            out.append(
                FileCheck(
                    status.day,
                    status.state,
                    False,
                    status.rows,
                    paid,
                    shape.why(status),
                    named,
                    stale=True,
                )
            )
            continue
        rows, sha = hashes.get(status.day, (None, None))
        if sha == status.sha256:
            out.append(FileCheck(status.day, status.state, True, rows, paid, file=named))
            continue
        if files.format == "parquet":
            out.append(_compare_parquet(status, warehouse, tz, paid, spec, files, named))
            continue
        expected = (
            []
            if warehouse is None
            else day_rows(warehouse, [status.day], tz, spec, files)[status.day]
        )
        out.append(_compare_file(status, expected, paid, spec, files, named))
    return out


def file_hashes(
    warehouse: Engine,
    tz: tzinfo,
    days: Sequence[str],
    *,
    spec: TableSpec,
    files: DailyFiles | None = None,
) -> dict[str, tuple[int, str]]:
    """``{day: (rows, sha256 of its file's bytes)}`` from the warehouse, for ``days`` (a
    day it cannot vouch for is left out), in one ordered read of their ranges."""
    numbers = {(parse_day(day) - EPOCH).days: day for day in days}
    files = file_of(spec, files)
    if files.format == "parquet":
        return _parquet_hashes(warehouse, tz, numbers, spec, files)
    hashes = DayFileHashes(numbers, tz, spec, files)
    for table in warehouse_rows(warehouse, tz, spans(days, tz), ordered=True, spec=spec):
        hashes.add(table)
    return {numbers[number]: found for number, found in hashes.result().items()}


def day_tables(
    warehouse: Engine, days: Sequence[str], tz: tzinfo, *, spec: TableSpec, files: DailyFiles
) -> dict[str, pa.Table]:
    """``{day: the warehouse's rows of the view on it}``, each an Arrow table of the file's
    columns as stored, from one ordered read of the days' ranges: what a Parquet day file
    is written from (:func:`~pipeline_assets.core.daily_files.parquet.parquet_table`), by
    the files asset and by ``verify`` alike."""
    numbers = {(parse_day(day) - EPOCH).days: day for day in days}
    tables = warehouse_rows(warehouse, tz, spans(list(numbers.values()), tz), spec=spec)
    return view_tables(tables, numbers, spec, files)


def _parquet_hashes(
    warehouse: Engine, tz: tzinfo, numbers: dict[int, str], spec: TableSpec, files: DailyFiles
) -> dict[str, tuple[int, str]]:
    """:func:`file_hashes` of a Parquet file set: each day's file built as the writer
    builds it, and hashed (a day the warehouse holds a value of that no file can hold is
    left out, for :func:`_compare_parquet` to word). :data:`HASHED_DAYS` days at a time:
    a year of days is never in memory at once."""
    out = {}
    days = sorted(numbers.values())
    for at in range(0, len(days), HASHED_DAYS):
        some = days[at : at + HASHED_DAYS]
        for day, table in day_tables(warehouse, some, tz, spec=spec, files=files).items():
            try:
                data, rows = parquet_bytes(day, table, spec, files)
            except DayFilesError:
                continue
            out[day] = (rows, sha256_hex(data))
    return out


HASHED_DAYS = 31  # the days of Parquet files verify builds from one read of the warehouse


def _compare_parquet(
    status: DayStatus,
    warehouse: Engine | None,
    tz: tzinfo,
    paid: int,
    spec: TableSpec,
    files: DailyFiles,
    named: str | None,
) -> FileCheck:
    """A committed Parquet day whose bytes are not those the warehouse's rows give: its
    rows against the warehouse's, by key (the same rows written by another pyarrow match)."""

    def check(matches: bool, file_rows: int | None, detail: str = "") -> FileCheck:
        return FileCheck(status.day, status.state, matches, file_rows, paid, detail, named)

    try:
        stored = (
            day_tables(warehouse, [status.day], tz, spec=spec, files=files)[status.day]
            if warehouse is not None
            else []
        )
        want = parquet_table(status.day, stored, spec, files).to_pylist()
    except DayFilesError as exc:
        return check(False, status.rows, f"the warehouse's rows cannot be written: {exc}")
    try:
        have = read_parquet(status.data).to_pylist()
    except ValueError as exc:
        return check(False, None, str(exc))
    by_key = {tuple(r[k] for k in spec.primary_key): r for r in want}
    return _differences(
        {tuple(r.get(k) for k in spec.primary_key): r for r in have}, by_key, spec, files, check
    )


def _differences(have_by: dict, want_by: dict, spec, files, check) -> FileCheck:
    """How the rows of a committed file (``have_by``: by key) differ from the
    warehouse's (``want_by``)."""
    missing = sum(1 for k in want_by if k not in have_by)
    extra = sum(1 for k in have_by if k not in want_by)
    different = sum(1 for k in want_by if k in have_by and have_by[k] != want_by[k])
    if not (missing or extra or different):  # same rows, another writer's bytes
        return check(True, len(have_by))
    held = spec.say("file_rows_counted", file=files.name)
    gone = spec.say("not_in_file", file=files.name)
    return check(
        False,
        len(have_by),
        (
            f"the committed file has {len(have_by)} row(s), the warehouse {len(want_by)} "
            f"{held}: {missing} missing from the file, {extra} {gone} on this day, "
            f"{different} with other values"
        ),
    )


def _compare_file(
    status: DayStatus,
    rows: list[dict],
    paid: int,
    spec: TableSpec,
    files: DailyFiles,
    named: str | None,
) -> FileCheck:
    def check(matches: bool, file_rows: int | None, detail: str = "") -> FileCheck:
        return FileCheck(status.day, status.state, matches, file_rows, paid, detail, named)

    want = serialize_day(status.day, rows, spec, files)
    if sha256_hex(want) == status.sha256:
        return check(True, len(rows))
    have = _rows_by_key(status.data, spec)
    if have is None:
        return check(False, None, f"the committed file does not hold rows with {spec.say('a_key')}")
    # same rows in an older byte layout match
    return _differences(have, _rows_by_key(want, spec), spec, files, check)


def _rows_by_key(data: bytes, spec: TableSpec) -> dict | None:
    """A file's rows by key (a key of one integer column read as an integer, as
    ``orders``' files always were), or None when it does not hold rows with the key."""
    try:
        rows = json.loads(data)
        if spec.legacy is not None:
            return {int(r[spec.primary_key[0]]): r for r in rows}
        return {tuple(r[k] for k in spec.primary_key): r for r in rows}
    except (ValueError, TypeError, KeyError):
        return None
