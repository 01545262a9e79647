"""A declared table's primary key, as the comparisons handle it: one column or several.

Keys travel as Arrow tables of the key columns in their stored forms (an integer key as
int64, a text key as its text, a date as ``YYYY-MM-DD``, a timestamp as canonical UTC
text), so that one rule serves ``orders`` (one integer column) and a composite key alike:
membership (:func:`member`), what is left (:func:`not_in`), the rows up to a key in a
table sorted by key (:func:`upto`). How a message names a row is the spec's
(:meth:`~pipeline_assets.core.table.spec.TableSpec.row_name`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import tzinfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import TypeValueError
from ..table import working
from ..table.spec import TableSpec
from .fast import keys_of


def key_values(table: pa.Table, spec: TableSpec) -> list:
    """The keys of ``table``'s rows: values for a one-column key, tuples otherwise."""
    columns = [table[name].to_pylist() for name in spec.primary_key]
    return columns[0] if len(columns) == 1 else list(zip(*columns, strict=True))


def member(rows: pa.Table, held: pa.Table, spec: TableSpec) -> pa.Array:
    """Whether each row's key is among ``held``'s keys (a bool per row, in order)."""
    names = list(spec.primary_key)
    if len(names) == 1:
        return pc.is_in(rows[names[0]], value_set=_flat(held[names[0]]))
    # joined on positional names: Arrow reads a key name such as ".a" or "[0]" as a path
    apart = [f"{working.PREFIX}key{i}" for i in range(len(names))]
    numbered = (
        rows.select(names)
        .rename_columns(apart)
        .append_column(working.ROW, pa.array(np.arange(rows.num_rows)))
    )
    found = held.select(names).rename_columns(apart)
    hits = numbered.join(found, keys=apart, join_type="left semi")[working.ROW]
    mask = np.zeros(rows.num_rows, bool)
    mask[hits.to_numpy()] = True
    return pa.array(mask)


def not_in(keys: pa.Table, held: Sequence[pa.Table], spec: TableSpec) -> pa.Table:
    """``keys`` without those in any of the ``held`` tables."""
    for found in held:
        if keys.num_rows and found.num_rows:
            keys = keys.filter(pc.invert(member(keys, found, spec)))
    return keys


def upto(table: pa.Table, spec: TableSpec, bound: tuple) -> int:
    """How many rows of ``table`` (sorted by key) have a key ``<= bound``."""
    names = spec.primary_key
    mask = pc.less_equal(table[names[-1]], bound[-1])
    for name, value in zip(reversed(names[:-1]), reversed(bound[:-1]), strict=True):
        mask = pc.or_(pc.less(table[name], value), pc.and_(pc.equal(table[name], value), mask))
    return pc.sum(mask).as_py() or 0


def last_key(table: pa.Table, spec: TableSpec) -> tuple:
    return tuple(table[name][-1].as_py() for name in spec.primary_key)


def key_schema(spec: TableSpec) -> pa.Schema:
    return pa.schema([(k, spec.column(k).type.codec.arrow_type) for k in spec.primary_key])


def stored_keys(columns: Sequence, spec: TableSpec, tz: tzinfo) -> pa.Table:
    """The key columns a source read gave (Arrow arrays or lists, in key order) as the
    warehouse stores them: an integer key as ``keys_of`` reads it, a text key as it is, a
    date or timestamp parsed by its type (null where it is none: no stored key matches)."""
    out = []
    for name, values in zip(spec.primary_key, columns, strict=True):
        kind = spec.column(name).type
        if kind.codec.orders_numerically:
            out.append(
                keys_of(values)
                if isinstance(values, (pa.Array, pa.ChunkedArray))
                else _integer_keys(values)
            )
        elif kind.codec.any_text and isinstance(values, (pa.Array, pa.ChunkedArray)):
            out.append(pc.cast(values, pa.string()))
        else:
            values = values.to_pylist() if not isinstance(values, list) else values
            out.append(pa.array([_stored(kind, v, tz) for v in values], pa.string()))
    return pa.Table.from_arrays(out, schema=key_schema(spec))


def _integer_keys(values: list) -> pa.Array:
    """``keys_of`` of a column of Python values (integers or text)."""
    try:
        return keys_of(pa.array(values))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # mixed, empty, too large
        return keys_of(pa.array([None if v is None else str(v) for v in values], pa.string()))


def _stored(kind, value, tz: tzinfo) -> str | None:
    if value is None:
        return None
    if kind.codec.any_text:
        return str(value)
    try:
        return kind.stored(kind.parse(value, tz))
    except (TypeValueError, TypeError, ValueError):
        return None


def _flat(column) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
