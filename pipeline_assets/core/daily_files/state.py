"""Commit state: which days are committed (their rows are :mod:`.readers`').

A day is *committed* when the newest manifest that lists it matches the file (sha256 of
the bytes; the file is ``<day>.json``, or ``<day>.parquet`` when the manifest says so).
Readers never scan the manifests: the day's pointer names the newest manifest for it, so
a lookup reads four small files whatever the number of manifests (a year of runs every
few minutes is >100,000 of them); the head adds the one manifest of a run that stopped
between its manifest and its pointers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field

from ..commands import rebuild_command
from ..table import ORDERS
from .layout import (
    COMMITTED,
    DAY_FILE_RE,
    FORMATS,
    HEAD,
    MANIFEST_RE,
    NOT_BUILT,
    POINTER_DIR,
    UNCOMMITTED,
    check_day,
    day_name,
    pointer_name,
)
from .serialize import json_object, sha256_hex
from .store import Store, open_store

# On an object store (no lock to wait on) a reader that finds a day uncommitted while
# the head says a run is writing polls the head this long before it reports the day.
WRITER_WAIT_SECONDS = 20.0
_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class DayStatus:
    """Where one day stands: ``committed``, ``uncommitted`` (with why) or ``not built``."""

    day: str
    state: str
    reason: str = ""
    manifest: str | None = None
    sequence: int | None = None
    rows: int | None = None
    sha256: str | None = None
    data: bytes | None = field(default=None, repr=False, compare=False)
    # what the manifest says the file was written with: its file set's fingerprint
    # (None: a manifest from before manifests recorded it) and columns
    declaration: str | None = None
    columns: dict | None = field(default=None, compare=False)
    format: str = "json"  # its file's format, as the manifest that lists it says

    @property
    def file_name(self) -> str:
        """Its file's name in the folder: ``YYYY-MM-DD.json`` or ``.parquet``."""
        return day_name(self.day, self.format)

    @property
    def committed(self) -> bool:
        return self.state == COMMITTED

    @property
    def repair_command(self) -> str:
        """The rebuild of this day of the code location's own ``orders`` (the reader's
        default file set, :func:`read_committed_days`)."""
        return default_rebuild(self.day)


# --- the small JSON files -----------------------------------------------------------------


class Snapshot:
    """The files one check reads, each read once: many days share a manifest and the head,
    and on an object store the day files and pointers are fetched at once."""

    def __init__(self, store: Store):
        self.store = store
        self.cache: dict[str, bytes | None] = {}

    def prefetch(self, names: Iterable[str]) -> None:
        missing = [name for name in names if name not in self.cache]
        self.cache.update(self.store.read_many(missing))

    def read(self, name: str) -> bytes | None:
        if name not in self.cache:
            self.cache[name] = self.store.read(name)
        return self.cache[name]


def read_json_object(files: Store | Snapshot, name: str) -> dict | None:
    """The JSON object stored as ``name``; None when missing; ValueError when not an object."""
    data = files.read(name)
    return None if data is None else json_object(name, data)


def listed(manifest: dict) -> list:
    days = manifest.get("days_written")
    return days if isinstance(days, list) else []


def manifest_entry(store: Store | Snapshot, name: str, day: str) -> tuple[dict, dict]:
    """The manifest ``name`` and its entry for ``day``; ValueError saying what is wrong."""
    if not isinstance(name, str) or not MANIFEST_RE.fullmatch(name):
        raise ValueError(f"{name!r} is not a manifest file name")
    manifest = read_json_object(store, name)
    if manifest is None:
        raise ValueError(f"manifest {name} is missing")
    files = manifest.get("files")
    entry = files.get(day) if isinstance(files, dict) else None
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("sha256"), str)
        or not isinstance(manifest.get("sequence"), int)
        or day not in listed(manifest)
    ):
        raise ValueError(f"manifest {name} does not list the day with a sha256 and sequence")
    return manifest, entry


def read_head(store: Store | Snapshot) -> dict | None:
    """``_committed/_head.json`` when it is readable and has a sequence, else None."""
    try:
        head = read_json_object(store, HEAD)
    except ValueError:
        return None
    if head is None or not isinstance(head.get("sequence"), int):
        return None
    return head


# --- committed days -----------------------------------------------------------------------


def _format_of(manifest: dict) -> str:
    """The format a manifest's day files are in (JSON when it says none)."""
    form = manifest.get("format", "json")
    return form if form in FORMATS else "json"


def _day_status(store: Snapshot, day: str, expect: str = "json") -> DayStatus:
    listing, problem = _newest_listing(store, day)
    if listing is None:
        names = [day_name(day, expect), *(day_name(day, f) for f in FORMATS if f != expect)]
        if problem is None and all(store.read(name) is None for name in names):
            return DayStatus(day, NOT_BUILT, "it was never built (no file, no manifest lists it)")
        reason = problem or "the file exists but no manifest lists it (a run stopped early)"
        return DayStatus(day, UNCOMMITTED, reason)
    form = _format_of(listing[3])
    return _listed_status(day, store.read(day_name(day, form)), *listing, form)


