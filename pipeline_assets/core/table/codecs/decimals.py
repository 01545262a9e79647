"""``decimal`` (the source's spelling kept) and ``decimal(P,S)`` (``S`` places): exact
numbers, never binary floats, and the one pattern of their text."""

from __future__ import annotations

import decimal
import re
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Decimal, InvalidOperation, localcontext

from ...errors import DayFilesError, TypeValueError
from .base import Codec, text_column

# The one pattern of an exact decimal as text: what the source may spell, what a day file
# and the warehouse hold. An optional sign, digits, optional fraction; no exponent.
DECIMAL_TEXT = r"[+-]?\d+(?:\.\d+)?"
# Its plain subset: the texts :func:`format_decimal` writes back unchanged (no ``+``, no
# leading zeros). Vectorized readers take these as they are and leave the rest to parse.
PLAIN_DECIMAL_TEXT = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?"
_AMOUNT = f"^{PLAIN_DECIMAL_TEXT}$"
_DECIMAL_RE = re.compile(DECIMAL_TEXT)
_FILE_DECIMAL_RE = re.compile(f"^{DECIMAL_TEXT}$")


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

    def file_value(self, t, value, who, name):
        if isinstance(value, Decimal) and value.is_finite():
            value = format(value, "f")
        if not isinstance(value, str) or not _FILE_DECIMAL_RE.fullmatch(value):
            example = (
                "22.00" if t.scale is None else "22" + ("." + "0" * t.scale if t.scale else "")
            )
            raise DayFilesError(
                f"{who}: {name} {value!r} must be exact decimal text such as "
                f'"{example}" (never a float)'
            )
        if t.scale is None:
            return value  # as the source spelled it
        try:
            return format(self.parse(t, value, None), "f")  # S places
        except TypeValueError as exc:
            raise DayFilesError(f"{who}: {name}: {exc.reason}") from None

    def total(self, t, values):
        """Exact whatever its digits; a ``decimal(P,S)`` total has S places on every day,
        an empty one included (``0.00``)."""
        zero = Decimal(0) if t.scale is None else Decimal(0).scaleb(-t.scale)
        with localcontext(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN):
            return sum(values, zero)

    def file_text(self, t, array, tz):
        """The stored text as it is; a text the writer would respell is not vouched for."""
        import pyarrow.compute as pc

        plain = pc.match_substring_regex(array, self.plain_pattern(t))
        return array, pc.invert(pc.fill_null(plain, True)), True

    def parquet_type(self, t):
        """``decimal(P,S)``: a Parquet decimal of P digits, S of them places (decimal256
        beyond 38 digits). A plain ``decimal`` keeps its text: no one precision and scale
        holds every spelling a source may give, and a scale chosen per day would give the
        days of one folder different types."""
        import pyarrow as pa

        if t.precision is None:
            return pa.string()
        make = pa.decimal128 if t.precision <= 38 else pa.decimal256
        return make(t.precision, t.scale)

    def parquet_array(self, t, array):
        """The exact text as a decimal of the column's type (none rounded: a value with
        more places or digits than it holds is a row it cannot hold); a plain ``decimal``
        as its text."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if t.precision is None:
            plain = pc.match_substring_regex(array, _FILE_DECIMAL_RE.pattern)
            return array, pc.invert(pc.fill_null(plain, True))
        kind = self.parquet_type(t)
        if pa.types.is_decimal(array.type) and array.type == kind:
            return array, None
        try:
            return pc.cast(array, kind), None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            values, wrong = [], []
            for text in array.to_pylist():
                try:
                    values.append(None if text is None else self.parse(t, text, None))
                    wrong.append(False)
                except TypeValueError:
                    values.append(None)
                    wrong.append(True)
            return pa.array(values, kind), pa.array(wrong, pa.bool_())

    def plain_pattern(self, t) -> str:
        """The stored texts :meth:`file_value` writes back unchanged, as a regex."""
        if t.scale is None:
            return _FILE_DECIMAL_RE.pattern
        whole = t.precision - t.scale
        integer = "0" if whole == 0 else f"(0|[1-9][0-9]{{0,{whole - 1}}})"
        fraction = rf"\.[0-9]{{{t.scale}}}" if t.scale else ""
        return f"^-?{integer}{fraction}$"

    def parse_array(self, t, values, zone):
        """Plain decimal text as it is; a ``decimal(P,S)`` within its precision, padded to
        S places (``1.1`` → ``1.10``) as ``format_decimal(quantize(...))`` writes it."""
        import pyarrow as pa
        import pyarrow.compute as pc

        text = pc.utf8_trim_whitespace(text_column(values, "decimal"))
        if t.precision is None:
            return text, pc.fill_null(pc.match_substring_regex(text, _AMOUNT), False), None
        scale = t.scale
        # the exact parser quantizes in Decimal's context, which holds `prec` digits in all
        room = min(t.precision - scale, decimal.getcontext().prec - scale)
        if scale >= decimal.getcontext().prec:
            return text, pa.array([False] * len(text), pa.bool_()), None
        whole = f"(0|[1-9][0-9]{{0,{room - 1}}})" if room >= 1 else "0"
        places = rf"(\.[0-9]{{1,{scale}}})?" if scale else ""
        ok = pc.fill_null(pc.match_substring_regex(text, f"^-?{whole}{places}$"), False)
        if not scale:
            return text, ok, None
        dot = pc.find_substring(text, ".")
        places_now = pc.if_else(
            pc.less(dot, 0), -1, pc.subtract(pc.subtract(pc.binary_length(text), dot), 1)
        )
        missing = pc.if_else(ok, pc.subtract(scale, places_now), 0)  # scale + 1: no point yet
        pads = pa.array(["0" * i for i in range(scale + 1)] + ["." + "0" * scale], pa.string())
        return pc.binary_join_element_wise(text, pc.take(pads, missing), ""), ok, None

    def equal_array(self, t, values, wanted):
        """As numbers: the stored text keeps its spelling (40.0 is 40.00)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        codes = pc.dictionary_encode(values)
        numbers = set(wanted)
        hits = pa.array([Decimal(v) in numbers for v in codes.dictionary.to_pylist()], pa.bool_())
        return pc.take(hits, codes.indices)

    def json_as_stored(self, t):
        return str if t.scale is None else None  # the source's spelling, as stored

    def refusal(self, t, other):
        if other.kind == "decimal":
            return "that is a narrowing: a stored value may have more digits than it holds"
        return super().refusal(t, other)

    def widen_sql(self, t, other, column):
        """Exact text stays text; more places are written out."""
        if other.scale is None or t.scale is None or other.scale == t.scale:
            return None  # the stored spelling is a value of the new type as it is
        zeros = "0" * (other.scale - t.scale)
        return f"{column} || " + (f"'{zeros}'" if t.scale else f"'.{zeros}'")

    def widens_to(self, t, other):
        if other.kind != "decimal":
            return False
        if other.precision is None:
            return t.precision is not None
        if t.precision is None:
            return False
        return other.scale >= t.scale and other.precision - other.scale >= t.precision - t.scale
