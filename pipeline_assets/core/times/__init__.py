"""Time rules: every form of ``updated_at`` becomes one timezone-aware instant.

The source may hold a bare date (``2026-01-25``), a timestamp with or without an
offset, or a native DATE/TIMESTAMP column. A timestamp without offset is read in the
pipeline's time zone, and a bare date means midnight of that day in the same zone, so
it always belongs to that day whatever the zone. Values are compared as instants,
never as strings.

- :mod:`.arrays`: the same rules for whole Arrow arrays (instants, days, local text).
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import TimeValueError

UTC = timezone.utc
EPOCH = date(1970, 1, 1)  # day numbers (Arrow's date32) count from here

_DATE_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_TIMESTAMP_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
    r"\s*(?:(Z|z)|([+-])(\d{2})(?::?(\d{2}))?)?"
)


def utc_now() -> datetime:
    """The wall clock, in UTC: the default clock of the edges (CLI, Dagster layer), which
    pass it down as ``now``; nothing below them reads the time."""
    return datetime.now(UTC)


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``, or an error saying how to fix the setting."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise TimeValueError(
            f"unknown time zone {name!r}: set PIPELINE_TIMEZONE to an IANA name "
            "such as 'UTC' or 'America/New_York'"
        ) from exc


def to_instant(value: object, tz: tzinfo) -> datetime:
    """Normalize a date, a timestamp (aware or naive) or ISO-8601 text to an aware datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=tz)
    if isinstance(value, date):
        return datetime.combine(value, time(0), tzinfo=tz)
    if isinstance(value, str):
        return _parse_text(value.strip(), tz)
    raise TimeValueError(f"{value!r} is not a date or timestamp")


def _parse_text(text: str, tz: tzinfo) -> datetime:
    try:
        match = _DATE_RE.fullmatch(text)
        if match:
            return datetime(*map(int, match.groups()), tzinfo=tz)
        match = _TIMESTAMP_RE.fullmatch(text)
        if not match:
            raise TimeValueError(
                f"{text!r} is not an ISO-8601 date (2026-01-25) or timestamp "
                "(2026-01-25T03:00:00, optionally with an offset such as +00:00 or Z)"
            )
        y, mo, d, h, mi, s, frac, zulu, sign, oh, om = match.groups()
        micro = int((frac or "0")[:6].ljust(6, "0"))
        if zulu:
            zone_ = UTC
        elif sign:
            offset = timedelta(hours=int(oh), minutes=int(om or 0))
            if offset >= timedelta(hours=24):
                raise TimeValueError(f"{text!r} has an offset of 24 hours or more")
            zone_ = timezone(-offset if sign == "-" else offset)
        else:
            zone_ = tz
        return datetime(int(y), int(mo), int(d), int(h), int(mi), int(s or 0), micro, zone_)
    except ValueError as exc:  # day 32, hour 25 ...
        if isinstance(exc, TimeValueError):
            raise
        raise TimeValueError(f"{text!r} is not a valid date or time: {exc}") from exc


def canonical(instant: datetime) -> str:
    """Fixed-width UTC text (``2026-01-25T03:00:00.000000+00:00``): sorts as it compares."""
    if instant.tzinfo is None:
        raise TimeValueError(f"{instant!r} has no time zone")
    return instant.astimezone(UTC).isoformat(timespec="microseconds")


def from_canonical(text: str) -> datetime:
    """Inverse of :func:`canonical`."""
    return datetime.fromisoformat(text)


def day_of(instant: datetime, tz: tzinfo) -> date:
    """The day an instant belongs to in the pipeline's time zone."""
    return instant.astimezone(tz).date()


def day_start(day: date, tz: tzinfo) -> datetime:
    """Midnight at the start of ``day`` in ``tz``."""
    return datetime.combine(day, time(0), tzinfo=tz)


def day_end(day: date, tz: tzinfo) -> datetime:
    """The end of ``day`` in ``tz``: the midnight that starts the next day, its later
    occurrence when the clocks repeat it. Where the clocks go back across midnight (St.
    John's before 2011: at 00:01 to 23:01) the day's last hour comes after the next day's
    first minute, so ``[day_start(first), day_end(last))`` holds every instant of the days
    ``first``…``last`` (and that minute: a reader keeps the rows by their day)."""
    midnight = datetime.combine(day + timedelta(days=1), time(0), tzinfo=tz)
    return max(midnight, midnight.replace(fold=1), key=lambda m: m.astimezone(timezone.utc))


def whole_days(
    start: datetime | None, end: datetime | None, tz: tzinfo
) -> tuple[date | None, date | None]:
    """The first and last day (in ``tz``) that ``[start, end)`` holds whole, from midnight
    to midnight; None for an open side. ``first > last`` when it holds no whole day."""
    first = last = None
    if start is not None:
        first = day_of(start, tz)
        if day_start(first, tz) < start:
            first += timedelta(days=1)
    if end is not None:
        last = day_of(end, tz)
        if day_start(last + timedelta(days=1), tz) > end:
            last -= timedelta(days=1)
    return first, last


def parse_day(text: str) -> date:
    """A ``YYYY-MM-DD`` day, or an error naming the text."""
    if not _DATE_RE.fullmatch(text.strip()):
        raise TimeValueError(f"{text!r} is not a day in the form YYYY-MM-DD")
    try:
        return date.fromisoformat(text.strip())
    except ValueError as exc:
        raise TimeValueError(f"{text!r} is not a valid day: {exc}") from exc


_RELATIVE_RE = re.compile(
    r"(today|yesterday|tomorrow|([+-])(\d{1,4})d)"
    r"(?:[Tt ]+(\d{1,2}):(\d{2})(?::(\d{2}))?)?",
    re.IGNORECASE,
)
_NAMED_OFFSETS = {"today": 0, "yesterday": -1, "tomorrow": 1}


def resolve_relative(text: str, today: date) -> str:
    """A day relative to ``today`` as ISO-8601 text; any other text comes back unchanged.

    ``today``, ``yesterday``, ``tomorrow`` and ``-2d``/``+1d`` (days from today) give a
    date (``2026-01-25``); each may be followed by a time of day (``yesterday 20:00``,
    ``-2d 09:30:15``), which gives a timestamp without offset (``2026-01-24T20:00:00``),
    read in the pipeline's time zone like any other. ``today`` comes from the caller's
    clock, in that zone: this function never reads the wall clock.
    """
    stripped = text.strip()
    match = _RELATIVE_RE.fullmatch(stripped)
    if not match:
        return text
    word, sign, count, hour, minute, second = match.groups()
    if sign:
        offset = int(count) * (-1 if sign == "-" else 1)
    else:
        offset = _NAMED_OFFSETS[word.lower()]
    day = today + timedelta(days=offset)
    if hour is None:
        return day.isoformat()
    try:
        moment = time(int(hour), int(minute), int(second or 0))
    except ValueError as exc:
        raise TimeValueError(f"{stripped!r} has no valid time of day: {exc}") from None
    return datetime.combine(day, moment).isoformat(timespec="seconds")
