"""The daily ``paid_orders`` files: atomic day files, one manifest per run, committed days.

Layout of a folder (``<PIPELINE_DATA_DIR>/paid_orders``)::

    2026-01-25.json                 a day file: the day's rows, byte-deterministic
    _manifest_<run_id>.json         one per run, written after all of its day files
    _committed/2026-01-25.json      pointer: the newest manifest that lists the day
    _committed/_head.json           the last run that took the lock, and whether it finished
    .lock                           flock target; serializes writers
    .<name>.<pid>.<random>.partial  a temporary file, only ever seen while a write runs

A day is *committed* when the newest manifest that lists it matches the file on disk
(sha256 of the bytes). Readers never scan the manifests: the pointer names the newest
manifest for the day, so a lookup opens four small files whatever the number of
manifests (a year of runs every few minutes is >100,000 of them).

Write order of a run (every step atomic: temp file, fsync, rename, fsync the folder)::

    lock → clear stale temps → finish a crashed run's pointers → head(sequence, "writing")
    → day files, sorted → manifest → pointers, sorted → head("done") → unlock

Crash outcomes, by the step reached (``on_step`` names each step so tests can stop there):

- before the manifest: some day files may already hold new bytes that no manifest
  lists; their pointers still name the older manifest, whose sha256 no longer matches,
  so those days read as *uncommitted* (or as committed when the new bytes equal the
  old ones, which is then the right version). Rebuilding the day repairs it.
- after the manifest, before every pointer is updated: ``_head.json`` still says
  ``"writing"`` and names the manifest, so readers consult that one manifest too and
  see the day at its new, complete version: exactly the "newest manifest that lists
  it". The next writer, under the lock, finishes the pointers from that manifest.
- never a wrong or partial version: a file only counts when its bytes hash to what a
  manifest recorded, and every file and pointer is replaced by rename.

Why ``fcntl.flock`` on ``.lock`` for the whole run: two runs writing the same day must
not interleave, or one run's manifest could describe the other run's file. An flock is
held by the kernel for the process and is released when the process dies, so a killed
run never leaves a stale lock; it works across processes on one machine, Dagster runs
and CLI runs alike. It does not reach across machines (nor reliably over NFS): there,
the Dagster concurrency pool ``paid_orders_files`` (limit 1) on the ``paid_orders``
asset serializes the runs. Since only a lock holder writes, any temporary file found
while holding the lock is a leftover of a killed run and is removed.

Plain Python: no Dagster here. The caller passes ``run_id``, ``written_at`` and the
watermark; nothing in this module reads the clock.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

from .commands import rebuild_command
from .errors import PipelineError

ROW_FIELDS = ("order_id", "status", "amount", "updated_at")
DAY_FILE_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.json$")
MANIFEST_RE = re.compile(r"^_manifest_([A-Za-z0-9][A-Za-z0-9_.-]*)\.json$")
TEMP_SUFFIX = ".partial"
LOCK_NAME = ".lock"
POINTER_DIR = "_committed"
HEAD_NAME = "_head.json"

COMMITTED = "committed"
UNCOMMITTED = "uncommitted"
NOT_BUILT = "not built"

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_AMOUNT_RE = re.compile(r"^[+-]?\d+(?:\.\d+)?$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


class DayFilesError(PipelineError):
    """Bad input to a write: a day, a row, a run id the files cannot hold."""


class UncommittedDayError(PipelineError):
    """One or more days that are not committed: missing, edited, or never finished."""

    def __init__(self, reasons: Mapping[str, str]):
        self.reasons = dict(sorted(reasons.items()))
        self.days = tuple(self.reasons)
        parts = [f"paid_orders day {day} is not committed: {why}."
                 for day, why in self.reasons.items()]
        commands = "; ".join(rebuild_command(day) for day in self.days)
        them = "it" if len(self.days) == 1 else "them"
        super().__init__(" ".join(parts) + f" Rebuild {them}: {commands}")


@dataclass(frozen=True)
class DayFilesBatch:
    """What the ``paid_orders`` asset hands to the IO manager: rows per day, the watermark,
    and when it was built."""

    days: Mapping[str, Sequence[Mapping]]
    watermark: str | None = None
    written_at: str | None = None  # from the caller's clock; the manifest records it


@dataclass(frozen=True)
class WrittenRun:
    """What one write left on disk: the manifest and, per day, rows and sha256."""

    run_id: str
    sequence: int
    manifest_path: Path
    days_written: tuple[str, ...]
    rows: Mapping[str, int]
    sha256: Mapping[str, str]

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


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

    @property
    def committed(self) -> bool:
        return self.state == COMMITTED

    @property
    def repair_command(self) -> str:
        return rebuild_command(self.day)


# --- paths -------------------------------------------------------------------------------


def check_day(day: str) -> str:
    """``day`` if it is a real ``YYYY-MM-DD`` day, else :class:`DayFilesError`."""
    if not isinstance(day, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day):
        raise DayFilesError(f"{day!r} is not a day in the form YYYY-MM-DD")
    try:
        date.fromisoformat(day)
    except ValueError:
        raise DayFilesError(f"{day!r} is not a valid calendar day") from None
    return day


def day_file_path(folder: str | os.PathLike, day: str) -> Path:
    """``<folder>/<YYYY-MM-DD>.json``."""
    return Path(folder) / f"{check_day(day)}.json"


def manifest_path(folder: str | os.PathLike, run_id: str) -> Path:
    """``<folder>/_manifest_<run_id>.json``."""
    return Path(folder) / f"_manifest_{_check_run_id(run_id)}.json"


def pointer_path(folder: str | os.PathLike, day: str) -> Path:
    """``<folder>/_committed/<YYYY-MM-DD>.json``: names the newest manifest listing the day."""
    return Path(folder) / POINTER_DIR / f"{check_day(day)}.json"


def temp_path_for(final: Path) -> Path:
    """A unique temp name beside ``final``: starts with ``.``, ends ``.partial``."""
    return final.with_name(f".{final.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}")


def _check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not _RUN_ID_RE.fullmatch(run_id) or len(run_id) > 200:
        raise DayFilesError(
            f"run id {run_id!r} cannot name a manifest file: use letters, digits, '-', '_', '.'"
        )
    return run_id


# --- serialization -----------------------------------------------------------------------


def _row_for_file(day: str, row: Mapping) -> dict:
    if not isinstance(row, Mapping):
        raise DayFilesError(f"day {day}: a row must be a mapping, got {row!r}")
    keys = set(row)
    if keys != set(ROW_FIELDS):
        missing, extra = sorted(set(ROW_FIELDS) - keys), sorted(keys - set(ROW_FIELDS), key=str)
        raise DayFilesError(
            f"day {day}: row {dict(row)!r} must have exactly the fields {', '.join(ROW_FIELDS)}"
            f" (missing: {missing or 'none'}, unexpected: {extra or 'none'})"
        )
    order_id, status, amount, updated_at = (row[name] for name in ROW_FIELDS)
    if isinstance(order_id, bool) or not isinstance(order_id, int):
        raise DayFilesError(f"day {day}: order_id {order_id!r} must be an integer")
    who = f"day {day}, order {order_id}"
    if not isinstance(status, str) or not status:
        raise DayFilesError(f"{who}: status {status!r} must be non-empty text")
    if isinstance(amount, Decimal) and amount.is_finite():
        amount = format(amount, "f")
    if not isinstance(amount, str) or not _AMOUNT_RE.fullmatch(amount):
        raise DayFilesError(
            f"{who}: amount {amount!r} must be exact decimal text such as \"22.00\" "
            "(never a float)"
        )
    if isinstance(updated_at, datetime):
        updated_at = updated_at.isoformat()
    if not isinstance(updated_at, str):
        raise DayFilesError(f"{who}: updated_at {updated_at!r} must be ISO-8601 text")
    try:
        datetime.fromisoformat(updated_at)
    except ValueError:
        raise DayFilesError(f"{who}: updated_at {updated_at!r} is not ISO-8601") from None
    return {"order_id": order_id, "status": status, "amount": amount,
            "updated_at": updated_at}


def serialize_day(day: str, rows: Iterable[Mapping]) -> bytes:
    """The bytes of a day file: rows sorted by ``order_id``; same rows → same bytes."""
    check_day(day)
    clean = sorted((_row_for_file(day, row) for row in rows), key=lambda r: r["order_id"])
    for before, after in zip(clean, clean[1:], strict=False):
        if before["order_id"] == after["order_id"]:
            raise DayFilesError(
                f"day {day}: order {after['order_id']} appears twice; a day holds each "
                "order once"
            )
    return _dumps(clean)


def _dumps(value: object) -> bytes:
    return (json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
            + "\n").encode("ascii")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- atomic files and the lock -----------------------------------------------------------


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_replace(final: str | os.PathLike, data: bytes, *,
                   before_rename: Callable[[], None] | None = None) -> None:
    """Write ``data`` to a temp file beside ``final``, fsync it, rename it over ``final``.

    ``before_rename`` runs once the temp file is durable, just before the rename (the
    step a crash test stops at: a writer killed there leaves only a temp file, which the
    next write clears).
    """
    final = Path(final)
    temp = temp_path_for(final)
    try:
        with open(temp, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if before_rename is not None:
            before_rename()
        os.replace(temp, final)
        _fsync_dir(final.parent)
    except OSError as exc:  # a full disk, a read-only folder: say which file, and that
        raise DayFilesError(  # the committed version was not touched
            f"could not write {final.name} in {final.parent}: "
            f"{exc.strerror or exc}. The previous version, if any, is untouched and still "
            "committed; free space or fix permissions, then run again."
        ) from exc
    finally:
        # After a successful rename the temp name no longer exists; after a failure it
        # must not stay behind.
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass


def remove_stale_temps(folder: str | os.PathLike) -> list[Path]:
    """Delete leftover ``.*.partial`` files; call only while holding the lock."""
    removed = []
    for where in (Path(folder), Path(folder) / POINTER_DIR):
        try:
            entries = list(os.scandir(where))
        except FileNotFoundError:
            continue
        for entry in entries:
            if entry.name.startswith(".") and entry.name.endswith(TEMP_SUFFIX):
                try:
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
                except FileNotFoundError:
                    pass
    return removed


@contextmanager
def folder_lock(folder: str | os.PathLike, *, shared: bool = False) -> Iterator[None]:
    """Hold ``flock`` on ``<folder>/.lock``: exclusive for writers, shared for readers."""
    path = Path(folder) / LOCK_NAME
    if shared:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            # No writer has ever run here, so there is nothing to wait for.
            yield
            return
    else:
        Path(folder).mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
                break
            except InterruptedError:
                continue
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


# --- reading the small JSON files --------------------------------------------------------


def _read_json_object(path: Path) -> dict | None:
    """The JSON object in ``path``; None when missing; ValueError when not an object."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"{path.name} is not valid JSON (truncated or corrupt)") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path.name} does not hold a JSON object")
    return value


