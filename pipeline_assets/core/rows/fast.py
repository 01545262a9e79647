"""The fast path of each column type: a whole Arrow column read by ``pyarrow.compute``.

:func:`fast_column` reads a column as a reader returns it (native or text) into its stored
form (:meth:`~pipeline_assets.core.table.types.ColumnType.stored`) and says which rows it vouches
for: integer keys, text, plain decimal text (a ``decimal(P,S)`` padded to S places),
``0``/``1``/``t``/``f``/ ``true``/``false`` and native booleans, plain floats, ``YYYY-MM-DD`` and
native dates, ISO-8601 timestamps with or without ``Z``/``±HH:MM`` and native timestamp columns. It
only ever vouches for what the exact parser accepts, with the same stored value; every other
row is left to the exact parser (:mod:`.checks`), which names it. Each kind's reading is its
codec's (:meth:`~pipeline_assets.core.table.codecs.base.Codec.parse_array`).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..table.codecs.base import text_column
from ..table.codecs.plain import integer_keys
from ..table.types import ColumnType

__all__ = ["fast_column", "keys_of", "text_column"]


def fast_column(values, kind: ColumnType, zone: str) -> tuple[pa.Array, pa.Array, pa.Array | None]:
    """(stored, ok, moment): ``ok`` marks the rows the fast path vouches for (the values
    of the others are meaningless); ``moment`` is a timestamp column's instants or a date
    column's date32 days, None for the other types."""
    return kind.codec.parse_array(kind, values, zone)


def keys_of(ids) -> pa.Array:
    """The integer keys of an integer key column; null where a value is no integer key
    (such a row is refused by validation, so it can never be an order the warehouse holds).
    """
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    try:
        keys, ok = integer_keys(ids)
    except pa.ArrowInvalid:  # an integer text too large for 64 bits: no key either
        return pa.array([_key_or_none(v) for v in ids.to_pylist()], pa.int64())
    return pc.if_else(ok, keys, pa.scalar(None, pa.int64()))


def _key_or_none(value) -> int | None:
    try:
        key = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return key if -(2**63) <= key < 2**63 else None
