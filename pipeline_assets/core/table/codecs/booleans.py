"""``boolean``: what databases store for one (``0``/``1``, ``t``/``f``, ``true``/``false``)."""

from __future__ import annotations

from decimal import Decimal

import sqlalchemy as sa

from ...errors import DayFilesError, TypeValueError
from .base import Codec, text_column

TRUE_WORDS = frozenset({"1", "t", "true", "y", "yes"})
FALSE_WORDS = frozenset({"0", "f", "false", "n", "no"})


class BooleanCodec(Codec):
    kind, native, arrow_name, zero = "boolean", True, "bool_", False

    def parse_array(self, t, values, zone):
        import pyarrow as pa
        import pyarrow.compute as pc

        if pa.types.is_boolean(values.type):
            return values, pc.is_valid(values), None
        if pa.types.is_integer(values.type):
            ok = pc.fill_null(pc.is_in(values, value_set=pa.array([0, 1], values.type)), False)
            return pc.not_equal(values, 0), ok, None
        word = pc.utf8_lower(pc.utf8_trim_whitespace(text_column(values, "boolean")))
        true = pc.fill_null(pc.is_in(word, value_set=pa.array(sorted(TRUE_WORDS))), False)
        false = pc.fill_null(pc.is_in(word, value_set=pa.array(sorted(FALSE_WORDS))), False)
        return true, pc.or_(true, false), None

    def source_select(self, t, name, col_type, stored, dialect):
        if dialect == "mysql":
            if type(col_type).__name__ == "BIT":
                return f"CAST({name} + 0 AS CHAR)"  # BIT(1) as 0/1, not a byte
        elif isinstance(col_type, sa.Boolean):
            return None
        return super().source_select(t, name, col_type, stored, dialect)

    def stage_type(self, dialect):
        return "INTEGER" if dialect == "sqlite" else "BOOLEAN"

    def digest_text(self, t, values):
        import pyarrow as pa
        import pyarrow.compute as pc

        return pc.if_else(pc.cast(values, pa.bool_()), "true", "false")

    def hash_words(self, t, values):
        """1 for true, 0 for false."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        return pc.cast(values, pa.bool_()).to_numpy(zero_copy_only=False).astype(np.uint64)

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

    def parquet_type(self, t):
        import pyarrow as pa

        return pa.bool_()

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
