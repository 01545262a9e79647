"""How a declared table's stored rows are read back: :class:`Stored`, the SQL that reads
them in one dialect and the typed Arrow table of what it read (each value in its stored
Arrow type, each row with its day), for every read of :mod:`.sides`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, tzinfo

import pyarrow as pa
import pyarrow.compute as pc

from ..db.quoting import quote
from ..errors import VerifyError
from ..table import working
from ..table.spec import TableSpec
from ..table.types import ColumnType
from ..times import EPOCH, canonical, from_canonical
from ..times.arrays import INSTANT, day_numbers


class Stored:
    """The SQL that reads a declared table's stored rows in one dialect, and the Arrow
    table of what it read. For ``orders`` the statements are the ones it always had."""

    def __init__(
        self, spec: TableSpec, dialect: str, tz: tzinfo, absent: frozenset[str] = frozenset()
    ):
        self.spec, self.dialect, self.tz = spec, dialect, tz
        self.table = quote(spec.name, dialect)
        self.by = quote(spec.day, dialect)  # the day column (the cursor by default)
        names = [quote(c.name, dialect) for c in spec.columns]
        # a declared column the table lacks yet (the next load adds it) reads as NULL
        self.columns = ", ".join(
            f"NULL AS {n}"
            if c.name in absent
            else n
            if c.type.codec.native
            else f"CAST({n} AS TEXT) AS {n}"
            for n, c in zip(names, spec.columns, strict=True)
        )
        text_order = ' COLLATE "C"' if dialect == "postgresql" else ""  # code point order
        self.order = ", ".join(
            quote(k, dialect) + ("" if spec.column(k).type.codec.orders_numerically else text_order)
            for k in spec.primary_key
        )
        self.date_day = spec.column(spec.day).type.codec.is_day

    def condition(self, start, end, keys, column: str | None = None) -> str:
        column = column or self.by
        where = []
        if start is not None:
            where.append(f"{column} >= '{self._bound(start)}'")
        if end is not None:
            where.append(f"{column} < '{self._bound(end)}'")
        if keys is not None:
            key = quote(self.spec.primary_key[0], self.dialect)
            where.append(f"{key} >= {int(keys[0])} AND {key} < {int(keys[1])}")
        return " AND ".join(where)

    def _bound(self, instant: datetime) -> str:
        """Canonical UTC text sorts as the instants do; a date day column's bound is the date
        of the span's midnight (spans are whole days)."""
        return instant.date().isoformat() if self.date_day else canonical(instant)

    def sql(self, start, end, *, ordered: bool, keys=None, plus: bool = False) -> str:
        """The rows in ``[start, end)``, by the day column's index (``plus``: not through it)."""
        condition = self.condition(start, end, keys, f"+{self.by}" if plus else None)
        return (
            f"SELECT {self.columns} FROM {self.table}"
            + (f" WHERE {condition}" if condition else "")
            + (f" ORDER BY {self.order}" if ordered else "")
        )

    def arrow(self, rows: Sequence[tuple]) -> pa.Table:
        """Rows a driver gave (tuples, in declared column order) as a typed table."""
        columns = list(zip(*rows, strict=True))
        return self.typed(
            pa.table(
                [
                    column_array(values, c.type)
                    for values, c in zip(columns, self.spec.columns, strict=True)
                ],
                names=list(self.spec.column_names),
            )
        )

    def typed(self, table: pa.Table) -> pa.Table:
        """Each column in its stored Arrow type, and the day of each row."""
        for i, column in enumerate(self.spec.columns):
            wanted = column.type.codec.arrow_type
            if table.schema.field(i).type != wanted:
                table = table.set_column(i, column.name, pc.cast(table[column.name], wanted))
        return table.append_column(working.DAY, self._days(table))

    def _days(self, table: pa.Table) -> pa.Array:
        text = table[self.spec.day]
        if self.date_day:
            try:
                return pc.cast(pc.cast(text, pa.date32()), pa.int32())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                dates = [self._date(i, v, table) for i, v in enumerate(text.to_pylist())]
                return pa.array([(d - EPOCH).days for d in dates], pa.int32())
        try:
            instants = pc.cast(text, INSTANT)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            instants = pa.array(
                [self._instant(i, v, table) for i, v in enumerate(text.to_pylist())], INSTANT
            )
        return day_numbers(instants, self.tz)

    def _instant(self, i: int, text: str, table: pa.Table) -> datetime:
        try:
            return from_canonical(text)
        except (TypeError, ValueError):
            raise self._bad(i, text, table, "a canonical timestamp") from None

    def _date(self, i: int, text: str, table: pa.Table):
        try:
            return date.fromisoformat(text)
        except (TypeError, ValueError):
            raise self._bad(i, text, table, "a date (YYYY-MM-DD)") from None

    def _bad(self, i: int, text: str, table: pa.Table, what: str) -> VerifyError:
        spec = self.spec
        key = tuple(table[k][i].as_py() for k in spec.primary_key)
        return VerifyError(
            f"the warehouse row of {spec.row_name(key[0] if len(key) == 1 else key)} has "
            f"{spec.day} {text!r}, which is not {what}; reload it with an "
            f"explicit-range {spec.name} run"
        )


def column_array(values: Sequence, kind: ColumnType) -> pa.Array:
    """A column of the values a driver gave, as Arrow: the native kinds as they are, every
    other as its text (its codec's ``driver_array``)."""
    return kind.codec.driver_array(kind, values)
