"""The codec every kind's codec is: each facet, and the default of a value kept as it is."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import tzinfo

import sqlalchemy as sa


class Codec:
    """What the pipeline does with a value of one kind. The defaults are those of a value
    kept as it is (an integer, a float, a boolean, text)."""

    kind = ""
    numeric = False  # a total may sum it
    key = False  # it may be part of a primary key (an exact, orderable value)
    native = False  # a driver hands it over as Arrow holds it; every other kind as text
    arrow_name = "string"  # the Arrow type of its stored form (pyarrow's function)

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

    def file_value(self, t, value, who: str, name: str):
        """A value handed to a day file as the file writes it (``who``, ``name``: its row and
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

    # Arrow: pyarrow is imported where an array is built, not with the declaration.

    @property
    def arrow_type(self):
        """The Arrow type of the stored form (:meth:`stored`)."""
        import pyarrow as pa

        return getattr(pa, self.arrow_name)()

    def driver_array(self, t, values: Sequence):
        """Values a warehouse driver gave, as Arrow: a native kind as it is, every other
        as its stored text."""
        import pyarrow as pa

        return pa.array(values, self.arrow_type if self.native else pa.string())

    def file_text(self, t, array, tz: tzinfo):
        """``(each value's JSON text in a day file, the rows it cannot vouch for or None,
        whether the texts still need their quotes)``, for a column in the form
        :meth:`file_array` gives: the bytes :meth:`file_value` writes, for a whole array."""
        raise NotImplementedError

    def file_array(self, t, array):
        """``(the column in the one Arrow form a day file is written from, the rows it
        cannot vouch for or None)``, from an array of stored values as a driver gave them
        (here: text; a driver's decimal as its text)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if pa.types.is_decimal(array.type):
            array = pc.cast(array, pa.string())
        return (array if array.type == pa.string() else pc.cast(array, pa.string())), None
