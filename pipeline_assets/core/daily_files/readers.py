"""What readers see: the committed days' rows (``read_committed_day(s)``), the listing of
a folder's committed days (``pipeline-assets files``), and the shape a file set is
declared with. A committed day written with another shape (a changed column, type,
filter, key, day column or format) is *stale*: readers refuse it, ``verify`` names it,
the refresh sensor rebuilds it once."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import StaleDayError, UncommittedDayError
from ..table import ORDERS
from ..table.spec import DailyFiles, TableSpec
from ..warehouse.declaration import describe_files, files_fingerprint, implied_files_fingerprint
from .parquet import read_parquet
from .serialize import file_of
from .state import (
    DayStatus,
    default_rebuild,
    describe_days,
    known_days,
    settled_statuses,
)
from .store import LocalStore, Store, open_store

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Shape:
    """The shape a file set is declared with now (``current``: its fingerprint) and the one
    a manifest that records none was written with (``implied``; None: unknown)."""

    current: str
    implied: str | None = None
    columns: dict | None = None  # the declared columns and their types, for messages
    format: str = "json"  # the format its files are declared in

    def stale(self, status: DayStatus) -> bool:
        """Whether a committed day was written with another shape."""
        return status.committed and (status.declaration or self.implied) != self.current

    def why(self, status: DayStatus) -> str:
        """How a stale day's shape differs from the declared one, in words."""
        written = (status.declaration or self.implied or "unknown")[:16]
        had, has = status.columns, self.columns
        if had is None or has is None:
            return f"written with shape {written}, declared now {self.current}"
        parts = []
        if sorted(set(has) - set(had)):
            parts.append("it lacks " + ", ".join(sorted(set(has) - set(had))))
        if sorted(set(had) - set(has)):
            parts.append("it still holds " + ", ".join(sorted(set(had) - set(has))))
        retyped = sorted(c for c in set(had) & set(has) if had[c] != has[c])
        if retyped:
            parts.append(
                "it wrote " + ", ".join(f"{c} as {had[c]} (now {has[c]})" for c in retyped)
            )
        if status.format != self.format:
            parts.append(f"it is {status.format}, declared {self.format} now")
        if not parts:
            parts.append("its filter, key or day column differs")
        return f"written with shape {written}, declared now {self.current}: " + "; ".join(parts)


def shape_of(spec: TableSpec, files: DailyFiles | None = None) -> Shape:
    """The shape ``spec``'s file set ``files`` (default: its first) is declared with."""
    files = file_of(spec, files)
    return Shape(
        files_fingerprint(spec, files),
        implied_files_fingerprint(spec, files),
        describe_files(spec, files)["columns"],
        files.format,
    )


def stale_days(folder: str | os.PathLike | Store, shape: Shape) -> list[DayStatus]:
    """The committed days of ``folder`` written with another shape than ``shape``'s (a
    look at every day's pointer and manifest: once per declaration change)."""
    return [s for s in describe_days(folder, expect=shape.format) if shape.stale(s)]


def committed_files(
    folder: str | os.PathLike | Store, name: str, shape: Shape | None = None
) -> list[dict]:
    """Every committed day of the file set ``name`` in ``folder``, as ``pipeline-assets
    files`` lists it: ``files``, ``day``, ``format``, ``rows``, ``sha256`` and ``path``
    (``url`` on an object store), plus ``stale: true`` for a day written with another
    shape than ``shape``'s. A run writing right now is waited for; a day not committed,
    or whose bytes do not match its manifest, is left out."""
    store = open_store(folder)
    expect = shape.format if shape is not None else "json"
    out = []
    for status in settled_statuses(store, known_days(store), expect=expect):
        if not status.committed:
            continue
        where = (
            {"path": str(store.path(status.file_name))}
            if isinstance(store, LocalStore)
            else {"url": f"{store.location}/{status.file_name}"}
        )
        out.append(
            {
                "files": name,
                "day": status.day,
                "format": status.format,
                "rows": status.rows,
                "sha256": status.sha256,
                **where,
                **({"stale": True} if shape is not None and shape.stale(status) else {}),
            }
        )
    return out


def _parse_day_bytes(status: DayStatus, name: str, rebuild: Callable[[str], str]):
    """A committed day's rows: a list of rows (JSON) or a ``pyarrow.Table`` (Parquet)."""
    day, data = status.day, status.data
    if status.format == "parquet":
        try:
            return read_parquet(data)
        except ValueError as exc:
            raise UncommittedDayError({day: str(exc)}, name=name, rebuild=rebuild) from None
    try:
        rows = json.loads(data)
    except ValueError:
        raise UncommittedDayError(
            {day: "the file is not valid JSON"}, name=name, rebuild=rebuild
        ) from None
    if not isinstance(rows, list):
        raise UncommittedDayError(
            {day: "the file does not hold a JSON array"}, name=name, rebuild=rebuild
        )
    return rows


def read_committed_days(
    folder: str | os.PathLike | Store,
    days: Iterable[str],
    *,
    wait_for_writer: bool | float = True,
    name: str | None = None,
    rebuild: Callable[[str], str] | None = None,
    shape: Shape | None = None,
) -> dict[str, list[dict] | pa.Table]:
    """Rows of each of ``days`` (a JSON day's as a list of rows, a Parquet day's as a
    ``pyarrow.Table`` of its typed columns), committed ones only; else one error naming
    every bad day of the file set ``name`` and the command that rebuilds it
    (``rebuild(day)``; both by default those of the code location's own ``orders``,
    whose files a reader that names none reads). With ``shape``, a committed day written
    with another shape is an error too (:class:`StaleDayError`): a reader never mixes two
    shapes unknowingly.

    With ``wait_for_writer`` a run that is writing right now is waited for instead of
    being reported as uncommitted (see :func:`settled_statuses`).
    """
    name = name or ORDERS.daily_files[0].name
    rebuild = rebuild or default_rebuild
    expect = shape.format if shape is not None else "json"
    statuses = settled_statuses(folder, days, wait_for_writer=wait_for_writer, expect=expect)
    bad = {s.day: s.reason for s in statuses if not s.committed}
    if bad:
        raise UncommittedDayError(bad, name=name, rebuild=rebuild)
    stale = {s.day: shape.why(s) for s in statuses if shape is not None and shape.stale(s)}
    if stale:
        raise StaleDayError(stale, name=name, rebuild=rebuild)
    return {s.day: _parse_day_bytes(s, name, rebuild) for s in statuses}


def read_committed_day(
    folder: str | os.PathLike | Store, day: str, *, wait_for_writer: bool | float = True
) -> list[dict] | pa.Table:
    """Rows of one committed day, or :class:`UncommittedDayError` naming it and the fix."""
    return read_committed_days(folder, [day], wait_for_writer=wait_for_writer)[day]
