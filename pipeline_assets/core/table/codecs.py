"""One codec per column kind: the one place that says, for its kind, how a source value
is read and checked, how the warehouse stores it (and its SQL type), how it is read
back, how a day file writes it, and which stored kind may become which.

:class:`~.types.ColumnType` (a declared type: its kind, and a ``decimal(P,S)``'s
precision and scale) asks :data:`CODECS` for its kind's codec; every method takes that
type first (``t``), for the precision and scale. A new kind is a new codec; a new thing
done with every value (a file format, a cursor kind) is a new method here, not a switch
over kinds in the modules that use it.

The rules that matter: exact numbers are never binary floats (``decimal`` keeps the
source's spelling, ``"7.000"``, as ``orders.amount`` always has; ``decimal(P,S)`` is
checked against its precision and scale and written with ``S`` places; a float reaching
a decimal column has lost exactness and is refused). ``float`` is finite. ``timestamp`` is
an instant (without an offset it is read in the pipeline's zone; a bare date is midnight
there); ``date`` a day with no zone. ``integer`` is 64-bit; ``boolean`` takes what
databases store for one (``0``/``1``, ``t``/``f``, ``true``/``false``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import date, datetime, tzinfo
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Decimal, InvalidOperation, localcontext

import sqlalchemy as sa

from ..errors import DayFilesError, TimeValueError, TypeValueError
from ..times import UTC, canonical, from_canonical, to_instant

# The one pattern of an exact decimal as text: what the source may spell, what a day file
# and the warehouse hold. An optional sign, digits, optional fraction; no exponent.
DECIMAL_TEXT = r"[+-]?\d+(?:\.\d+)?"
# Its plain subset: the texts :func:`format_decimal` writes back unchanged (no ``+``, no
# leading zeros). Vectorized readers take these as they are and leave the rest to parse.
PLAIN_DECIMAL_TEXT = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?"
_DECIMAL_RE = re.compile(DECIMAL_TEXT)
_FILE_DECIMAL_RE = re.compile(f"^{DECIMAL_TEXT}$")
_DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
INT64 = (-(2**63), 2**63 - 1)
TRUE_WORDS = frozenset({"1", "t", "true", "y", "yes"})
FALSE_WORDS = frozenset({"0", "f", "false", "n", "no"})


def parse_decimal(value: object) -> Decimal:
    """An exact decimal from text, an integer or a ``Decimal``; the scale is kept, so
    ``"40.00"`` writes back as ``"40.00"``. Floats, booleans and exponents are refused."""
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise TypeValueError(f"{value!r} is not a finite number")
        return value
    if isinstance(value, (bool, float)):  # money's words for both, as they always were
        raise TypeValueError(f"{value!r} is a binary float, not an exact decimal")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, str) and _DECIMAL_RE.fullmatch(value.strip()):
        return Decimal(value.strip())
    raise TypeValueError(f"{value!r} is not a decimal number such as 40.00")


def format_decimal(value: Decimal) -> str:
    """Plain positional text: ``Decimal("40.00")`` → ``"40.00"`` (no exponent)."""
    return format(value, "f")


class Codec:
    """What the pipeline does with a value of one kind. The defaults are those of a value
    kept as it is (an integer, a float, a boolean, text)."""

    kind = ""
    numeric = False  # a total may sum it
    key = False  # it may be part of a primary key (an exact, orderable value)

    def parse(self, t, value: object, tz: tzinfo | None):
        """The value as the pipeline holds it, or :class:`TypeValueError`; ``value`` is
        never None here (NULL is the declaration's business)."""
        raise NotImplementedError

    def stored(self, t, value):
        """The value as the warehouse keeps it (not None)."""
        return value

    def from_stored(self, t, value, tz: tzinfo):
        """The inverse of :meth:`stored`, for a value read back from the warehouse (a
        SQLite 0/1 for a boolean, a driver's own ``date`` or ``datetime``); not None."""
        return self.parse(t, value, tz)

    def to_json(self, t, value, tz: tzinfo):
        """The value as a day file writes it, from the value as the pipeline holds it."""
        return value

    def sql_type(self, t, *, rowid: bool = False) -> sa.types.TypeEngine:
        """The SQLAlchemy type of a stored column (``rowid``: the single integer key)."""
        return sa.Text()

    def file_value(self, t, value, who: str):
        """A value handed to a day file as the file writes it (``who``: the row and
        column, for the message), or a :class:`DayFilesError` saying what it must be."""
        return value

    def widens_to(self, t, other) -> bool:
        """Whether every value of ``t`` is a value of ``other`` of another kind or size,
        unchanged (``t == other`` is decided by the caller)."""
        return False

    def total(self, t, values: Sequence):
        """The exact sum of parsed values, for a totals table (a numeric kind's)."""
        raise TypeError(f"a {t.name} column has no total")

    def arrow_stored(self, t, value):
        """A parsed value as an Arrow array of stored rows holds it (to compare with)."""
        return self.stored(t, value)


class IntegerCodec(Codec):
    kind, numeric, key = "integer", True, True

    def parse(self, t, value, tz):
        if isinstance(value, bool) or isinstance(value, float):
            raise TypeValueError(f"{value!r} is not an integer")
        if isinstance(value, Decimal):
            if value != value.to_integral_value():
                raise TypeValueError(f"{value!r} is not an integer")
            value = int(value)
        if not isinstance(value, int):
            text = str(value).strip()
            if not re.fullmatch(r"[+-]?\d+", text):
                raise TypeValueError(f"{value!r} is not an integer")
            value = int(text)
        if not INT64[0] <= value <= INT64[1]:
            raise TypeValueError(f"{value!r} does not fit in 64 bits")
        return value

    def sql_type(self, t, *, rowid=False):
        # SQLite makes a single INTEGER key the table's rowid (64-bit there too)
        return sa.BigInteger().with_variant(sa.Integer(), "sqlite") if rowid else sa.BigInteger()

    def file_value(self, t, value, who):
        if isinstance(value, bool) or not isinstance(value, int):
            raise DayFilesError(f"{who} {value!r} must be an integer")
        if not INT64[0] <= value <= INT64[1]:
            raise DayFilesError(f"{who} {value!r} does not fit in 64 bits")
        return value

    def widens_to(self, t, other):
        return other.kind == "decimal" and (
            other.precision is None or other.precision - other.scale >= 19
        )

    def total(self, t, values):
        return sum(values, 0)


class TextCodec(Codec):
    kind, key = "text", True

    def parse(self, t, value, tz):
        if isinstance(value, (bytes, bytearray, memoryview)):
            try:
                return bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                raise TypeValueError("the bytes are not UTF-8 text") from None
        if isinstance(value, (bool, float)):
            raise TypeValueError(f"{value!r} is not text")
        return value if isinstance(value, str) else str(value)

    def file_value(self, t, value, who):
        if not isinstance(value, str):
            raise DayFilesError(f"{who} {value!r} must be text")
        return value


class DecimalCodec(Codec):
    """``decimal`` (the source's spelling kept) and ``decimal(P,S)`` (``S`` places)."""

    kind, numeric = "decimal", True

    def parse(self, t, value, tz):
        exact = parse_decimal(value)
        if t.precision is None:
            return exact
        quantum = Decimal(1).scaleb(-t.scale)
        try:
            fitted = exact.quantize(quantum)
        except InvalidOperation:
            fitted = None
        if fitted is None or fitted != exact:
            raise TypeValueError(f"{value!r} has more than {t.scale} decimal places ({t.name})")
        digits = len(fitted.as_tuple().digits) if fitted else 0
        if fitted and digits - max(-fitted.as_tuple().exponent, 0) > t.precision - t.scale:
            raise TypeValueError(
                f"{value!r} has more than {t.precision - t.scale} "
                f"digits before the point ({t.name})"
            )
        return fitted

    def stored(self, t, value):
        return format_decimal(value)

    def to_json(self, t, value, tz):
        return format_decimal(value)

    def file_value(self, t, value, who):
        if isinstance(value, Decimal) and value.is_finite():
            value = format(value, "f")
        if not isinstance(value, str) or not _FILE_DECIMAL_RE.fullmatch(value):
            example = (
                "22.00" if t.scale is None else "22" + ("." + "0" * t.scale if t.scale else "")
            )
            raise DayFilesError(
                f'{who} {value!r} must be exact decimal text such as "{example}" (never a float)'
            )
        if t.scale is None:
            return value  # as the source spelled it
        try:
            return format(self.parse(t, value, None), "f")  # S places
        except TypeValueError as exc:
            raise DayFilesError(f"{who}: {exc.reason}") from None

    def total(self, t, values):
        """Exact whatever its digits; a ``decimal(P,S)`` total has S places on every day,
        an empty one included (``0.00``)."""
        zero = Decimal(0) if t.scale is None else Decimal(0).scaleb(-t.scale)
        with localcontext(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN):
            return sum(values, zero)

    def plain_pattern(self, t) -> str:
        """The stored texts :meth:`file_value` writes back unchanged, as a regex."""
        if t.scale is None:
            return _FILE_DECIMAL_RE.pattern
        whole = t.precision - t.scale
        integer = "0" if whole == 0 else f"(0|[1-9][0-9]{{0,{whole - 1}}})"
        fraction = rf"\.[0-9]{{{t.scale}}}" if t.scale else ""
        return f"^-?{integer}{fraction}$"

    def widens_to(self, t, other):
        if other.kind != "decimal":
            return False
        if other.precision is None:
            return t.precision is not None
        if t.precision is None:
            return False
        return other.scale >= t.scale and other.precision - other.scale >= t.precision - t.scale


class FloatCodec(Codec):
    kind, numeric = "float", True

    def parse(self, t, value, tz):
        if isinstance(value, bool):
            raise TypeValueError(f"{value!r} is not a number")
        try:
            number = float(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError):
            raise TypeValueError(f"{value!r} is not a number") from None
        if not math.isfinite(number):
            raise TypeValueError(f"{value!r} is not a finite number")
        return number

    def sql_type(self, t, *, rowid=False):
        return sa.Float(53)

    def total(self, t, values):
        return math.fsum(values)  # correctly rounded, whatever the order

    def file_value(self, t, value, who):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise DayFilesError(f"{who} {value!r} must be a finite number")
        return float(value)


class BooleanCodec(Codec):
    kind = "boolean"

    def parse(self, t, value, tz):
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, Decimal)) and value in (0, 1):
            return bool(value)
        if isinstance(value, str):
            word = value.strip().lower()
            if word in TRUE_WORDS:
                return True
            if word in FALSE_WORDS:
                return False
        raise TypeValueError(f"{value!r} is not a boolean (true/false, 1/0, t/f)")

    def sql_type(self, t, *, rowid=False):
        return sa.Boolean(create_constraint=False)

    def file_value(self, t, value, who):
        if not isinstance(value, bool):
            raise DayFilesError(f"{who} {value!r} must be true or false")
        return value


