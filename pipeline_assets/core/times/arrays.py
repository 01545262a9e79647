"""Instants and days of whole Arrow arrays: the rules of :mod:`~pipeline_assets.core.times`
(``canonical``, ``day_of``, ``isoformat`` in a zone), vectorized.

Arrow's zone rules do the work between 1970-01-02 and 2037, where they agree with
Python's zoneinfo (past 2037 Arrow stops applying daylight saving time, where zoneinfo
extends the rule); an instant outside them takes the Python rule itself, so every result
is the one :mod:`~pipeline_assets.core.times` gives.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.compute as pc

from . import EPOCH, day_of

INSTANT = pa.timestamp("us", tz="UTC")
# Arrow's zone rules agree with Python's zoneinfo between these instants; outside them a
# zone other than UTC is left to Python.
_ZONE_RULES_FROM = datetime(1970, 1, 2, tzinfo=timezone.utc)
_ZONE_RULES_UNTIL = datetime(2037, 1, 1, tzinfo=timezone.utc)


def zone_name(tz: tzinfo) -> str | None:
    """The IANA name Arrow needs for ``tz``; None for a zone Arrow cannot be given."""
    if tz is timezone.utc:
        return "UTC"
    if isinstance(tz, ZoneInfo) and tz.key:
        return tz.key
    return None


def zone_rules_hold(instant) -> pa.Array:
    """Which instants Arrow's zone rules give as Python's do."""
    return pc.and_(
        pc.greater_equal(instant, pa.scalar(_ZONE_RULES_FROM, INSTANT)),
        pc.less(instant, pa.scalar(_ZONE_RULES_UNTIL, INSTANT)),
    )


def localize(naive: pa.Array, zone: str) -> tuple[pa.Array, pa.Array]:
    """Wall clocks in ``zone`` → instants, as ``datetime.replace(tzinfo=zone)`` reads them.

    A repeated wall clock (DST ends) is its first occurrence, as Python's ``fold=0``; a
    wall clock that does not exist (DST starts) is not vouched for (the exact parser
    reads it), which the round trip back to local time detects.
    """
    if zone == "UTC":
        return pc.cast(pc.cast(naive, pa.timestamp("us", tz="UTC")), INSTANT), pc.is_valid(naive)
    local = pc.assume_timezone(naive, timezone=zone, ambiguous="earliest", nonexistent="earliest")
    back = pc.local_timestamp(local)
    return pc.cast(local, INSTANT), pc.fill_null(pc.equal(back, naive), False)


def canonical_text(instant: pa.Array) -> pa.Array:
    """:func:`~pipeline_assets.core.times.canonical` of every instant:
    ``2026-01-25T03:00:00.000000+00:00``.

    Built from Arrow's date and time-of-day casts (``strftime`` is ~50x slower).
    """
    wall = pc.cast(instant, pa.timestamp("us"))  # the UTC wall clock
    day = pc.cast(pc.cast(wall, pa.date32()), pa.string())
    clock = pc.cast(pc.cast(wall, pa.time64("us")), pa.string())  # HH:MM:SS.ffffff
    return pc.binary_join_element_wise(pc.binary_join_element_wise(day, clock, "T"), "+00:00", "")


def local_text(instant: pa.Array, tz: tzinfo) -> pa.Array:
    """``moment.astimezone(tz).isoformat()`` of every instant, as Python writes it:
    ``2026-01-25T04:00:00+01:00``, the microseconds only when they are not zero. The form
    a day file shows a timestamp in
    (:func:`~pipeline_assets.core.daily_files.paid.paid_orders_by_day`); Arrow's zone rules where
    they agree with Python's, ``isoformat`` itself for the rest."""
    zone = zone_name(tz)
    if isinstance(instant, pa.ChunkedArray):
        instant = instant.combine_chunks()
    hold = pc.fill_null(zone_rules_hold(instant), True) if zone not in (None, "UTC") else None
    if zone is None or (hold is not None and not pc.any(hold).as_py()):
        return pa.array(
            [
                None if moment is None else moment.astimezone(tz).isoformat()
                for moment in instant.to_pylist()
            ],
            pa.string(),
        )
    if zone == "UTC":
        wall, offset = pc.cast(instant, pa.timestamp("us")), pa.scalar("+00:00")
    else:
        safe = pc.if_else(hold, instant, pa.scalar(_ZONE_RULES_FROM, INSTANT))
        wall = pc.local_timestamp(pc.cast(safe, pa.timestamp("us", tz=zone)))
        shift = pc.subtract(
            pc.cast(pc.cast(wall, pa.timestamp("us", tz="UTC")), pa.int64()),
            pc.cast(safe, pa.int64()),
        )  # the zone's offset, in µs
        shifts = pc.unique(shift).to_pylist()
        names = pa.array([_offset_text(us) for us in shifts], pa.string())
        offset = pc.take(names, pc.index_in(shift, value_set=pa.array(shifts, pa.int64())))
    day = pc.cast(pc.cast(wall, pa.date32()), pa.string())
    clock = pc.replace_substring_regex(
        pc.cast(pc.cast(wall, pa.time64("us")), pa.string()), r"\.000000$", ""
    )
    text = pc.binary_join_element_wise(day, "T", clock, offset, "")
    if hold is None or pc.all(hold).as_py():
        return text
    exact = pa.array(
        [
            moment.astimezone(tz).isoformat()
            for moment in instant.filter(pc.invert(hold)).to_pylist()
        ],
        pa.string(),
    )
    return pc.replace_with_mask(text, pc.invert(hold), exact)


