"""The kinds a value keeps as it is: ``integer`` (64-bit), ``float`` (finite),
``boolean`` (what databases store for one) and ``text``."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal

import sqlalchemy as sa

from ...errors import DayFilesError, TypeValueError
from .base import Codec

INT64 = (-(2**63), 2**63 - 1)
_PLAIN_TEXT = r"^[ !#-\[\]-~]*$"  # printable ASCII that JSON writes as it is
TRUE_WORDS = frozenset({"1", "t", "true", "y", "yes"})
FALSE_WORDS = frozenset({"0", "f", "false", "n", "no"})


class IntegerCodec(Codec):
    kind, numeric, key, native, arrow_name = "integer", True, True, True, "int64"

    def file_array(self, t, array):
        import pyarrow as pa
        import pyarrow.compute as pc

        return (array if array.type == pa.int64() else pc.cast(array, pa.int64())), None

    def file_text(self, t, array, tz):
        import pyarrow as pa
        import pyarrow.compute as pc

        return pc.cast(array, pa.string()), None, False

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
    kind, numeric, native, arrow_name = "float", True, True, "float64"

    def file_array(self, t, array):
        import pyarrow as pa
        import pyarrow.compute as pc

        return (array if array.type == pa.float64() else pc.cast(array, pa.float64())), None

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


class BooleanCodec(Codec):
    kind, native, arrow_name = "boolean", True, "bool_"

    def driver_array(self, t, values):
        import pyarrow as pa

        return pa.array([None if v is None else bool(v) for v in values], pa.bool_())  # 0/1

    def file_array(self, t, array):
        """SQLite's 0/1 as booleans; any other integer is not one."""
        import pyarrow as pa
        import pyarrow.compute as pc

        kind = array.type
        if pa.types.is_integer(kind):
            wrong = pc.invert(pc.is_in(array, value_set=pa.array([0, 1], kind)))
            return pc.not_equal(array, 0), pc.fill_null(wrong, False)
        return (array if kind == pa.bool_() else pc.cast(array, pa.bool_())), None

    def file_text(self, t, array, tz):
        import pyarrow.compute as pc

        return pc.if_else(array, "true", "false"), None, False

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

    def file_value(self, t, value, who, name):
        if not isinstance(value, bool):
            raise DayFilesError(f"{who}: {name} {value!r} must be true or false")
        return value
