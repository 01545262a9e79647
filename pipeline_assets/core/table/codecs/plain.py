"""The kinds a value keeps as it is: ``integer`` (64-bit), ``float`` (finite) and
``text`` (``boolean``: :mod:`.booleans`)."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal

import sqlalchemy as sa

from ...errors import DayFilesError, TypeValueError
from .base import Codec, text_column

INT64 = (-(2**63), 2**63 - 1)
_PLAIN_TEXT = r"^[ !#-\[\]-~]*$"  # printable ASCII that JSON writes as it is
_KEY = r"^-?[0-9]+$"
_FLOAT = r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]{1,3})?$"


def integer_keys(ids):
    """(int64 keys, ok) for an integer column of integers or integer text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_integer(ids.type):
        return pc.cast(pc.fill_null(ids, 0), pa.int64()), pc.is_valid(ids)
    if pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type):
        text = pc.utf8_trim_whitespace(ids)
        ok = pc.fill_null(pc.match_substring_regex(text, _KEY), False)
        return pc.cast(pc.if_else(ok, text, "0"), pa.int64()), ok
    raise pa.ArrowTypeError(f"an integer column of type {ids.type}")


class IntegerCodec(Codec):
    kind, numeric, key, native, arrow_name = "integer", True, True, True, "int64"
    zero, orders_numerically = 0, True

    def parse_array(self, t, values, zone):
        return (*integer_keys(values), None)

    def source_select(self, t, name, col_type, stored, dialect):
        if isinstance(col_type, sa.Integer):
            return None  # an integer column as it is
        return super().source_select(t, name, col_type, stored, dialect)

    def stage_type(self, dialect):
        return "INTEGER" if dialect == "sqlite" else "BIGINT"

    def hash_words(self, t, values):
        """The value as a two's-complement 64-bit word."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        return np.asarray(pc.cast(values, pa.int64())).view(np.uint64)

    def json_as_stored(self, t):
        return int

    def file_array(self, t, array):
        import pyarrow as pa
        import pyarrow.compute as pc

        return (array if array.type == pa.int64() else pc.cast(array, pa.int64())), None

    def file_text(self, t, array, tz):
        import pyarrow as pa
        import pyarrow.compute as pc

        return pc.cast(array, pa.string()), None, False

    def parquet_type(self, t):
        import pyarrow as pa

        return pa.int64()

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

    def file_value(self, t, value, who, name):
        if isinstance(value, bool) or not isinstance(value, int):
            raise DayFilesError(f"{who}: {name} {value!r} must be an integer")
        if not INT64[0] <= value <= INT64[1]:
            raise DayFilesError(f"{who}: {name} {value!r} does not fit in 64 bits")
        return value

    def widens_to(self, t, other):
        return other.kind == "decimal" and (
            other.precision is None or other.precision - other.scale >= 19
        )

    def fit_digits(self, t, other):
        """Into ``decimal(P,S)``: at most ``P-S`` digits."""
        if other.kind == "decimal" and other.precision is not None:
            return other.precision - other.scale
        return None

    def widen_sql(self, t, other, column):
        """A 64-bit integer becomes exact text: 5 -> "5" or "5.00"."""
        places = "." + "0" * other.scale if other.scale else ""
        return f"CAST({column} AS TEXT)" + (f" || '{places}'" if places else "")

    def total(self, t, values):
        return sum(values, 0)


class TextCodec(Codec):
    kind, key, any_text = "text", True, True

    def parse_array(self, t, values, zone):
        """Text is taken as it is: not trimmed, blank allowed."""
        import pyarrow.compute as pc

        text = text_column(values, "text")
        return text, pc.is_valid(text), None

    def json_as_stored(self, t):
        return str

    def parse(self, t, value, tz):
        if isinstance(value, (bytes, bytearray, memoryview)):
            try:
                return bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                raise TypeValueError("the bytes are not UTF-8 text") from None
        if isinstance(value, (bool, float)):
            raise TypeValueError(f"{value!r} is not text")
        return value if isinstance(value, str) else str(value)

    def file_value(self, t, value, who, name):
        if not isinstance(value, str):
            raise DayFilesError(f"{who}: {name} {value!r} must be text")
        return value

    def file_text(self, t, array, tz):
        """Quoted as it is when plain ASCII; escaped by ``json.dumps`` otherwise."""
        import pyarrow as pa
        import pyarrow.compute as pc

        plain = pc.fill_null(pc.match_substring_regex(array, _PLAIN_TEXT), True)
        if pc.all(plain).as_py():
            return array, None, True
        escape = pc.invert(plain)
        text = pc.binary_join_element_wise('"', array, '"', "")
        escaped = pa.array([json.dumps(v) for v in array.filter(escape).to_pylist()], pa.string())
        return pc.replace_with_mask(text, escape, escaped), None, False


class FloatCodec(Codec):
    kind, numeric, native, arrow_name, zero = "float", True, True, "float64", 0.0

    def parse_array(self, t, values, zone):
        import pyarrow as pa
        import pyarrow.compute as pc

        if pa.types.is_floating(values.type) or pa.types.is_integer(values.type):
            number = pc.cast(values, pa.float64())
        else:
            text = pc.utf8_trim_whitespace(text_column(values, "float"))
            plain = pc.fill_null(pc.match_substring_regex(text, _FLOAT), False)
            number = pc.cast(pc.if_else(plain, text, "0"), pa.float64())
            number = pc.if_else(plain, number, pa.scalar(None, pa.float64()))
        return number, pc.fill_null(pc.is_finite(number), False), None

    def stage_type(self, dialect):
        return "REAL" if dialect == "sqlite" else "DOUBLE PRECISION"

    def digest_text(self, t, values):
        """``repr(v + 0.0)`` of each (-0.0 is 0.0), through one NumPy list: a third faster."""
        import pyarrow as pa
        import pyarrow.compute as pc

        floats = pc.add(values, 0.0).fill_null(0.0).to_numpy(zero_copy_only=False)
        texts = pa.array(list(map(float.__repr__, floats.tolist())), pa.string())
        if values.null_count:
            texts = pc.if_else(pc.is_valid(values), texts, pa.scalar(None, pa.string()))
        return texts

    def hash_words(self, t, values):
        """The IEEE-754 bits; + 0.0 makes -0.0 into 0.0 and leaves every other value as is."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        return (np.asarray(pc.cast(values, pa.float64()), np.float64) + 0.0).view(np.uint64)

    def equal_array(self, t, values, wanted):
        return self.any_equal(t, values, wanted)  # is_in tells -0.0 from 0.0

    def file_array(self, t, array):
        import pyarrow as pa
        import pyarrow.compute as pc

        return (array if array.type == pa.float64() else pc.cast(array, pa.float64())), None

    def parquet_type(self, t):
        import pyarrow as pa

        return pa.float64()

    def parquet_array(self, t, array):
        """As it is; NaN and infinity are no value of the column."""
        import pyarrow.compute as pc

        return array, pc.fill_null(pc.invert(pc.is_finite(array)), False)

    def file_text(self, t, array, tz):
        """``json.dumps`` of each (its shortest repr); NaN and infinity are not vouched for."""
        import pyarrow as pa

        values, wrong = [], []
        for v in array.to_pylist():
            ok = v is None or math.isfinite(v)
            values.append(json.dumps(v) if ok and v is not None else None)
            wrong.append(not ok)
        return pa.array(values, pa.string()), pa.array(wrong, pa.bool_()), False

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

    def file_value(self, t, value, who, name):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise DayFilesError(f"{who}: {name} {value!r} must be a finite number")
        return float(value)