class DateCodec(Codec):
    """A calendar day with no zone, stored and written as ``YYYY-MM-DD``."""

    kind, key = "date", True

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

    def file_value(self, t, value, who):
        if isinstance(value, date) and not isinstance(value, datetime):
            return value.isoformat()
        if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value, re.ASCII):
            try:
                date.fromisoformat(value)
                return value
            except ValueError:
                pass
        raise DayFilesError(f"{who} {value!r} must be a date YYYY-MM-DD")

    def widens_to(self, t, other):
        return other.kind == "timestamp"


class TimestampCodec(Codec):
    """An instant: stored as canonical UTC text (which sorts as it compares), written in
    the pipeline's zone."""

    kind, key = "timestamp", True

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

    def file_value(self, t, value, who):
        """Written as given (the caller gives it in the pipeline's zone)."""
        if isinstance(value, datetime):
            value = value.isoformat()
        if not isinstance(value, str):
            raise DayFilesError(f"{who} {value!r} must be ISO-8601 text")
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise DayFilesError(f"{who} {value!r} is not ISO-8601") from None
        return value


_ALL = (IntegerCodec, TextCodec, DecimalCodec, FloatCodec, BooleanCodec, DateCodec, TimestampCodec)
CODECS: dict[str, Codec] = {codec.kind: codec for codec in (c() for c in _ALL)}
KINDS = tuple(CODECS)
