"""Layout and names of a ``paid_orders`` folder, and the checks on days and run ids.

Every name is relative to the folder (a local directory or an object-store prefix)::

    2026-01-25.json                 a day file: the day's rows, byte-deterministic
    2026-01-25.parquet              the same, of a file set declared ``format: parquet``
    _manifest_<run_id>.json         one per run, written after all of its day files
    _committed/2026-01-25.json      pointer: the newest manifest that lists the day
    _committed/_head.json           the last run that started writing, and whether it finished
    .lock                           local disk only: the flock target that serializes writers
    .<name>.<pid>.<random>.partial  local disk only: a temporary file, seen only mid-write
"""

from __future__ import annotations

import os
import re
import secrets
from datetime import date

from ..errors import DayFilesError
from ..table.spec import FILE_FORMATS

DAY_FILE_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.(json|parquet)$")
FORMATS = FILE_FORMATS  # a day file's formats; each is its name's extension
MANIFEST_RE = re.compile(r"^_manifest_([A-Za-z0-9][A-Za-z0-9_.-]*)\.json$")
TEMP_SUFFIX = ".partial"
LOCK_NAME = ".lock"
POINTER_DIR = "_committed"
HEAD_NAME = "_head.json"
HEAD = f"{POINTER_DIR}/{HEAD_NAME}"

COMMITTED = "committed"
UNCOMMITTED = "uncommitted"
NOT_BUILT = "not built"

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_day(day: str) -> str:
    """``day`` if it is a real ``YYYY-MM-DD`` day, else :class:`DayFilesError`."""
    if not isinstance(day, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day):
        raise DayFilesError(f"{day!r} is not a day in the form YYYY-MM-DD")
    try:
        date.fromisoformat(day)
    except ValueError:
        raise DayFilesError(f"{day!r} is not a valid calendar day") from None
    return day


def check_run_id(run_id: str) -> str:
    """``run_id`` if it can name a manifest file, else :class:`DayFilesError`."""
    if not isinstance(run_id, str) or not _RUN_ID_RE.fullmatch(run_id) or len(run_id) > 200:
        raise DayFilesError(
            f"run id {run_id!r} cannot name a manifest file: use letters, digits, '-', '_', '.'"
        )
    return run_id


def day_name(day: str, form: str = "json") -> str:
    """``YYYY-MM-DD.json`` (or ``.parquet``: ``form``)."""
    if form not in FORMATS:
        raise DayFilesError(f"{form!r} is not a day file format ({' or '.join(FORMATS)})")
    return f"{check_day(day)}.{form}"


def manifest_name(run_id: str) -> str:
    """``_manifest_<run_id>.json``."""
    return f"_manifest_{check_run_id(run_id)}.json"


def pointer_name(day: str) -> str:
    """``_committed/YYYY-MM-DD.json``: names the newest manifest listing the day."""
    return f"{POINTER_DIR}/{check_day(day)}.json"


def temp_name_for(name: str) -> str:
    """A unique temp name beside ``name``: starts with ``.``, ends ``.partial``."""
    head, _, base = name.rpartition("/")
    temp = f".{base}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
    return f"{head}/{temp}" if head else temp


def is_temp_name(name: str) -> bool:
    """True for names this package uses for temporary files."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)
