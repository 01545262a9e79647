"""``date`` (a calendar day with no zone) and ``timestamp`` (an instant: without an
offset it is read in the pipeline's zone, a bare date is midnight there)."""

from __future__ import annotations

import re
from datetime import date, datetime

import sqlalchemy as sa

from ...errors import DayFilesError, TimeValueError, TypeValueError
from ...times import UTC, canonical, day_start, from_canonical, parse_day, to_instant
from .base import Codec

_DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DAY_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"


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
    if not re.fullmatch(_DAY_TEXT, text):
        return False
    try:
        date.fromisoformat(text)
        return True
    except ValueError:
        return False


class _Moment(Codec):
    """What a day and an instant share: how a source's column of one is read."""

    key = True

    def source_select(self, t, name, col_type, stored, dialect):
        if dialect == "mysql":
            if stored == "timestamptz":  # a MySQL TIMESTAMP: UTC, in the session's zone
                return f"CONCAT(CAST({name} AS CHAR), '+00:00')"
        elif stored != "text":
            return None  # a native date or timestamp
        return super().source_select(t, name, col_type, stored, dialect)


class DateCodec(_Moment):
    """A calendar day with no zone, stored and written as ``YYYY-MM-DD``."""

    kind, is_day = "date", True

    def parse_array(self, t, values, zone):
        """The day's date32 as its moment."""
        from .instants import days

        return days(values)

    def stamp_arrays(self, t, moment, zone):
        """The day's midnight in the zone, and the day itself."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from ...times.arrays import localize
        from .instants import in_range

        instant, ok = localize(pc.cast(moment, pa.timestamp("us")), zone)
        instant, ok = in_range(instant, ok, zone)
        return instant, pc.cast(moment, pa.int32()), ok

    def widen_value(self, t, other, tz):
        """YYYY-MM-DD -> the canonical instant of its midnight in ``tz``."""
        return lambda day: canonical(day_start(parse_day(day), tz))

    def parse(self, t, value, tz):
        if isinstance(value, datetime):
            if value.time() != datetime.min.time() or value.tzinfo is not None:
                raise TypeValueError(f"{value!r} is a timestamp, not a date")
            return value.date()
        if isinstance(value, date):
            return value
        if isinstance(value, str):
            text = value.strip()
            if _DAY_RE.fullmatch(text):
                try:
                    return date.fromisoformat(text)
                except ValueError as exc:
                    raise TypeValueError(f"{value!r} is not a valid day: {exc}") from None
        raise TypeValueError(f"{value!r} is not a date in the form YYYY-MM-DD")

    def stored(self, t, value):
        return value.isoformat()

    def to_json(self, t, value, tz):
        return value.isoformat()

    def sql_type(self, t, *, rowid=False):
        return sa.String(10)

    def file_value(self, t, value, who, name):
        if isinstance(value, date) and not isinstance(value, datetime):
            return value.isoformat()
        if isinstance(value, str) and _is_day(value):
            return value
        raise DayFilesError(f"{who}: {name} {value!r} must be a date YYYY-MM-DD")

    def widens_to(self, t, other):
        return other.kind == "timestamp"

    def file_text(self, t, array, tz):
        return array, _bad_days(array), True

    def parquet_type(self, t):
        import pyarrow as pa

        return pa.date32()

    def parquet_array(self, t, array):
        """The day as a date32; text that is no calendar day is a row it cannot hold."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if pa.types.is_date32(array.type):
            return array, None
        bad = _bad_days(array)
        return pc.cast(pc.if_else(bad, None, array), pa.date32()), bad


class TimestampCodec(_Moment):
    """An instant: stored as canonical UTC text (which sorts as it compares), written in
    the pipeline's zone."""

    kind, is_instant = "timestamp", True

    def parse_array(self, t, values, zone):
        """The instants as the moment."""
        from ...times.arrays import canonical_text
        from .instants import in_range, instants

        instant, ok = in_range(*instants(values, zone), zone)
        return canonical_text(instant), ok, instant

    def stamp_arrays(self, t, moment, zone):
        from ...times.arrays import zone_day_numbers

        return moment, zone_day_numbers(moment, zone), None

    def file_sort_key(self, t, value, who, name):
        """As an instant: one without an offset cannot be a key."""
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            raise DayFilesError(
                f"{who}: {name} {value!r} has no UTC offset; a key timestamp must name its instant"
            )
        return moment

    def file_text(self, t, array, tz):
        """``isoformat`` in the pipeline's zone, as the writer gives it."""
        from ...times.arrays import local_text

        return local_text(array, tz), None, True

    def parquet_type(self, t):
        from ...times.arrays import INSTANT

        return INSTANT  # microseconds, adjusted to UTC

    def file_array(self, t, array):
        """UTC instants (a naive driver timestamp read as UTC); text that is no instant
        with an offset is a row it cannot vouch for."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from ...times.arrays import INSTANT as instant

        kind = array.type
        if pa.types.is_timestamp(kind):
            if kind.tz is None:
                array = pc.cast(pc.cast(array, pa.timestamp("us")), instant)
            return pc.cast(array, instant), None
        if pa.types.is_null(kind):
            return pc.cast(array, instant), None
        text = pc.cast(array, pa.string())
        try:
            return pc.cast(text, instant), None
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
            return pa.array(moments, instant), pa.array(wrong, pa.bool_())

    def parse(self, t, value, tz):
        try:
            return to_instant(value, tz).astimezone(UTC)
        except TimeValueError as exc:
            raise TypeValueError(str(exc)) from None

    def stored(self, t, value):
        return canonical(value)

    def from_stored(self, t, value, tz):
        if isinstance(value, str):
            return from_canonical(value)
        return self.parse(t, value, tz)

    def to_json(self, t, value, tz):
        return value.astimezone(tz).isoformat()

    def arrow_stored(self, t, value):
        return value.astimezone(UTC)  # an instant column

    def sql_type(self, t, *, rowid=False):
        return sa.String(32)

    def file_value(self, t, value, who, name):
        """Written as given (the caller gives it in the pipeline's zone)."""
        if isinstance(value, datetime):
            value = value.isoformat()
        if not isinstance(value, str):
            raise DayFilesError(f"{who}: {name} {value!r} must be ISO-8601 text")
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise DayFilesError(f"{who}: {name} {value!r} is not ISO-8601") from None
        return value
