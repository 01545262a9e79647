"""The writer: one run's day files, then its manifest, then the pointers and the head."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..crash import crash_point
from ..errors import DayFilesError
from ..table.spec import DailyFiles, TableSpec
from ..warehouse.declaration import describe_files, files_fingerprint
from .layout import (
    DAY_FILE_RE,
    FORMATS,
    HEAD,
    MANIFEST_RE,
    check_day,
    check_run_id,
    day_name,
    manifest_name,
    pointer_name,
)
from .parquet import parquet_bytes
from .serialize import dumps, file_of, serialize_day, sha256_hex
from .state import Snapshot, listed, read_head, read_json_object
from .store import Store, open_store

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class DayFilesBatch:
    """What a daily files asset (``paid_orders``) hands to the IO manager: rows per day,
    the watermark, when it was built, and whose files they are (``spec``'s ``files``: the
    bytes of each file are theirs)."""

    days: Mapping[str, Sequence[Mapping] | pa.Table]  # a Parquet file set's: either
    spec: TableSpec
    watermark: str | None = None
    written_at: str | None = None  # from the caller's clock; the manifest records it
    files: DailyFiles | None = None  # default: the spec's first daily files


@dataclass(frozen=True)
class WrittenRun:
    """What one write left in the folder: the manifest and, per day, rows and sha256."""

    run_id: str
    sequence: int
    manifest_path: os.PathLike
    days_written: tuple[str, ...]
    rows: Mapping[str, int]
    sha256: Mapping[str, str]

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def _pointer_bytes(day: str, manifest: str, run_id: str, sequence: int, entry: dict) -> bytes:
    return dumps(
        {
            "day": day,
            "manifest": manifest,
            "run_id": run_id,
            "sequence": sequence,
            "sha256": entry["sha256"],
            "rows": entry["rows"],
        }
    )


def _update_pointers(store: Store, manifest: dict, name: str, *, crash: bool = False) -> None:
    if crash:
        crash_point("files_after_manifest")
    files = Snapshot(store)
    files.prefetch([pointer_name(day) for day in manifest["days_written"]])
    updates = {}
    for day in manifest["days_written"]:
        try:
            current = read_json_object(files, pointer_name(day))
        except ValueError:
            current = None
        if (
            current is not None
            and isinstance(current.get("sequence"), int)
            and current["sequence"] >= manifest["sequence"]
        ):
            continue  # already as new; pointers only move forward
        updates[pointer_name(day)] = _pointer_bytes(
            day, name, manifest["run_id"], manifest["sequence"], manifest["files"][day]
        )
    store.write_many(updates)


def _scan_manifests(store: Store) -> Iterator[tuple[str, dict]]:
    for name in store.names():
        if MANIFEST_RE.fullmatch(name):
            try:
                manifest = read_json_object(store, name)
            except (ValueError, OSError):
                continue
            if (
                manifest
                and isinstance(manifest.get("sequence"), int)
                and isinstance(manifest.get("files"), dict)
            ):
                yield name, manifest


def _rebuild_pointers_locked(store: Store) -> int:
    newest: dict[str, tuple[int, str, dict]] = {}
    top = 0
    for name, manifest in _scan_manifests(store):
        top = max(top, manifest["sequence"])
        for day, entry in manifest["files"].items():
            if (
                DAY_FILE_RE.fullmatch(f"{day}.json")
                and isinstance(entry, dict)
                and day in listed(manifest)
                and (day not in newest or newest[day][0] < manifest["sequence"])
            ):
                newest[day] = (manifest["sequence"], name, manifest)
    store.prepare()
    store.write_many(
        {
            pointer_name(day): _pointer_bytes(
                day, name, manifest.get("run_id", ""), sequence, manifest["files"][day]
            )
            for day, (sequence, name, manifest) in sorted(newest.items())
        }
    )
    store.write(HEAD, dumps({"manifest": None, "sequence": top, "state": "done"}))
    return top


def rebuild_pointers(folder: str | os.PathLike | Store) -> int:
    """Repair: rebuild every pointer from a scan of all manifests (slow; writes, under lock).

    Returns the highest manifest sequence found. Runs by itself when a writer finds
    manifests but no ``_committed/_head.json`` (the pointer folder was deleted).
    """
    store = open_store(folder)
    with store.lock():
        store.clear_temps()
        return _rebuild_pointers_locked(store)


def _start_run_locked(store: Store) -> int:
    """Finish a crashed run's pointers and return the last sequence used."""
    head = read_head(store)
    if head is None:
        if any(MANIFEST_RE.fullmatch(name) for name in store.names()):
            return _rebuild_pointers_locked(store)
        return 0
    if head.get("state") != "done" and head.get("manifest"):
        try:
            manifest = read_json_object(store, head["manifest"])
        except ValueError:
            manifest = None  # a torn manifest cannot exist (atomic), but never trust it
        if manifest is not None and manifest.get("sequence") == head["sequence"]:
            _update_pointers(store, manifest, head["manifest"])
    return head["sequence"]