def _manifest_entry(folder: Path, name: str, day: str) -> tuple[dict, dict]:
    """The manifest ``name`` and its entry for ``day``; ValueError saying what is wrong."""
    if not isinstance(name, str) or not MANIFEST_RE.fullmatch(name):
        raise ValueError(f"{name!r} is not a manifest file name")
    manifest = _read_json_object(folder / name)
    if manifest is None:
        raise ValueError(f"manifest {name} is missing")
    files = manifest.get("files")
    entry = files.get(day) if isinstance(files, dict) else None
    if (not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str)
            or not isinstance(manifest.get("sequence"), int)
            or day not in _listed(manifest)):
        raise ValueError(f"manifest {name} does not list the day with a sha256 and sequence")
    return manifest, entry


def _listed(manifest: dict) -> list:
    days = manifest.get("days_written")
    return days if isinstance(days, list) else []


def _read_head(folder: Path) -> dict | None:
    try:
        head = _read_json_object(folder / POINTER_DIR / HEAD_NAME)
    except ValueError:
        return None
    if head is None or not isinstance(head.get("sequence"), int):
        return None
    return head


# --- committed days ----------------------------------------------------------------------


def day_status(folder: str | os.PathLike, day: str) -> DayStatus:
    """Check one day against the newest manifest listing it; never scans all manifests."""
    folder = Path(folder)
    check_day(day)
    try:
        data: bytes | None = day_file_path(folder, day).read_bytes()
    except FileNotFoundError:
        data = None

    # The newest manifest listing the day: the one its pointer names, unless the last
    # run stopped between its manifest and its pointers and that manifest lists it too.
    problem = None
    manifest_name = sequence = entry = None
    try:
        pointer = _read_json_object(pointer_path(folder, day))
    except ValueError as exc:
        pointer, problem = None, f"its pointer {POINTER_DIR}/{day}.json is unreadable ({exc})"
    if pointer is not None:
        try:
            manifest, entry = _manifest_entry(folder, pointer.get("manifest"), day)
            manifest_name, sequence = pointer["manifest"], manifest["sequence"]
            if sequence != pointer.get("sequence") or entry["sha256"] != pointer.get("sha256"):
                raise ValueError(f"manifest {manifest_name} disagrees with the pointer")
        except ValueError as exc:
            # e.g. a retry of the same run rewrote that manifest with a newer sequence and
            # died before its pointers: the unfinished run's head below may still vouch
            entry, problem = None, f"its pointer names a manifest that cannot vouch for it ({exc})"
            manifest_name = sequence = None
    head = _read_head(folder)
    if head is not None and head.get("state") != "done" and \
            (sequence is None or head["sequence"] > sequence):
        try:
            manifest, head_entry = _manifest_entry(folder, head.get("manifest"), day)
            if manifest["sequence"] == head["sequence"]:
                manifest_name, sequence, entry = head["manifest"], head["sequence"], head_entry
                problem = None
        except ValueError:
            pass  # the unfinished run did not list this day, or crashed before its manifest

    if entry is None:
        if problem is None and data is None:
            return DayStatus(day, NOT_BUILT, "it was never built (no file, no manifest lists it)")
        reason = problem or "the file exists but no manifest lists it (a run stopped early)"
        return DayStatus(day, UNCOMMITTED, reason)
    if data is None:
        return DayStatus(day, UNCOMMITTED, f"the file is missing, though {manifest_name} lists it",
                         manifest=manifest_name, sequence=sequence)
    actual = sha256_hex(data)
    if actual != entry["sha256"]:
        return DayStatus(
            day, UNCOMMITTED,
            f"the file's sha256 {actual[:12]}… differs from {entry['sha256'][:12]}… recorded in "
            f"{manifest_name} (edited by hand, or a run stopped while rewriting it)",
            manifest=manifest_name, sequence=sequence, sha256=actual)
    return DayStatus(day, COMMITTED, manifest=manifest_name, sequence=sequence,
                     rows=entry.get("rows"), sha256=actual, data=data)


