"""Day files (``paid_orders`` and every declared file set): whole day files in JSON or
Parquet, one manifest per run, committed days.

How the modules fit, bottom up:

- :mod:`.layout`: the names in a folder (``2026-01-25.json``, ``_manifest_<run>.json``,
  ``_committed/…``) and the checks on days and run ids.
- :mod:`.serialize`: the bytes of each file (deterministic JSON) and their sha256.
- :mod:`.parquet`: the bytes of a Parquet day file (typed columns, fixed writer options:
  the same rows, the same bytes), from rows or from Arrow tables of stored rows.
- :mod:`.hashes`: the sha256 of the same day file bytes, built from Arrow tables of stored
  rows (what ``verify`` checks with).
- :mod:`.store`: where the folder lives and how one file is replaced: local disk
  (temp + fsync + rename, ``flock``) or an object store (one whole-object PUT, through
  ``universal_pathlib`` and fsspec). Chosen by the location: a path or a URL.
- :mod:`.state`: commit state (``day_status``, ``settled_statuses``).
- :mod:`.readers`: the readers (``read_committed_day(s)``, the committed files' listing),
  the shape a file set is declared with and the days written in another.
- :mod:`.writer`: one run's write, in the order below.

Write order of a run, the same on both stores::

    lock (local disk only) → clear stale temps → finish a crashed run's pointers
    → head(sequence, "writing") → day files, sorted → manifest → pointers, sorted
    → head("done") → unlock

Each step replaces one file whole: by rename on local disk, by one PUT on an object
store; a reader sees the old bytes or the new ones, never part of them.

A day is *committed* when the newest manifest that lists it matches the file (sha256 of
its bytes). Crash outcomes, by the step reached (the named points of ``core/crash.py``
stop a run there, on either store):

- before the manifest (``files_between_days``, ``day_file_before_rename``,
  ``files_before_manifest``, ``manifest_before_rename``): some day files may already hold
  new bytes that no manifest lists; their pointers still name the older manifest, whose
  sha256 no longer matches, so those days read as *uncommitted* (or as committed when the
  new bytes equal the old ones, which is then the right version). Rebuilding the day
  repairs it. On local disk a killed write leaves a temp file, cleared by the next writer.
- after the manifest, before every pointer is updated (``files_after_manifest``,
  ``files_after_pointers``): the head still says ``"writing"`` and names the manifest, so
  readers consult that one manifest too and see the day at its new, complete version:
  exactly the "newest manifest that lists it". The next writer finishes the pointers.
- never a wrong or partial version: a file only counts when its bytes hash to what a
  manifest recorded.

Writers must not interleave, or one run's manifest could describe the other run's file.
On one machine the ``flock`` on ``.lock`` serializes them (held by the kernel for the
process, so a killed run never leaves it stale; not reliable over NFS). Across machines,
and always on an object store, the Dagster concurrency pool ``paid_orders_files``
(limit 1) on the ``paid_orders`` asset serializes the runs. Without it, two runs racing
on the same day leave that day *uncommitted* (its bytes from one run, its newest
manifest from the other) until a rebuild, never read as a wrong version: the hash rule
above still holds.

Plain Python: no Dagster here. The caller passes ``run_id``, ``written_at`` and the
watermark; nothing in this package reads the clock.
"""

from __future__ import annotations

import os

from ..errors import DayFilesError, UncommittedDayError
from .hashes import DayFileHashes
from .layout import (
    COMMITTED,
    DAY_FILE_RE,
    HEAD,
    HEAD_NAME,
    LOCK_NAME,
    MANIFEST_RE,
    NOT_BUILT,
    POINTER_DIR,
    TEMP_SUFFIX,
    UNCOMMITTED,
    check_day,
    day_name,
    is_temp_name,
    manifest_name,
    pointer_name,
)
from .readers import (
    Shape,
    committed_files,
    read_committed_day,
    read_committed_days,
    shape_of,
    stale_days,
)
from .serialize import serialize_day, sha256_hex
from .state import (
    DayStatus,
    day_status,
    describe_days,
    known_days,
    settled_statuses,
)
from .store import LocalStore, ObjectStore, Store, atomic_replace, is_url, open_store, temp_path_for
from .writer import DayFilesBatch, WrittenRun, rebuild_pointers, write_day_files


def day_file_path(folder: str | os.PathLike | Store, day: str) -> os.PathLike:
    """``<folder>/<YYYY-MM-DD>.json`` (a ``Path``, or a ``UPath`` on an object store)."""
    return open_store(folder).path(day_name(day))


def manifest_path(folder: str | os.PathLike | Store, run_id: str) -> os.PathLike:
    """``<folder>/_manifest_<run_id>.json``."""
    return open_store(folder).path(manifest_name(run_id))


def pointer_path(folder: str | os.PathLike | Store, day: str) -> os.PathLike:
    """``<folder>/_committed/<YYYY-MM-DD>.json``: names the newest manifest listing the day."""
    return open_store(folder).path(pointer_name(day))


__all__ = [
    "COMMITTED",
    "DAY_FILE_RE",
    "HEAD",
    "HEAD_NAME",
    "LOCK_NAME",
    "MANIFEST_RE",
    "NOT_BUILT",
    "POINTER_DIR",
    "TEMP_SUFFIX",
    "UNCOMMITTED",
    "DayFileHashes",
    "DayFilesBatch",
    "DayFilesError",
    "DayStatus",
    "LocalStore",
    "ObjectStore",
    "Shape",
    "Store",
    "UncommittedDayError",
    "WrittenRun",
    "atomic_replace",
    "check_day",
    "committed_files",
    "day_file_path",
    "day_status",
    "describe_days",
    "is_temp_name",
    "is_url",
    "known_days",
    "manifest_path",
    "open_store",
    "pointer_path",
    "read_committed_day",
    "read_committed_days",
    "rebuild_pointers",
    "serialize_day",
    "settled_statuses",
    "shape_of",
    "stale_days",
    "sha256_hex",
    "temp_path_for",
    "write_day_files",
]
