"""The bytes of day files, manifests and pointers: deterministic JSON, and its sha256.

A day file's bytes have one builder per path, both generic over a declared table
(:class:`~pipeline_assets.core.spec.TableSpec`) and one of its
:class:`~pipeline_assets.core.spec.DailyFiles`:

- :func:`serialize_day`, from rows of Python values (what the writer writes);
- :class:`DayFileHashes`, the sha256 of the same bytes from Arrow tables of stored rows,
  built by Arrow's kernels (what ``verify`` checks a year of files with).

They agree byte for byte for every row either accepts; a property test holds them to it
(``pipeline_assets_tests/test_day_views.py``). ``orders`` is the default everywhere, and
its bytes and error messages are the ones it always had.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from decimal import Decimal

from ..spec import ORDERS, DailyFiles, TableSpec
from ..times import UTC
from ..types import DECIMAL_TEXT, ColumnType, TypeValueError
from .layout import DayFilesError, check_day

ROW_FIELDS = ORDERS.daily_files[0].columns  # orders' file: order_id, status, amount, updated_at

_AMOUNT_RE = re.compile(f"^{DECIMAL_TEXT}$")
_INT64 = (-(2**63), 2**63 - 1)
# The characters json.dumps(ensure_ascii=True) writes as they are: printable ASCII but the
# quote and the backslash. Text of only these is quoted as it is; the rest is escaped.
_PLAIN_TEXT = r"^[ !#-\[\]-~]*$"
_DAY_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"


def file_of(spec: TableSpec, files: DailyFiles | None) -> DailyFiles:
    """``files``, or the declaration's first daily file when None."""
    if files is not None:
        return files
    if not spec.daily_files:
        raise DayFilesError(f"table {spec.name} declares no daily files")
    return spec.daily_files[0]


def _legacy(spec: TableSpec) -> bool:
    """``orders`` keeps the words its messages always had (``order 3``, non-empty status)."""
    return spec.name == "orders" and spec.primary_key == ("order_id",)


def _row_label(spec: TableSpec, key: tuple) -> str:
    if _legacy(spec):
        return f"order {key[0]}"
    return "row " + ", ".join(f"{c}={v!r}" for c, v in zip(spec.primary_key, key, strict=True))


def _decimal_example(kind: ColumnType) -> str:
    if kind.scale is None:
        return "22.00"
    return "22" + ("." + "0" * kind.scale if kind.scale else "")


def _json_value(
    who: str, name: str, kind: ColumnType, nullable: bool, value: object, *, nonempty: bool = False
):
    """The value as the day file writes it, or a :class:`DayFilesError` naming it."""
    if value is None and nullable:
        return None
    k = kind.kind
    if k == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise DayFilesError(f"{who}: {name} {value!r} must be an integer")
        if not _INT64[0] <= value <= _INT64[1]:
            raise DayFilesError(f"{who}: {name} {value!r} does not fit in 64 bits")
        return value
    if k == "text":
        if nonempty and (not isinstance(value, str) or not value):
            raise DayFilesError(f"{who}: {name} {value!r} must be non-empty text")
        if not isinstance(value, str):
            raise DayFilesError(f"{who}: {name} {value!r} must be text")
        return value
    if k == "decimal":
        if isinstance(value, Decimal) and value.is_finite():
            value = format(value, "f")
        if not isinstance(value, str) or not _AMOUNT_RE.fullmatch(value):
            raise DayFilesError(
                f"{who}: {name} {value!r} must be exact decimal text such as "
                f'"{_decimal_example(kind)}" (never a float)'
            )
        if kind.scale is None:
            return value  # as the source spelled it
        try:
            return format(kind.parse(value, None), "f")  # S places
        except TypeValueError as exc:
            raise DayFilesError(f"{who}: {name}: {exc.reason}") from None
    if k == "float":
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise DayFilesError(f"{who}: {name} {value!r} must be a finite number")
        return float(value)
    if k == "boolean":
        if not isinstance(value, bool):
            raise DayFilesError(f"{who}: {name} {value!r} must be true or false")
        return value
    if k == "date":
        if isinstance(value, date) and not isinstance(value, datetime):
            return value.isoformat()
        if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value, re.ASCII):
            try:
                date.fromisoformat(value)
                return value
            except ValueError:
                pass
        raise DayFilesError(f"{who}: {name} {value!r} must be a date YYYY-MM-DD")
    # timestamp: written as given (the caller gives it in the pipeline's zone)
    if isinstance(value, datetime):
        value = value.isoformat()
    if not isinstance(value, str):
        raise DayFilesError(f"{who}: {name} {value!r} must be ISO-8601 text")
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise DayFilesError(f"{who}: {name} {value!r} is not ISO-8601") from None
    return value