def known_days(folder: str | os.PathLike) -> list[str]:
    """Every day with a file or a pointer in ``folder``, sorted."""
    folder = Path(folder)
    days = set()
    for where in (folder, folder / POINTER_DIR):
        try:
            names = os.listdir(where)
        except FileNotFoundError:
            continue
        days.update(m.group(1) for m in map(DAY_FILE_RE.fullmatch, names) if m)
    return sorted(days)


def describe_days(folder: str | os.PathLike, days: Iterable[str] | None = None,
                  ) -> list[DayStatus]:
    """The status of ``days`` (default: every day found on disk), for ``verify``."""
    wanted = known_days(folder) if days is None else sorted(set(days))
    return [day_status(folder, day) for day in wanted]


def _parse_day_bytes(day: str, data: bytes) -> list[dict]:
    try:
        rows = json.loads(data)
    except ValueError:
        raise UncommittedDayError({day: "the file is not valid JSON"}) from None
    if not isinstance(rows, list):
        raise UncommittedDayError({day: "the file does not hold a JSON array"})
    return rows


def read_committed_days(folder: str | os.PathLike, days: Iterable[str], *,
                        wait_for_writer: bool = True) -> dict[str, list[dict]]:
    """Rows of each of ``days``, committed ones only; else one error naming every bad day.

    With ``wait_for_writer`` the check runs under a shared lock, so a run that is
    writing right now is waited for instead of being reported as uncommitted.
    """
    wanted = sorted({check_day(day) for day in days})
    with folder_lock(folder, shared=True) if wait_for_writer else nullcontext():
        statuses = [day_status(folder, day) for day in wanted]
    bad = {s.day: s.reason for s in statuses if not s.committed}
    if bad:
        raise UncommittedDayError(bad)
    return {s.day: _parse_day_bytes(s.day, s.data) for s in statuses}