def _newest_listing(store: Snapshot, day: str) -> tuple[tuple | None, str | None]:
    """The newest manifest listing the day, as ``(name, sequence, entry, manifest)``, or
    None and why (None: nothing lists it): the one its pointer names, unless the last run
    stopped between its manifest and its pointers and that manifest lists it too."""
    listing = problem = None
    try:
        pointer = read_json_object(store, pointer_name(day))
    except ValueError as exc:
        pointer, problem = None, f"its pointer {POINTER_DIR}/{day}.json is unreadable ({exc})"
    if pointer is not None:
        try:
            manifest, entry = manifest_entry(store, pointer.get("manifest"), day)
            name, sequence = pointer["manifest"], manifest["sequence"]
            if sequence != pointer.get("sequence") or entry["sha256"] != pointer.get("sha256"):
                raise ValueError(f"manifest {name} disagrees with the pointer")
            listing = (name, sequence, entry, manifest)
        except ValueError as exc:
            # e.g. a retry of the same run rewrote that manifest with a newer sequence and
            # died before its pointers: the unfinished run's head below may still vouch
            problem = f"its pointer names a manifest that cannot vouch for it ({exc})"
    head = read_head(store)
    if (
        head is not None
        and head.get("state") != "done"
        and (listing is None or head["sequence"] > listing[1])
    ):
        try:
            manifest, head_entry = manifest_entry(store, head.get("manifest"), day)
            if manifest["sequence"] == head["sequence"]:
                return (head["manifest"], head["sequence"], head_entry, manifest), None
        except ValueError:
            pass  # the unfinished run did not list this day, or crashed before its manifest
    return listing, problem


def _listed_status(
    day: str,
    data: bytes | None,
    manifest_name: str,
    sequence: int,
    entry: dict,
    shape: dict,
    form: str,
) -> DayStatus:
    """The day's file against the entry of the manifest that lists it."""
    if data is None:
        return DayStatus(
            day,
            UNCOMMITTED,
            f"the file is missing, though {manifest_name} lists it"
            + ("" if form == "json" else f" ({day_name(day, form)})"),
            manifest=manifest_name,
            sequence=sequence,
            format=form,
        )
    actual = sha256_hex(data)
    if actual != entry["sha256"]:
        return DayStatus(
            day,
            UNCOMMITTED,
            f"the file's sha256 {actual[:12]}… differs from {entry['sha256'][:12]}… recorded in "
            f"{manifest_name} (edited by hand, or a run stopped while rewriting it)",
            manifest=manifest_name,
            sequence=sequence,
            sha256=actual,
            format=form,
        )
    declared, columns = shape.get("declaration"), shape.get("columns")
    return DayStatus(
        day,
        COMMITTED,
        manifest=manifest_name,
        sequence=sequence,
        rows=entry.get("rows"),
        sha256=actual,
        data=data,
        declaration=declared if isinstance(declared, str) else None,
        columns=columns if isinstance(columns, dict) else None,
        format=form,
    )


def day_status(folder: str | os.PathLike | Store, day: str) -> DayStatus:
    """Check one day against the newest manifest listing it; never scans all manifests."""
    check_day(day)
    return _day_status(Snapshot(open_store(folder)), day)


def known_days(folder: str | os.PathLike | Store) -> list[str]:
    """Every day with a file or a pointer in ``folder``, sorted."""
    store = open_store(folder)
    days = set()
    for sub in ("", POINTER_DIR):
        days.update(m.group(1) for m in map(DAY_FILE_RE.fullmatch, store.names(sub)) if m)
    return sorted(days)


def describe_days(
    folder: str | os.PathLike | Store,
    days: Iterable[str] | None = None,
    *,
    expect: str = "json",
) -> list[DayStatus]:
    """The status of ``days`` (default: every day found in the folder), for ``verify``;
    ``expect``: the format their files are most likely in (read at once with the
    pointers; a day of another format costs one more read)."""
    store = open_store(folder)
    wanted = known_days(store) if days is None else sorted({check_day(day) for day in days})
    return _statuses(Snapshot(store), wanted, expect)


def _statuses(files: Snapshot, days: list[str], expect: str = "json") -> list[DayStatus]:
    files.prefetch([day_name(day, expect) for day in days] + [pointer_name(day) for day in days])
    return [_day_status(files, day, expect) for day in days]


def settled_statuses(
    folder: str | os.PathLike | Store,
    days: Iterable[str],
    *,
    wait_for_writer: bool | float = True,
    clock: Callable[[], float] = time.monotonic,
    expect: str = "json",
) -> list[DayStatus]:
    """:func:`describe_days`, but a run writing right now is waited for, not reported.

    On local disk: under the shared lock (a run killed mid-write released it, so its
    leftovers read as uncommitted at once). On an object store, where there is no lock:
    when a day is not committed, poll the head while it says a run is writing, and look
    again once no run is writing. A run killed mid-write leaves the head "writing" until
    the next writer, so each writer seen is waited for at most :data:`WRITER_WAIT_SECONDS`
    (or ``wait_for_writer`` seconds); a new writer taking over gets a fresh wait.
    """
    store = open_store(folder)
    wanted = sorted({check_day(day) for day in days})
    with store.lock(shared=True) if wait_for_writer else nullcontext():
        statuses = _statuses(Snapshot(store), wanted, expect)
    if not wait_for_writer or store.locks or all(s.committed for s in statuses):
        return statuses
    wait = WRITER_WAIT_SECONDS if wait_for_writer is True else float(wait_for_writer)
    waited_for, deadline = None, clock() + wait
    while (head := read_head(store)) is not None and head.get("state") == "writing":
        if head != waited_for:
            waited_for, deadline = head, clock() + wait
        elif clock() >= deadline:
            break  # a writer that never finishes: report what is there now
        time.sleep(_POLL_SECONDS)
    # No run is writing (or the one seen gave up): what is there now is settled. Look
    # again, also when no writer was seen: one may have finished since the first look.
    again = iter(_statuses(Snapshot(store), [s.day for s in statuses if not s.committed], expect))
    return [s if s.committed else next(again) for s in statuses]


def default_rebuild(day: str) -> str:
    """The rebuild of a day of the code location's own ``paid_orders``."""
    return rebuild_command(day, spec=ORDERS)