def _checked_times(
    written_at: str | datetime, watermark: str | datetime | None
) -> tuple[str, str | None]:
    """``written_at`` and ``watermark`` as the ISO-8601 text a manifest records, or a
    :class:`DayFilesError` saying which is not."""
    if isinstance(written_at, datetime):
        written_at = written_at.isoformat()
    if isinstance(watermark, datetime):
        watermark = watermark.isoformat()
    if watermark is not None and not isinstance(watermark, str):
        raise DayFilesError(f"watermark {watermark!r} must be ISO-8601 text or None")
    try:
        datetime.fromisoformat(written_at)
    except (TypeError, ValueError):
        raise DayFilesError(f"written_at {written_at!r} must be an ISO-8601 timestamp") from None
    return written_at, watermark


def _day_bytes(day: str, rows, spec: TableSpec, view: DailyFiles) -> tuple[bytes, int]:
    """(the bytes of one day file in ``view``'s format, its rows)."""
    if view.format == "parquet":
        return parquet_bytes(day, rows, spec, view)
    rows = list(rows)
    # serialize_day refuses duplicates, so the row count is the input's length.
    return serialize_day(day, rows, spec, view), len(rows)


def _serialized(
    days: Mapping[str, Sequence[Mapping]], spec: TableSpec, view: DailyFiles
) -> tuple[dict[str, bytes], dict[str, dict]]:
    """The bytes of each day file, by day, and each day's manifest entry (rows, sha256):
    all of them built, and so checked, before the first byte is written."""
    blobs, entries = {}, {}
    for day, rows in sorted(days.items()):
        blobs[check_day(day)], count = _day_bytes(day, rows, spec, view)
        entries[day] = {"rows": count, "sha256": sha256_hex(blobs[day])}
    return blobs, entries


def _write_days(store: Store, blobs: Mapping[str, bytes], form: str) -> None:
    """The run's day files: the first, then the rest at once (the crash point
    ``files_between_days`` between them)."""
    (first, data), *rest = blobs.items()
    store.write(day_name(first, form), data, crash_at="day_file_before_rename")
    if rest:
        crash_point("files_between_days")
        # the order of the day files does not matter, only that all precede the manifest
        store.write_many(
            {day_name(day, form): data for day, data in rest}, crash_at="day_file_before_rename"
        )


def _remove_other_formats(store: Store, days: Sequence[str], form: str) -> None:
    """A written day's file in another format (the file set's format changed): removed
    once the day is committed in this one, never before."""
    present = set(store.names())
    store.remove(
        [
            name
            for day in days
            for other in FORMATS
            if other != form
            if (name := day_name(day, other)) in present
        ]
    )


def _manifest(
    run_id: str,
    sequence: int,
    entries: dict[str, dict],
    watermark: str | None,
    written_at: str,
    spec: TableSpec,
    view: DailyFiles,
) -> dict:
    """The run's manifest: its days, each with its rows and sha256, and the shape every
    file of the run was written with (core/warehouse/declaration.py)."""
    return {
        "run_id": run_id,
        "sequence": sequence,
        "days_written": list(entries),
        "watermark": watermark,
        "written_at": written_at,
        "files": entries,
        "declaration": files_fingerprint(spec, view),
        "columns": describe_files(spec, view)["columns"],
        # the format of its day files (JSON, the first, left unsaid)
        **({"format": view.format} if view.format != "json" else {}),
    }


def write_day_files(
    folder: str | os.PathLike | Store,
    days: Mapping[str, Sequence[Mapping]],
    *,
    run_id: str,
    written_at: str | datetime,
    watermark: str | datetime | None = None,
    spec: TableSpec,
    files: DailyFiles | None = None,
) -> WrittenRun:
    """Write one run: each day file whole, then the manifest, then the pointers, the head.
    The bytes of each file are those of ``spec``'s ``files`` (default: ``paid_orders``);
    the manifest records the shape they were written with (``declaration``: the file
    set's fingerprint, ``columns``: its columns and their types).

    Everything is serialized and checked before the first byte is written, so bad rows
    never touch the folder. The named crash points of :mod:`~pipeline_assets.core.crash` sit between
    the steps (``files_between_days``, ``files_before_manifest``, ``files_after_manifest``,
    ``files_after_pointers``) and inside each file write (``*_before_rename``).
    """
    store = open_store(folder)
    check_run_id(run_id)
    if not days:
        raise DayFilesError(f"run {run_id} has no days to write")
    written_at, watermark = _checked_times(written_at, watermark)
    view = file_of(spec, files)
    blobs, entries = _serialized(days, spec, view)
    manifest_file = manifest_name(run_id)

    store.prepare()
    with store.lock():
        store.clear_temps()
        sequence = _start_run_locked(store) + 1
        # Reserve the sequence before any day file changes, so a crash never reuses it.
        store.write(
            HEAD, dumps({"manifest": manifest_file, "sequence": sequence, "state": "writing"})
        )
        _write_days(store, blobs, view.format)
        manifest = _manifest(run_id, sequence, entries, watermark, written_at, spec, view)
        crash_point("files_before_manifest")
        store.write(manifest_file, dumps(manifest), crash_at="manifest_before_rename")
        _update_pointers(store, manifest, manifest_file, crash=True)
        crash_point("files_after_pointers")
        store.write(HEAD, dumps({"manifest": manifest_file, "sequence": sequence, "state": "done"}))
        _remove_other_formats(store, list(blobs), view.format)
    return WrittenRun(
        run_id=run_id,
        sequence=sequence,
        manifest_path=store.path(manifest_file),
        days_written=tuple(blobs),
        rows={d: f["rows"] for d, f in entries.items()},
        sha256={d: f["sha256"] for d, f in entries.items()},
    )