def read_committed_day(folder: str | os.PathLike, day: str, *,
                       wait_for_writer: bool = True) -> list[dict]:
    """Rows of one committed day, or :class:`UncommittedDayError` naming it and the fix."""
    return read_committed_days(folder, [day], wait_for_writer=wait_for_writer)[day]


# --- writing a run -----------------------------------------------------------------------


def _pointer_bytes(day: str, manifest_name: str, run_id: str, sequence: int, entry: dict
                   ) -> bytes:
    return _dumps({"day": day, "manifest": manifest_name, "run_id": run_id,
                   "sequence": sequence, "sha256": entry["sha256"], "rows": entry["rows"]})


def _update_pointers(folder: Path, manifest: dict, manifest_name: str,
                     on_step: Callable[[str], None]) -> None:
    for day in manifest["days_written"]:
        on_step(f"pointer:{day}")
        path = pointer_path(folder, day)
        try:
            current = _read_json_object(path)
        except ValueError:
            current = None
        if current is not None and isinstance(current.get("sequence"), int) \
                and current["sequence"] >= manifest["sequence"]:
            continue  # already as new; pointers only move forward
        atomic_replace(path, _pointer_bytes(day, manifest_name, manifest["run_id"],
                                            manifest["sequence"], manifest["files"][day]))


