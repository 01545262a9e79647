"""The bytes of day files, manifests and pointers: deterministic JSON, and its sha256.

A day file's bytes have one builder per path, both generic over a declared table
(:class:`~pipeline_assets.core.table.spec.TableSpec`) and one of its
:class:`~pipeline_assets.core.table.spec.DailyFiles`:

- :func:`serialize_day`, from rows of Python values (what the writer writes);
- :class:`~.hashes.DayFileHashes` (:mod:`.hashes`), the sha256 of the same bytes from
  Arrow tables of stored rows, built by Arrow's kernels (what ``verify`` checks a year of
  files with).

They agree byte for byte for every row either accepts; a property test holds them to it
(``pipeline_assets_tests/test_day_views.py``). ``orders``' bytes and error messages are
the ones it always had: its spec's ``legacy`` says how they name its rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

from ..errors import DayFilesError
from ..table.spec import DailyFiles, TableSpec
from ..table.types import ColumnType
from .layout import check_day


def file_of(spec: TableSpec, files: DailyFiles | None) -> DailyFiles:
    """``files``, or the declaration's first daily file when None."""
    if files is not None:
        return files
    if not spec.daily_files:
        raise DayFilesError(f"table {spec.name} declares no daily files")
    return spec.daily_files[0]


def row_label(spec: TableSpec, key: tuple) -> str:
    if spec.legacy is not None:  # order 3
        return spec.row_name(key)
    return "row " + ", ".join(f"{c}={v!r}" for c, v in zip(spec.primary_key, key, strict=True))


def _json_value(
    who: str, name: str, kind: ColumnType, nullable: bool, value: object, *, nonempty: bool = False
):
    """The value as the day file writes it (its kind's codec's rule), or a
    :class:`DayFilesError` naming it."""
    if value is None and nullable:
        return None
    if kind.codec.any_text and nonempty and (not isinstance(value, str) or not value):
        raise DayFilesError(f"{who}: {name} {value!r} must be non-empty text")
    return kind.codec.file_value(kind, value, who, name)


def _key_order(who: str, name: str, kind: ColumnType, value) -> object:
    """How a key value sorts: integers by value, text by code point, dates as their ISO
    text, timestamps as instants (so one without an offset cannot be a key)."""
    return kind.codec.file_sort_key(kind, value, who, name)


def _row_for_file(
    day: str, row: Mapping, spec: TableSpec, files: DailyFiles | None = None
) -> tuple[tuple, dict]:
    """(sort key, the row as the file writes it), or a :class:`DayFilesError`."""
    files = file_of(spec, files)
    if not isinstance(row, Mapping):
        raise DayFilesError(f"day {day}: a row must be a mapping, got {row!r}")
    keys, wanted = set(row), set(files.columns)
    if keys != wanted:
        missing, extra = sorted(wanted - keys), sorted(keys - wanted, key=str)
        raise DayFilesError(
            f"day {day}: row {dict(row)!r} must have exactly the fields "
            f"{', '.join(files.columns)} (missing: {missing or 'none'}, "
            f"unexpected: {extra or 'none'})"
        )
    out = {}
    order = []
    who = f"day {day}"
    for name in spec.primary_key:
        column = spec.column(name)
        out[name] = _json_value(who, name, column.type, column.nullable, row[name])
        order.append(_key_order(who, name, column.type, out[name]))
    who = f"day {day}, {row_label(spec, tuple(out[k] for k in spec.primary_key))}"
    nonblank = spec.legacy.nonblank if spec.legacy else ()
    for name in files.columns:
        if name in out:
            continue
        column = spec.column(name)
        out[name] = _json_value(
            who, name, column.type, column.nullable, row[name], nonempty=name in nonblank
        )
    return tuple(order), {name: out[name] for name in files.columns}


def serialize_day(
    day: str, rows: Iterable[Mapping], spec: TableSpec, files: DailyFiles | None = None
) -> bytes:
    """The bytes of a day file of ``files`` (default: the declaration's first daily file)
    of ``spec`` (default: ``orders``): rows sorted by the primary key; same rows → same
    bytes.

    Each row is a mapping of exactly the file's columns; each value of its declared type
    or its stored or JSON form: an integer; text; a decimal as a ``Decimal`` or exact text
    (plain ``decimal`` kept as spelled, ``decimal(P,S)`` written with S places); a finite
    float; a bool; a date or ``YYYY-MM-DD``; a timestamp as a ``datetime`` or ISO-8601
    text, written as given (give it in the pipeline's zone); None where the column is
    nullable. A row the file cannot hold exactly, or a key given twice, raises
    :class:`DayFilesError` naming the day, the row and the value.
    """
    return dumps(clean_rows(day, rows, spec, files))


def clean_rows(
    day: str, rows: Iterable[Mapping], spec: TableSpec, files: DailyFiles | None = None
) -> list[dict]:
    """The rows as a day file of ``files`` writes them, sorted by the primary key, or the
    :class:`DayFilesError` of the first the file cannot hold (see :func:`serialize_day`)."""
    check_day(day)
    files = file_of(spec, files)
    clean = sorted((_row_for_file(day, row, spec, files) for row in rows), key=lambda pair: pair[0])
    for (before, _), (after, row) in zip(clean, clean[1:], strict=False):
        if before == after:
            label = row_label(spec, tuple(row[k] for k in spec.primary_key))
            raise DayFilesError(
                f"day {day}: {label} appears twice; a day holds each {spec.say('one_row')} once"
            )
    return [row for _, row in clean]


def dumps(value: object) -> bytes:
    """Compact, key-sorted, ASCII JSON and a newline: the form of every file we write."""
    return (
        json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n"
    ).encode("ascii")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def json_object(name: str, data: bytes) -> dict:
    """The JSON object in ``data`` (the bytes of ``name``); ValueError when it is not one."""
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ValueError(
            f"{name.rpartition('/')[2]} is not valid JSON (truncated or corrupt)"
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"{name.rpartition('/')[2]} does not hold a JSON object")
    return value
