"""Whole Arrow columns read as days and instants, as the ``date`` and ``timestamp``
codecs' exact parsers read each value: ISO-8601 with or without ``Z``/``±HH:MM``, and a
driver's native dates and timestamps. Only what the exact parser accepts, with the same
result, is vouched for; every other row is left to it."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

from ...times.arrays import INSTANT, localize, zone_rules_hold
from .base import text_column

_DATE = r"[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_TIME = r"[T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
_BARE_DATE = f"^{_DATE}$"
_NAIVE = f"^{_DATE}{_TIME}$"
_AWARE = f"^{_DATE}{_TIME}(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
_EARLIEST = pa.scalar(datetime(1000, 1, 1, tzinfo=timezone.utc), INSTANT)
_FIRST_DAY = pa.scalar(-354285, pa.date32())  # 1000-01-01: four-digit years only
_LAST_DAY = pa.scalar(2932896, pa.date32())  # 9999-12-31


def days(values) -> tuple[pa.Array, pa.Array, pa.Array]:
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


def in_range(instant, ok, zone: str) -> tuple[pa.Array, pa.Array]:
    """Instants the text casts write back as they read them (four-digit years), and, in a
    zone other than UTC, where Arrow's zone rules are Python's."""
    instant = pc.if_else(ok, instant, _EARLIEST)  # rows not ok are dropped; keep kernels quiet
    ok = pc.and_(ok, pc.greater_equal(instant, _EARLIEST))  # %Y pads to 4 digits only
    if zone != "UTC":
        ok = pc.and_(ok, zone_rules_hold(instant))
    return instant, ok


def instants(column, zone: str) -> tuple[pa.Array, pa.Array]:
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