def _scan_manifests(folder: Path) -> Iterator[tuple[str, dict]]:
    for entry in os.scandir(folder):
        if MANIFEST_RE.fullmatch(entry.name):
            try:
                manifest = _read_json_object(Path(entry.path))
            except (ValueError, OSError):
                continue
            if manifest and isinstance(manifest.get("sequence"), int) \
                    and isinstance(manifest.get("files"), dict):
                yield entry.name, manifest


def _rebuild_pointers_locked(folder: Path) -> int:
    newest: dict[str, tuple[int, str, dict]] = {}
    top = 0
    for name, manifest in _scan_manifests(folder):
        top = max(top, manifest["sequence"])
        for day, entry in manifest["files"].items():
            if DAY_FILE_RE.fullmatch(f"{day}.json") and isinstance(entry, dict) \
                    and day in _listed(manifest) \
                    and (day not in newest or newest[day][0] < manifest["sequence"]):
                newest[day] = (manifest["sequence"], name, manifest)
    (folder / POINTER_DIR).mkdir(exist_ok=True)
    for day, (sequence, name, manifest) in sorted(newest.items()):
        atomic_replace(pointer_path(folder, day), _pointer_bytes(
            day, name, manifest.get("run_id", ""), sequence, manifest["files"][day]))
    atomic_replace(folder / POINTER_DIR / HEAD_NAME,
                   _dumps({"manifest": None, "sequence": top, "state": "done"}))
    return top


def rebuild_pointers(folder: str | os.PathLike) -> int:
    """Repair: rebuild every pointer from a scan of all manifests (slow; writes, under lock).

    Returns the highest manifest sequence found. Runs by itself when a writer finds
    manifests but no ``_committed/_head.json`` (the pointer folder was deleted).
    """
    folder = Path(folder)
    with folder_lock(folder):
        remove_stale_temps(folder)
        return _rebuild_pointers_locked(folder)


