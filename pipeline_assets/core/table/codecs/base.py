"""The codec every kind's codec is: each facet, and the default of a value kept as it is."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import tzinfo

import sqlalchemy as sa


def text_column(values, what: str):
    """A text column as ``string``; any other type is not ``what`` (ArrowTypeError)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise pa.ArrowTypeError(f"{what} of type {values.type}")
    return pc.cast(values, pa.string())


class Codec:
    """What the pipeline does with a value of one kind. The defaults are those of a value
    kept as it is (an integer, a float, a boolean, text)."""

    kind = ""
    numeric = False  # a total may sum it
    key = False  # it may be part of a primary key (an exact, orderable value)
    native = False  # a driver hands it over as Arrow holds it; every other kind as text
    arrow_name = "string"  # the Arrow type of its stored form (pyarrow's function)
    zero: object = ""  # a stored value put where a NULL is, when a value is needed
    any_text = False  # a value may be any text (blank, or starting with any character)
    is_day = False  # a calendar day with no zone, stored as YYYY-MM-DD
    is_instant = False  # an instant, stored as canonical UTC text
    orders_numerically = False  # an integer: a key is read as int64 and sorted by value

    @property
    def is_moment(self) -> bool:
        """A day or an instant: a source's native column of it reads and orders as one."""
        return self.is_day or self.is_instant

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

    def parquet_type(self, t):
        """The Arrow type a Parquet day file holds the column as (here: text)."""
        import pyarrow as pa

        return pa.string()

    def parquet_array(self, t, array):
        """``(the column as a Parquet day file holds it, the rows it cannot hold or
        None)``, from the form :meth:`file_array` gives (here: as it is, which is all an
        integer, a boolean, text and a timestamp's instants need)."""
        return array, None

    def parse_array(self, t, values, zone: str):
        """``(stored, ok, moment)``: :meth:`parse` for a whole Arrow column as a reader
        gave it (native or text), in :meth:`stored` form. ``ok`` marks the rows it vouches
        for (the others' values are meaningless; the exact parser reads them); ``moment``
        is what :meth:`stamp_arrays` takes (a cursor kind's), else None."""
        raise NotImplementedError

    def stamp_arrays(self, t, moment, zone: str):
        """``(instant, day number, ok or None)`` of a cursor column, from the ``moment``
        :meth:`parse_array` gave; ``ok``: the rows it vouches for, None for all."""
        raise TypeError(f"a {t.name} column is no change stamp")

    def source_select(self, t, name: str, col_type, stored: str, dialect: str) -> str | None:
        """A source column (quoted ``name``, of SQLAlchemy type ``col_type``, comparing as
        ``stored``: text, date, timestamp, timestamptz) as PostgreSQL or MySQL selects it,
        or None: as the driver gives it. Here: its text."""
        return f"CAST({name} AS {'CHAR' if dialect == 'mysql' else 'TEXT'})"

    def stage_type(self, dialect: str) -> str:
        """Its column's SQL type in a load's stage table (``sqlite`` or ``postgresql``)."""
        return "TEXT"

    def digest_text(self, t, values):
        """Each stored value's text in a batch-digest line (NULL left NULL)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        return values if values.type == pa.string() else pc.cast(values, pa.string())

    def hash_words(self, t, values):
        """Each stored value's 64-bit word in a row hash (NumPy ``uint64``; NULLs filled
        with :attr:`zero`), or None: it is hashed as its stored text."""
        return None

    def equal_array(self, t, values, wanted: Sequence):
        """Whether each stored value (an Arrow array) equals one of ``wanted`` (parsed
        values, one at least), as the values compare."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if len(wanted) > 4:
            stored = pa.array([self.stored(t, v) for v in wanted], values.type)
            return pc.is_in(values, value_set=stored)
        return self.any_equal(t, values, wanted)

    def any_equal(self, t, values, wanted: Sequence):
        """:meth:`equal_array` as one comparison per wanted value."""
        import pyarrow as pa
        import pyarrow.compute as pc

        hit = None
        for value in wanted:
            equal = pc.equal(values, pa.scalar(self.stored(t, value), values.type))
            hit = equal if hit is None else pc.or_(hit, equal)
        return hit

    def json_as_stored(self, t) -> type | None:
        """The Python type of a stored value that a day file writes as it is, or None."""
        return None

    def file_sort_key(self, t, value, who: str, name: str):
        """How a key value of a day file (as :meth:`file_value` gave it) sorts, or a
        :class:`DayFilesError` naming it."""
        return value

    # Widening a stored column (see widens_to): what evolve asks.

    def fit_digits(self, t, other) -> int | None:
        """How many digits each stored value may have for a column of ``t`` to become
        ``other`` (checked on the stored values), or None: no such widening."""
        return None

    def refusal(self, t, other) -> str:
        """Why a stored column of ``t`` cannot become ``other``."""
        return f"{t} values are not {other} values"

    def widen_sql(self, t, other, column: str) -> str | None:
        """A stored value of ``t`` (the SQL ``column``) in ``other``'s stored form, as
        SQL; None when SQL need not or cannot say it (:meth:`widen_value`)."""
        return None

    def widen_value(self, t, other, tz: tzinfo) -> Callable[[str], str] | None:
        """A stored value of ``t`` in ``other``'s stored form, one by one (the pipeline's
        zone), where SQL cannot say it; None: nothing to rewrite value by value."""
        return None
