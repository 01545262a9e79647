"""The fast path of each column type: a whole Arrow column read by ``pyarrow.compute``.

:func:`fast_column` reads a column as a reader returns it (native or text) into its stored
form (:meth:`~pipeline_assets.core.table.types.ColumnType.stored`) and says which rows it vouches
for: integer keys, text, plain decimal text (a ``decimal(P,S)`` padded to S places),
``0``/``1``/``t``/``f``/ ``true``/``false`` and native booleans, plain floats, ``YYYY-MM-DD`` and
native dates, ISO-8601 timestamps with or without ``Z``/``±HH:MM`` and native timestamp columns. It
only ever vouches for what the exact parser accepts, with the same stored value; every other
row is left to the exact parser (:mod:`.checks`), which names it.
"""

from __future__ import annotations

import decimal
import re
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

from ..table.codecs.decimals import PLAIN_DECIMAL_TEXT
from ..table.codecs.plain import FALSE_WORDS, TRUE_WORDS
from ..table.types import ColumnType
from ..times.arrays import INSTANT, canonical_text, localize, zone_rules_hold

_KEY = r"^-?[0-9]+$"
# Plain positional decimals that format_decimal(parse_decimal(x)) writes back unchanged.
_AMOUNT = f"^{PLAIN_DECIMAL_TEXT}$"
_FLOAT = r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]{1,3})?$"
_DATE = r"[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_TIME = r"[T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
_BARE_DATE = f"^{_DATE}$"
_NAIVE = f"^{_DATE}{_TIME}$"
_AWARE = f"^{_DATE}{_TIME}(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
_EARLIEST = pa.scalar(datetime(1000, 1, 1, tzinfo=timezone.utc), INSTANT)
_FIRST_DAY = pa.scalar(-354285, pa.date32())  # 1000-01-01: four-digit years only
_LAST_DAY = pa.scalar(2932896, pa.date32())  # 9999-12-31


def fast_column(values, kind: ColumnType, zone: str) -> tuple[pa.Array, pa.Array, pa.Array | None]:
    """(stored, ok, moment): ``ok`` marks the rows the fast path vouches for (the values
    of the others are meaningless); ``moment`` is a timestamp column's instants or a date
    column's date32 days, None for the other types."""
    if kind.kind == "timestamp":
        instant, ok = _fast_timestamp(values, zone)
        return canonical_text(instant), ok, instant
    if kind.kind == "date":
        return _fast_date(values)
    stored, ok = _FAST[kind.kind](values, kind)
    return stored, ok, None


def text_column(values, what: str):
    """A text column as ``string``; any other type is not ``what`` (ArrowTypeError)."""
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise pa.ArrowTypeError(f"{what} of type {values.type}")
    return pc.cast(values, pa.string())


def _fast_integer(values, kind: ColumnType) -> tuple[pa.Array, pa.Array]:
    return _keys(values)


def _fast_text(values, kind: ColumnType) -> tuple[pa.Array, pa.Array]:
    """Text is taken as it is: not trimmed, blank allowed (ColumnType text)."""
    text = text_column(values, "text")
    return text, pc.is_valid(text)


def _fast_decimal(values, kind: ColumnType) -> tuple[pa.Array, pa.Array]:
    """Plain decimal text as it is; a ``decimal(P,S)`` within its precision, padded to S
    places (``1.1`` → ``1.10``) as ``format_decimal(quantize(...))`` writes it."""
    text = pc.utf8_trim_whitespace(text_column(values, "decimal"))
    if kind.precision is None:
        return text, pc.fill_null(pc.match_substring_regex(text, _AMOUNT), False)
    scale = kind.scale
    # the exact parser quantizes in Decimal's context, which holds `prec` digits in all
    room = min(kind.precision - scale, decimal.getcontext().prec - scale)
    if scale >= decimal.getcontext().prec:
        return text, pa.array([False] * len(text), pa.bool_())
    whole = f"(0|[1-9][0-9]{{0,{room - 1}}})" if room >= 1 else "0"
    places = rf"(\.[0-9]{{1,{scale}}})?" if scale else ""
    ok = pc.fill_null(pc.match_substring_regex(text, f"^-?{whole}{places}$"), False)
    if not scale:
        return text, ok
    dot = pc.find_substring(text, ".")
    places_now = pc.if_else(
        pc.less(dot, 0), -1, pc.subtract(pc.subtract(pc.binary_length(text), dot), 1)
    )
    missing = pc.if_else(ok, pc.subtract(scale, places_now), 0)  # scale + 1: no point yet
    pads = pa.array(["0" * i for i in range(scale + 1)] + ["." + "0" * scale], pa.string())
    return pc.binary_join_element_wise(text, pc.take(pads, missing), ""), ok


def _fast_float(values, kind: ColumnType) -> tuple[pa.Array, pa.Array]:
    if pa.types.is_floating(values.type) or pa.types.is_integer(values.type):
        number = pc.cast(values, pa.float64())
    else:
        text = pc.utf8_trim_whitespace(text_column(values, "float"))
        plain = pc.fill_null(pc.match_substring_regex(text, _FLOAT), False)
        number = pc.cast(pc.if_else(plain, text, "0"), pa.float64())
        number = pc.if_else(plain, number, pa.scalar(None, pa.float64()))
    return number, pc.fill_null(pc.is_finite(number), False)


def _fast_boolean(values, kind: ColumnType) -> tuple[pa.Array, pa.Array]:
    if pa.types.is_boolean(values.type):
        return values, pc.is_valid(values)
    if pa.types.is_integer(values.type):
        ok = pc.fill_null(pc.is_in(values, value_set=pa.array([0, 1], values.type)), False)
        return pc.not_equal(values, 0), ok
    word = pc.utf8_lower(pc.utf8_trim_whitespace(text_column(values, "boolean")))
    true = pc.fill_null(pc.is_in(word, value_set=pa.array(sorted(TRUE_WORDS))), False)
    false = pc.fill_null(pc.is_in(word, value_set=pa.array(sorted(FALSE_WORDS))), False)
    return true, pc.or_(true, false)


_FAST = {
    "integer": _fast_integer,
    "text": _fast_text,
    "decimal": _fast_decimal,
    "float": _fast_float,
    "boolean": _fast_boolean,
}


def _fast_date(values) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(``YYYY-MM-DD`` text, ok, date32) for a date column, native or text."""
    if pa.types.is_date(values.type):
        day = pc.cast(values, pa.date32())
        ok = pc.fill_null(
            pc.and_(pc.greater_equal(day, _FIRST_DAY), pc.less_equal(day, _LAST_DAY)), False
        )
        day = pc.if_else(ok, day, _FIRST_DAY)
        return pc.cast(day, pa.string()), ok, day
    text = pc.utf8_trim_whitespace(text_column(values, "date"))
    ok = pc.fill_null(pc.match_substring_regex(text, _BARE_DATE), False)
    # strptime rolls 2026-02-30 over to March: only a day that prints back as it was read
    # is one the calendar holds
    moment = pc.strptime(
        pc.if_else(ok, text, "2000-01-01"), format="%Y-%m-%d", unit="s", error_is_null=True
    )
    day = pc.cast(pc.fill_null(moment, pa.scalar(0, pa.timestamp("s"))), pa.date32())
    ok = pc.and_(ok, pc.fill_null(pc.equal(pc.cast(day, pa.string()), text), False))
    return text, ok, day


def _fast_timestamp(values, zone: str) -> tuple[pa.Array, pa.Array]:
    """(instant, ok) for a timestamp column of any type the readers produce."""
    instant, ok = _instants(values, zone)
    return in_range(instant, ok, zone)


def in_range(instant, ok, zone: str) -> tuple[pa.Array, pa.Array]:
    """Instants the text casts write back as they read them (four-digit years), and, in a
    zone other than UTC, where Arrow's zone rules are Python's."""
    instant = pc.if_else(ok, instant, _EARLIEST)  # rows not ok are dropped; keep kernels quiet
    ok = pc.and_(ok, pc.greater_equal(instant, _EARLIEST))  # %Y pads to 4 digits only
    if zone != "UTC":
        ok = pc.and_(ok, zone_rules_hold(instant))
    return instant, ok


def _keys(ids) -> tuple[pa.Array, pa.Array]:
    """(int64 keys, ok) for an integer key column of integers or integer text."""
    if pa.types.is_integer(ids.type):
        return pc.cast(pc.fill_null(ids, 0), pa.int64()), pc.is_valid(ids)
    if pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type):
        text = pc.utf8_trim_whitespace(ids)
        ok = pc.fill_null(pc.match_substring_regex(text, _KEY), False)
        return pc.cast(pc.if_else(ok, text, "0"), pa.int64()), ok
    raise pa.ArrowTypeError(f"an integer column of type {ids.type}")


def keys_of(ids) -> pa.Array:
    """The integer keys of an integer key column; null where a value is no integer key
    (such a row is refused by validation, so it can never be an order the warehouse holds).
    """
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    try:
        keys, ok = _keys(ids)
    except pa.ArrowInvalid:  # an integer text too large for 64 bits: no key either
        return pa.array([_key_or_none(v) for v in ids.to_pylist()], pa.int64())
    return pc.if_else(ok, keys, pa.scalar(None, pa.int64()))


def _key_or_none(value) -> int | None:
    try:
        key = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return key if -(2**63) <= key < 2**63 else None


def _instants(column, zone: str) -> tuple[pa.Array, pa.Array]:
    """(instant, ok) for a timestamp column of any type the readers produce."""
    kind = column.type
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        ok = pc.is_valid(column)
        return pc.cast(pc.cast(column, pa.timestamp("us", tz=kind.tz)), INSTANT), ok
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        naive = pc.cast(column, pa.timestamp("us"))
        instant, ok = localize(naive, zone)
        return instant, pc.and_(ok, pc.is_valid(column))
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise pa.ArrowTypeError(f"a change stamp of type {kind}")
    uniform = _uniform_text(pc.cast(column, pa.string()), zone)
    if uniform is not None:
        return uniform
    text = pc.utf8_trim_whitespace(pc.cast(column, pa.string()))
    aware = pc.fill_null(pc.match_substring_regex(text, _AWARE), False)
    naive_ok = pc.fill_null(
        pc.or_(pc.match_substring_regex(text, _NAIVE), pc.match_substring_regex(text, _BARE_DATE)),
        False,
    )
    # Arrow's ISO-8601 cast checks the calendar (2026-02-30 fails): then the whole batch
    # goes to the exact parser, which names the row.
    from_aware = pc.cast(pc.if_else(aware, text, "2000-01-01T00:00:00Z"), INSTANT)
    local, ok_local = localize(
        pc.cast(pc.if_else(naive_ok, text, "2000-01-01"), pa.timestamp("us")), zone
    )
    instant = pc.if_else(aware, from_aware, local)
    return instant, pc.or_(aware, pc.and_(naive_ok, ok_local))


def _uniform_text(text: pa.Array, zone: str) -> tuple[pa.Array, pa.Array] | None:
    """The common case without classifying row by row: every value has an offset, or
    none has; one ISO-8601 cast reads them all. None when that does not hold.

    Of the texts Arrow's cast reads, only the hour-only forms (``2026-01-25T03``,
    ``…T03Z``) are refused by the exact parser, which needs ``HH:MM``: a batch with a
    timestamp lacking ``:`` after its hour is not uniform.
    """
    if text.null_count or len(text) == 0:
        return None
    raw = text.cast(pa.binary())
    lengths = pc.binary_length(raw)
    clock = pc.equal(pc.binary_slice(raw, 13, 14), b":")
    if not pc.all(pc.or_(pc.equal(lengths, 10), clock)).as_py():
        return None

    def aware():
        return pc.cast(text, INSTANT), pc.is_valid(text)

    def naive():
        return localize(pc.cast(text, pa.timestamp("us")), zone)

    # each cast takes only its own form; the first value says which to try first (a cast
    # that fails costs as much as one that reads the batch: 0.2 s per 100,000 stamps)
    first = text[0].as_py().rstrip()
    offset = first.endswith("Z") or re.search(r"[+-][0-9]{2}:[0-9]{2}$", first)
    for cast in (aware, naive) if offset else (naive, aware):
        try:
            return cast()
        except pa.ArrowInvalid:
            pass
    return None
