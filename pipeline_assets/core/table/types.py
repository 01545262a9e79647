"""The column types a declaration may use, and every rule of each in one place.

A declared column has one of eight types: ``integer``, ``text``, ``decimal``,
``decimal(P,S)``, ``float``, ``boolean``, ``date``, ``timestamp``. For each, this module
says how a source value is read and checked (:meth:`ColumnType.parse`, the exact path
every fast path must agree with), how the warehouse stores it (:meth:`ColumnType.stored`),
how a day file writes it (:meth:`ColumnType.to_json`), how two values compare
(:meth:`ColumnType.sort_key`), and which stored type may become which
(:meth:`ColumnType.widens_to`).

The rules that matter:

- Exact numbers are never binary floats. ``decimal`` keeps the source's spelling
  (``"7.000"`` stays ``"7.000"``, as ``orders.amount`` always has); ``decimal(P,S)`` is
  checked against its precision and scale and written with ``S`` places (``"1.10"``).
  A float that reaches a decimal column has already lost exactness and is refused.
- ``float`` is finite: NaN and infinity are bad values, not data.
- ``timestamp`` is an instant: a value without offset is read in the pipeline's time
  zone, a bare date is midnight there (it belongs to that day whatever the zone).
  ``date`` is a calendar day with no zone.
- ``integer`` is 64-bit; ``boolean`` accepts what databases store for one (``0``/``1``,
  ``t``/``f``, ``true``/``false``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from decimal import Decimal, InvalidOperation

from ..errors import TimeValueError, TypeValueError, UnknownTypeError
from ..times import UTC, canonical, from_canonical, to_instant

KINDS = ("integer", "text", "decimal", "float", "boolean", "date", "timestamp")
# The one pattern of an exact decimal as text: what the source may spell, what a day file
# and the warehouse hold. An optional sign, digits, optional fraction; no exponent.
DECIMAL_TEXT = r"[+-]?\d+(?:\.\d+)?"
# Its plain subset: the texts :func:`format_decimal` writes back unchanged (no ``+``, no
# leading zeros). Vectorized readers take these as they are and leave the rest to parse.
PLAIN_DECIMAL_TEXT = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?"
_DECIMAL_RE = re.compile(DECIMAL_TEXT)
_TYPE_RE = re.compile(r"\s*(\w+)\s*(?:\(\s*(\d+)\s*,\s*(\d+)\s*\))?\s*")
_INT64 = (-(2**63), 2**63 - 1)
_TRUE = frozenset({"1", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "f", "false", "n", "no"})


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


@dataclass(frozen=True)
class ColumnType:
    """One declared type: ``kind`` and, for ``decimal(P,S)``, its precision and scale."""

    kind: str
    precision: int | None = None
    scale: int | None = None

    @classmethod
    def named(cls, name: object) -> ColumnType:
        """``"decimal(10,2)"`` → ``ColumnType("decimal", 10, 2)``; an unknown name raises
        :class:`UnknownTypeError` listing the types there are."""
        match = _TYPE_RE.fullmatch(name) if isinstance(name, str) else None
        kind = match.group(1).lower() if match else None
        if kind not in KINDS or (match.group(2) is not None and kind != "decimal"):
            raise UnknownTypeError(
                name, f"not a type; use one of {', '.join(KINDS)} or decimal(P,S)"
            )
        if match.group(2) is None:
            return cls(kind)
        precision, scale = int(match.group(2)), int(match.group(3))
        if not 1 <= precision <= 1000 or scale > precision:
            raise UnknownTypeError(name, "a decimal(P,S) needs 1 <= P <= 1000 and 0 <= S <= P")
        return cls(kind, precision, scale)

    @property
    def name(self) -> str:
        if self.precision is not None:
            return f"decimal({self.precision},{self.scale})"
        return self.kind

    def __str__(self) -> str:
        return self.name

    @property
    def numeric(self) -> bool:
        """Whether a total may sum it."""
        return self.kind in ("integer", "decimal", "float")

    @property
    def key_type(self) -> bool:
        """Whether it may be part of a primary key (an exact, orderable value)."""
        return self.kind in ("integer", "text", "date", "timestamp")

    # --- reading --------------------------------------------------------------------

    def parse(self, value: object, tz: tzinfo):
        """The value as the pipeline holds it, or :class:`TypeValueError`.

        integer → ``int``; text → ``str``; decimals → ``Decimal``; float → ``float``;
        boolean → ``bool``; date → ``date``; timestamp → an aware ``datetime`` in UTC.
        ``value`` is never None here (NULL is the declaration's business).
        """
        return getattr(self, f"_parse_{self.kind}")(value, tz)

    def _parse_integer(self, value, tz):
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
        if not _INT64[0] <= value <= _INT64[1]:
            raise TypeValueError(f"{value!r} does not fit in 64 bits")
        return value

    def _parse_text(self, value, tz):
        if isinstance(value, (bytes, bytearray, memoryview)):
            try:
                return bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                raise TypeValueError("the bytes are not UTF-8 text") from None
        if isinstance(value, (bool, float)):
            raise TypeValueError(f"{value!r} is not text")
        return value if isinstance(value, str) else str(value)

    def _parse_decimal(self, value, tz):
        exact = parse_decimal(value)
        if self.precision is None:
            return exact
        quantum = Decimal(1).scaleb(-self.scale)
        try:
            fitted = exact.quantize(quantum)
        except InvalidOperation:
            fitted = None
        if fitted is None or fitted != exact:
            raise TypeValueError(
                f"{value!r} has more than {self.scale} decimal places ({self.name})"
            )
        digits = len(fitted.as_tuple().digits) if fitted else 0
        if fitted and digits - max(-fitted.as_tuple().exponent, 0) > self.precision - self.scale:
            raise TypeValueError(
                f"{value!r} has more than {self.precision - self.scale} "
                f"digits before the point ({self.name})"
            )
        return fitted

    def _parse_float(self, value, tz):
        if isinstance(value, bool):
            raise TypeValueError(f"{value!r} is not a number")
        try:
            number = float(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError):
            raise TypeValueError(f"{value!r} is not a number") from None
        if not math.isfinite(number):
            raise TypeValueError(f"{value!r} is not a finite number")
        return number

    def _parse_boolean(self, value, tz):
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, Decimal) and value in (0, 1):
            return bool(value)
        if isinstance(value, str):
            word = value.strip().lower()
            if word in _TRUE:
                return True
            if word in _FALSE:
                return False
        raise TypeValueError(f"{value!r} is not a boolean (true/false, 1/0, t/f)")

    def _parse_date(self, value, tz):
        if isinstance(value, datetime):
            if value.time() != datetime.min.time() or value.tzinfo is not None:
                raise TypeValueError(f"{value!r} is a timestamp, not a date")
            return value.date()
        if isinstance(value, date):
            return value
        if isinstance(value, str):
            text = value.strip()
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
                try:
                    return date.fromisoformat(text)
                except ValueError as exc:
                    raise TypeValueError(f"{value!r} is not a valid day: {exc}") from None
        raise TypeValueError(f"{value!r} is not a date in the form YYYY-MM-DD")

    def _parse_timestamp(self, value, tz):
        try:
            return to_instant(value, tz).astimezone(UTC)
        except TimeValueError as exc:
            raise TypeValueError(str(exc)) from None

    # --- writing --------------------------------------------------------------------

    def stored(self, value):
        """The value as the warehouse keeps it: exact text for decimals and timestamps
        (canonical UTC, which sorts as it compares), ISO text for dates; the rest as is."""
        if value is None:
            return None
        if self.kind == "decimal":
            return format_decimal(value)
        if self.kind == "timestamp":
            return canonical(value)
        if self.kind == "date":
            return value.isoformat()
        return value

    def from_stored(self, value, tz: tzinfo):
        """The inverse of :meth:`stored`, for a value read back from the warehouse (a
        SQLite 0/1 for a boolean, a driver's own ``date`` or ``datetime``)."""
        if value is None:
            return None
        if self.kind == "timestamp" and isinstance(value, str):
            return from_canonical(value)
        return self.parse(value, tz)

    def to_json(self, value, tz: tzinfo):
        """The value as a day file writes it: integers and floats as numbers, decimals as
        exact text (``decimal(P,S)`` with S places), booleans as true/false, dates
        ``YYYY-MM-DD``, timestamps ISO-8601 in ``tz``, NULL as null."""
        if value is None:
            return None
        if self.kind == "decimal":
            return format_decimal(value)
        if self.kind == "timestamp":
            return value.astimezone(tz).isoformat()
        if self.kind == "date":
            return value.isoformat()
        return value

    def sort_key(self, value):
        """How key values order: integers by value, text by code point (never a database's
        collation), instants as instants."""
        return value

    # --- changing ---------------------------------------------------------------------

    def widens_to(self, other: ColumnType) -> bool:
        """Whether every value of this type is a value of ``other``, unchanged (a stored
        column of this type may be declared ``other`` without rewriting it)."""
        if self == other:
            return True
        if self.kind == "integer":
            return other.kind == "decimal" and (
                other.precision is None or other.precision - other.scale >= 19
            )
        if self.kind == "decimal" and other.kind == "decimal":
            if other.precision is None:
                return self.precision is not None
            if self.precision is None:
                return False
            return (
                other.scale >= self.scale
                and other.precision - other.scale >= self.precision - self.scale
            )
        if self.kind == "date":
            return other.kind == "timestamp"
        return False


INTEGER, TEXT, DECIMAL, FLOAT = (ColumnType(k) for k in ("integer", "text", "decimal", "float"))
BOOLEAN, DATE, TIMESTAMP = (ColumnType(k) for k in ("boolean", "date", "timestamp"))