def _key_order(who: str, name: str, kind: ColumnType, value) -> object:
    """How a key value sorts: integers by value, text by code point, dates as their ISO
    text, timestamps as instants (so one without an offset cannot be a key)."""
    if kind.kind != "timestamp":
        return value
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise DayFilesError(
            f"{who}: {name} {value!r} has no UTC offset; a key timestamp must name its instant"
        )
    return moment


def _row_for_file(
    day: str, row: Mapping, spec: TableSpec = ORDERS, files: DailyFiles | None = None
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
    who = f"day {day}, {_row_label(spec, tuple(out[k] for k in spec.primary_key))}"
    legacy = _legacy(spec)
    for name in files.columns:
        if name in out:
            continue
        column = spec.column(name)
        out[name] = _json_value(
            who, name, column.type, column.nullable, row[name], nonempty=legacy and name == "status"
        )
    return tuple(order), {name: out[name] for name in files.columns}


def serialize_day(
    day: str, rows: Iterable[Mapping], spec: TableSpec = ORDERS, files: DailyFiles | None = None
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
    check_day(day)
    files = file_of(spec, files)
    clean = sorted((_row_for_file(day, row, spec, files) for row in rows), key=lambda pair: pair[0])
    legacy = _legacy(spec)
    for (before, _), (after, row) in zip(clean, clean[1:], strict=False):
        if before == after:
            label = _row_label(spec, tuple(row[k] for k in spec.primary_key))
            raise DayFilesError(
                f"day {day}: {label} appears twice; a day holds each "
                f"{'order' if legacy else 'row'} once"
            )
    return dumps([row for _, row in clean])


class DayFileHashes:
    """The sha256 of the bytes :func:`serialize_day` gives each of ``days`` (day numbers:
    days since 1970-01-01), from Arrow tables of stored rows fed in primary-key order,
    batch after batch: the same bytes, built by Arrow's kernels and hashed as they come
    (nothing held but a hash per day), so ``verify`` checks a year of files at the speed
    of one scan.

    ``spec`` and ``files`` say which file (default: ``orders``' ``paid_orders``). Each
    table given to :meth:`add` holds, by column name, every column of the file and of its
    ``where``, as the warehouse stores them (:meth:`.types.ColumnType.stored`): integers
    as integers; text as text; decimals as exact text; floats as floats; booleans as
    booleans (or 0/1); dates as ``YYYY-MM-DD`` text (or Arrow dates); timestamps as
    canonical UTC text (or Arrow timestamps, naive ones read as UTC); NULL as null. Plus
    ``day``: the day the row belongs to in the pipeline's zone, as days since 1970-01-01
    (int32). Other columns are ignored. For ``orders``: ``order_id``, ``status``,
    ``amount``, ``updated_at`` (canonical UTC text) and ``day``.

    Each object's JSON text is built per column type, keys in sorted order as
    ``json.dumps(sort_keys=True)`` writes them; text that JSON escapes (quotes,
    backslashes, control characters, non-ASCII) is escaped by ``json.dumps`` itself,
    value by value, and floats are written by it too. A day holding a row this cannot
    vouch for (a value :func:`serialize_day` would refuse or write otherwise, such as an
    amount ``1e3``) gets no hash: the caller builds that day's bytes the slow way, and
    words the error.
    """

    def __init__(self, days, tz, spec: TableSpec = ORDERS, files: DailyFiles | None = None):
        import pyarrow as pa

        self.tz = tz
        self.spec = spec
        self.files = file_of(spec, files)
        self._hashes = {day: [hashlib.sha256(), 0] for day in days}
        self._wanted = pa.array(sorted(self._hashes), pa.int32())
        self._unsure: set[int] = set()
        filtered = [column for column, _ in self.files.where]
        self._needed = list(dict.fromkeys([*self.files.columns, *filtered]))

    def add(self, table) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        spec, files = self.spec, self.files
        slot = {name: f"c{i}" for i, name in enumerate(self._needed)}
        keep = pc.is_in(table["day"], value_set=self._wanted)
        for name, allowed in files.where:  # the view's rows: compared as stored
            kind = spec.column(name).type
            keep = pc.and_(keep, _allowed(_stored_array(table[name], kind)[0], kind, allowed))
        if not pc.any(keep).as_py():
            return
        table = table.filter(keep)
        columns, bad = {"day": table["day"]}, None
        for name in self._needed:
            array, wrong = _stored_array(table[name], spec.column(name).type)
            columns[slot[name]] = array
            bad = _or(bad, wrong)
        if bad is not None:
            columns["bad"] = bad
        rows = (
            pa.table(columns)
            .sort_by([("day", "ascending"), *((slot[k], "ascending") for k in spec.primary_key)])
            .combine_chunks()
        )
        bad = rows["bad"].combine_chunks() if bad is not None else None
        parts: list = []
        for i, name in enumerate(sorted(files.columns)):
            column = spec.column(name)
            parts.append(("{" if i == 0 else ",") + json.dumps(name) + ":")
            pieces, wrong = _json_text(
                rows[slot[name]].combine_chunks(), column.type, column.nullable, self.tz
            )
            parts.extend(pieces)
            bad = _or(bad, wrong)
        parts.append("}")
        merged: list = []
        for part in parts:
            if isinstance(part, str) and merged and isinstance(merged[-1], str):
                merged[-1] += part
            else:
                merged.append(part)
        text = pc.binary_join_element_wise(*merged, "")
        if bad is not None:
            bad = pc.fill_null(bad, True)
            if pc.any(bad).as_py():
                self._unsure |= set(pc.unique(rows["day"].filter(bad)).to_pylist())
        day = rows["day"].to_numpy()
        cut = np.flatnonzero(np.diff(day)) + 1
        starts = np.concatenate(([0], cut))
        offsets = pa.array(np.concatenate((starts, [len(day)])), pa.int32())
        lists = pa.ListArray.from_arrays(
            offsets, text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
        )
        counts = np.diff(offsets.to_numpy()).tolist()
        for start, count, joined in zip(
            starts.tolist(), counts, pc.binary_join(lists, ",").to_pylist(), strict=True
        ):
            state = self._hashes[int(day[start])]
            state[0].update(("," if state[1] else "[").encode("ascii") + joined.encode("ascii"))
            state[1] += count

    def result(self) -> dict[int, tuple[int, str]]:
        """``{day: (rows, sha256 hex)}`` for every day it can vouch for."""
        out = {}
        for day, (digest, rows) in self._hashes.items():
            if day in self._unsure:
                continue
            digest = digest.copy()
            digest.update(b"]\n" if rows else b"[]\n")
            out[day] = (rows, digest.hexdigest())
        return out


# --- the Arrow side, per column type --------------------------------------------------------


def _or(a, b):
    import pyarrow.compute as pc

    if a is None:
        return b
    return a if b is None else pc.or_(a, b)


def _stored_array(array, kind: ColumnType):
    """(the column in the one Arrow form it is written from, rows it cannot vouch for or
    None): integers int64; text, decimals and dates string; floats float64; booleans
    bool; timestamps UTC instants."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..columnar import INSTANT

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    t, k = array.type, kind.kind
    if k == "integer":
        return (array if t == pa.int64() else pc.cast(array, pa.int64())), None
    if k in ("text", "decimal"):
        if pa.types.is_decimal(t):
            array = pc.cast(array, pa.string())
        return (array if t == pa.string() else pc.cast(array, pa.string())), None
    if k == "float":
        return (array if t == pa.float64() else pc.cast(array, pa.float64())), None
    if k == "boolean":
        if pa.types.is_integer(t):
            return pc.not_equal(array, 0), pc.fill_null(
                pc.invert(pc.is_in(array, value_set=pa.array([0, 1], t))), False
            )
        return (array if t == pa.bool_() else pc.cast(array, pa.bool_())), None
    if k == "date":
        if pa.types.is_date(t):
            return pc.cast(array, pa.string()), None
        return (array if t == pa.string() else pc.cast(array, pa.string())), None
    if pa.types.is_timestamp(t):  # timestamp
        if t.tz is None:
            array = pc.cast(pc.cast(array, pa.timestamp("us")), INSTANT)
        return pc.cast(array, INSTANT), None
    if pa.types.is_null(t):
        return pc.cast(array, INSTANT), None
    text = pc.cast(array, pa.string())
    try:
        return pc.cast(text, INSTANT), None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        moments, wrong = [], []
        for value in text.to_pylist():
            try:
                moment = None if value is None else datetime.fromisoformat(value)
                ok = moment is None or moment.tzinfo is not None
            except ValueError:
                moment, ok = None, False
            moments.append(moment if ok else None)
            wrong.append(not ok)
        return pa.array(moments, INSTANT), pa.array(wrong, pa.bool_())


def _allowed(array, kind: ColumnType, allowed: tuple):
    """Which rows hold one of a ``where``'s values (compared as the warehouse stores them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = [v for v in allowed if v is not None]
    if kind.kind == "timestamp":
        values = [v.astimezone(UTC) for v in values]
    elif kind.kind in ("decimal", "date"):
        values = [kind.stored(v) for v in values]
    match = pc.fill_null(pc.is_in(array, value_set=pa.array(values, array.type)), False)
    if None in allowed:
        match = pc.or_(match, pc.is_null(array))
    return match


def _decimal_pattern(kind: ColumnType) -> str:
    """The stored text of a decimal that :func:`serialize_day` writes back unchanged."""
    if kind.scale is None:
        return _AMOUNT_RE.pattern
    whole = kind.precision - kind.scale
    integer = "0" if whole == 0 else f"(0|[1-9][0-9]{{0,{whole - 1}}})"
    fraction = rf"\.[0-9]{{{kind.scale}}}" if kind.scale else ""
    return f"^-?{integer}{fraction}$"


def _json_text(array, kind: ColumnType, nullable: bool, tz) -> tuple[list, object]:
    """(the pieces of each row's JSON value: literals and arrays, rows it cannot vouch
    for or None), for a column in the form :func:`_stored_array` gives."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..columnar import local_text

    k = kind.kind
    bad = None
    quoted = k in ("text", "decimal", "date", "timestamp")
    if k == "integer":
        text = pc.cast(array, pa.string())
    elif k == "text":
        text = array
        plain = pc.fill_null(pc.match_substring_regex(array, _PLAIN_TEXT), True)
        if not pc.all(plain).as_py():
            escape = pc.invert(plain)
            text = pc.binary_join_element_wise('"', array, '"', "")
            escaped = pa.array(
                [json.dumps(v) for v in array.filter(escape).to_pylist()], pa.string()
            )
            text, quoted = pc.replace_with_mask(text, escape, escaped), False
    elif k == "decimal":
        text = array
        bad = pc.invert(pc.fill_null(pc.match_substring_regex(array, _decimal_pattern(kind)), True))
    elif k == "float":
        values, wrong = [], []
        for v in array.to_pylist():
            ok = v is None or math.isfinite(v)
            values.append(json.dumps(v) if ok and v is not None else None)
            wrong.append(not ok)
        text, bad = pa.array(values, pa.string()), pa.array(wrong, pa.bool_())
    elif k == "boolean":
        text = pc.if_else(array, "true", "false")
    elif k == "date":
        text = array
        bad = _bad_days(array)
    else:
        text = local_text(array, tz)
    if array.null_count:
        if quoted:
            text, quoted = pc.binary_join_element_wise('"', text, '"', ""), False
        if not nullable:
            bad = _or(bad, pc.is_null(array))
        text = pc.fill_null(text, "null")
    if bad is not None and pc.any(bad).as_py():
        text = pc.if_else(bad, "null", text)  # the day is not vouched for: keep kernels quiet
    return (['"', text, '"'] if quoted else [text]), bad


def _bad_days(array):
    """Which ``YYYY-MM-DD`` texts are not a calendar day Python's ``date`` holds."""
    import pyarrow as pa
    import pyarrow.compute as pc

    form = pc.fill_null(
        pc.and_(
            pc.match_substring_regex(array, _DAY_TEXT), pc.invert(pc.starts_with(array, "0000"))
        ),
        True,
    )
    try:
        pc.cast(pc.if_else(form, array, "2000-01-01"), pa.date32())
        return pc.invert(form)
    except pa.ArrowInvalid:  # a day 30 of February: ask Python, value by value
        return pa.array([v is not None and not _is_day(v) for v in array.to_pylist()], pa.bool_())


def _is_day(text: str) -> bool:
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
        return False
    try:
        date.fromisoformat(text)
        return True
    except ValueError:
        return False


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