def _offset_text(microseconds: int) -> str:
    """A UTC offset as ``isoformat`` ends with it: ``+01:00``, ``-03:30``."""
    zone = timezone(timedelta(microseconds=microseconds))
    return datetime(2000, 1, 1, tzinfo=zone).isoformat()[19:]


def day_numbers(instant: pa.Array, tz: tzinfo) -> pa.Array:
    """The day of every instant in ``tz``, as days since 1970-01-01 (int32): the rule of
    :func:`~pipeline_assets.core.times.day_of`, for a whole array. Arrow's zone rules do the work
    where they agree with Python's; the instants outside them take ``day_of`` itself."""
    zone = zone_name(tz)
    if isinstance(instant, pa.ChunkedArray):
        instant = instant.combine_chunks()
    if zone is None:
        return pa.array(
            [
                None if moment is None else (day_of(moment, tz) - EPOCH).days
                for moment in instant.to_pylist()
            ],
            pa.int32(),
        )
    if zone == "UTC":
        return zone_day_numbers(instant, zone)
    hold = pc.fill_null(zone_rules_hold(instant), True)
    if pc.all(hold).as_py():
        return zone_day_numbers(instant, zone)
    exact = pa.array(
        [
            (day_of(moment, tz) - EPOCH).days
            for moment in instant.filter(pc.invert(hold)).to_pylist()
        ],
        pa.int32(),
    )
    fast = zone_day_numbers(pc.if_else(hold, instant, pa.scalar(_ZONE_RULES_FROM, INSTANT)), zone)
    return pc.replace_with_mask(fast, pc.invert(hold), exact)


def zone_day_numbers(instant: pa.Array, zone: str) -> pa.Array:
    """:func:`day_numbers` by Arrow's rules of the IANA ``zone`` alone: right only where
    :func:`zone_rules_hold` (always, in UTC)."""
    if zone == "UTC":
        wall = pc.cast(instant, pa.timestamp("us"))
    else:
        wall = pc.local_timestamp(pc.cast(instant, pa.timestamp("us", tz=zone)))
    return pc.cast(pc.cast(wall, pa.date32()), pa.int32())


def day_text(number: int) -> str:
    """A day number (days since 1970-01-01) as ``YYYY-MM-DD``."""
    return (EPOCH + timedelta(days=number)).isoformat()


def days_of(stamps: list[str], tz: tzinfo) -> set[str]:
    """The days (in ``tz``) of canonical UTC texts, as the warehouse stores them."""
    if not stamps:
        return set()
    instants = pc.cast(pa.array(stamps, pa.string()), INSTANT)
    return {day_text(n) for n in pc.unique(day_numbers(instants, tz)).to_pylist()}