def _start_run_locked(folder: Path) -> int:
    """Finish a crashed run's pointers and return the last sequence used."""
    (folder / POINTER_DIR).mkdir(exist_ok=True)
    head = _read_head(folder)
    if head is None:
        if any(MANIFEST_RE.fullmatch(e.name) for e in os.scandir(folder)):
            return _rebuild_pointers_locked(folder)
        return 0
    if head.get("state") != "done" and head.get("manifest"):
        try:
            manifest = _read_json_object(folder / head["manifest"])
        except ValueError:
            manifest = None  # a torn manifest cannot exist (atomic), but never trust it
        if manifest is not None and manifest.get("sequence") == head["sequence"]:
            _update_pointers(folder, manifest, head["manifest"], lambda step: None)
    return head["sequence"]


def write_day_files(
    folder: str | os.PathLike,
    days: Mapping[str, Sequence[Mapping]],
    *,
    run_id: str,
    written_at: str | datetime,
    watermark: str | datetime | None = None,
    on_step: Callable[[str], None] | None = None,
) -> WrittenRun:
    """Write one run: each day file atomically, then the manifest, then the pointers.

    Everything is serialized and checked before the first byte is written, so bad rows
    never touch the folder. ``on_step`` is called before each step with
    ``"day_file:<day>"``, ``"day_file_rename:<day>"`` (its temp file written),
    ``"manifest"``, ``"manifest_rename"``, ``"pointer:<day>"`` and ``"done"``: the one
    hook of crash tests (:func:`pipeline_assets.core.crash.file_step_hook` maps the
    steps to the named crash points).
    """
    folder = Path(folder)
    _check_run_id(run_id)
    if not days:
        raise DayFilesError(f"run {run_id} has no days to write")
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
    step = on_step or (lambda name: None)

    rows_by_day = {check_day(day): list(rows) for day, rows in sorted(days.items())}
    blobs = {day: serialize_day(day, rows) for day, rows in rows_by_day.items()}
    # serialize_day refused duplicates, so the row count is the input's length.
    files = {day: {"rows": len(rows_by_day[day]), "sha256": sha256_hex(data)}
             for day, data in blobs.items()}
    final_manifest = manifest_path(folder, run_id)

    folder.mkdir(parents=True, exist_ok=True)
    with folder_lock(folder):
        remove_stale_temps(folder)
        sequence = _start_run_locked(folder) + 1
        head_path = folder / POINTER_DIR / HEAD_NAME
        # Reserve the sequence before any day file changes, so a crash never reuses it.
        atomic_replace(head_path, _dumps(
            {"manifest": final_manifest.name, "sequence": sequence, "state": "writing"}))
        for day, data in blobs.items():
            step(f"day_file:{day}")
            atomic_replace(day_file_path(folder, day), data,
                           before_rename=lambda day=day: step(f"day_file_rename:{day}"))
        manifest = {
            "run_id": run_id,
            "sequence": sequence,
            "days_written": list(blobs),
            "watermark": watermark,
            "written_at": written_at,
            "files": files,
        }
        step("manifest")
        atomic_replace(final_manifest, _dumps(manifest),
                       before_rename=lambda: step("manifest_rename"))
        _update_pointers(folder, manifest, final_manifest.name, step)
        step("done")
        atomic_replace(head_path, _dumps(
            {"manifest": final_manifest.name, "sequence": sequence, "state": "done"}))
    return WrittenRun(run_id=run_id, sequence=sequence, manifest_path=final_manifest,
                      days_written=tuple(blobs), rows={d: f["rows"] for d, f in files.items()},
                      sha256={d: f["sha256"] for d, f in files.items()})


def is_temp_name(name: str) -> bool:
    """True for names this module uses for temporary files."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


__all__ = [
    "COMMITTED", "NOT_BUILT", "UNCOMMITTED", "DayFilesBatch", "DayFilesError", "DayStatus",
    "UncommittedDayError", "WrittenRun", "atomic_replace", "check_day", "day_file_path",
    "day_status", "describe_days", "folder_lock", "is_temp_name", "known_days",
    "manifest_path", "pointer_path", "read_committed_day", "read_committed_days",
    "rebuild_pointers", "remove_stale_temps", "serialize_day", "sha256_hex", "temp_path_for",
    "write_day_files",
]
