"""The checks that refuse a source row with :class:`~pipeline_assets.core.errors.InvalidRowError`.

:func:`parse_rows` is the exact parser, row by row (:func:`parse_row`: each column by
:meth:`~pipeline_assets.core.table.types.ColumnType.parse`; ``orders`` by :func:`.orders.validate`,
as ever): what the fast path does not vouch for is read here, and an invalid row is named by its
table, its key, the column and the value. :func:`newest_per_key` keeps one row per key and refuses
two different rows that tie on the key and the cursor.
"""

from __future__ import annotations

from datetime import tzinfo

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidRowError, TypeValueError
from ..table import working
from ..table.spec import TableSpec
from ..times import EPOCH, UTC, day_of, day_start


def parse_rows(raw, tz: tzinfo, spec: TableSpec, schema: pa.Schema) -> pa.Table:
    """The exact parser, row by row, into ``schema`` (``spec``'s NORMAL table)."""
    names = spec.column_names
    out = {name: [] for name in schema.names}
    cursor_is_day = spec.column(spec.stamp).type.codec.is_day
    day_is_day = spec.column(spec.day).type.codec.is_day
    for values in zip(*(raw.column(name).to_pylist() for name in names), strict=True):
        row = parse_row(dict(zip(names, values, strict=True)), tz, spec)
        for name in names:
            out[name].append(spec.column(name).type.stored(row[name]))
        out[working.INSTANT].append(_instant(row[spec.stamp], cursor_is_day, tz))
        moment = row[spec.day]
        if spec.day_apart:
            out[working.DAY_AT].append(_instant(moment, day_is_day, tz))
        out[working.DAY].append(((moment if day_is_day else day_of(moment, tz)) - EPOCH).days)
    return pa.table(out, schema=schema)


def _instant(moment, is_day: bool, tz: tzinfo):
    """A timestamp as it is; a date: its midnight in ``tz``."""
    return day_start(moment, tz).astimezone(UTC) if is_day else moment


def parse_row(values: dict, tz: tzinfo, spec: TableSpec) -> dict:
    """One source row (column name → value as the source holds it) read by the rules of
    ``spec``'s column types (:meth:`~pipeline_assets.core.table.types.ColumnType.parse`): column
    name → parsed value (None for a nullable column's NULL). The key columns are read first, so an
    error names the row by its key; then the others in declared order.

    Raises :class:`InvalidRowError` naming the table, the row's key (each column as
    stored; as the source holds it where it cannot be read), the column, the value and
    why.
    """
    key = {name: values[name] for name in spec.primary_key}
    out, failures = {}, []
    for name in spec.primary_key:
        try:
            out[name] = _parse(spec, name, values[name], tz)
        except TypeValueError as exc:
            failures.append((name, exc.reason))
            continue
        key[name] = spec.column(name).type.stored(out[name])
    if failures:
        name, reason = failures[0]
        raise spec.row_error(key, name, values[name], reason)
    for name in spec.column_names:
        if name not in out:
            try:
                out[name] = _parse(spec, name, values[name], tz)
            except TypeValueError as exc:
                raise spec.row_error(key, name, values[name], exc.reason) from None
    return out


def _parse(spec: TableSpec, name: str, value, tz: tzinfo):
    column, legacy = spec.column(name), spec.legacy
    if legacy and name in legacy.nonblank and isinstance(value, str) and not value.strip():
        value = None  # orders' blank status is a missing one
    if value is None:
        if column.nullable:
            return None
        if legacy and name in legacy.missing:
            raise TypeValueError(legacy.missing[name])
        raise TypeValueError(
            "every row needs its key"
            if name in spec.primary_key
            else "the value is missing and the column is not nullable"
        )
    try:
        return column.type.parse(value, tz)
    except TypeValueError as exc:
        if legacy and name in spec.primary_key:
            raise TypeValueError(legacy.not_a_key) from None
        if legacy and legacy.reason_names_value:
            raise
        # the type names the value first; the row's message names it once, before
        raise TypeValueError(exc.reason.removeprefix(f"{value!r} ")) from None


def newest_per_key(table: pa.Table, spec: TableSpec) -> tuple[pa.Table, int]:
    """One row per primary key: the newest ``instant`` wins; returns (rows, copies dropped).

    Two copies with the same instant and different values cannot be ordered: the batch
    is refused, naming the key. Identical copies are one row. The result is sorted by
    the key's columns, in declared order (NORMAL values: integers by value, text by code
    point, dates and timestamps as their stored text, which sorts as they compare).
    """
    keys = spec.primary_key
    # sorted by field, not by name: Arrow reads a name such as ".a" or "[0]" as a path
    table = table.sort_by(
        [(pc.field(name), "ascending") for name in keys] + [(working.INSTANT, "ascending")]
    )
    n = table.num_rows
    if n < 2:
        return table, 0
    table = table.combine_chunks()

    def pairs(name):
        column = table[name].chunk(0)
        return column.slice(0, n - 1), column.slice(1)

    same_next = None
    for name in keys:
        same = pc.equal(*pairs(name))
        same_next = same if same_next is None else pc.and_(same_next, same)
    if not pc.any(same_next).as_py():
        return table, 0
    tied = pc.and_(same_next, pc.equal(*pairs(working.INSTANT)))
    compared = [c for c in spec.columns if c.name not in keys and c.name != spec.stamp]
    differ = None
    for column in compared:
        before, after = pairs(column.name)
        apart = pc.not_equal(before, after)
        if column.nullable:  # NULL and NULL are the same; NULL and a value are not
            apart = pc.coalesce(apart, pc.xor(pc.is_null(before), pc.is_null(after)))
        differ = apart if differ is None else pc.or_(differ, apart)
    clash = tied if differ is None else pc.and_(tied, differ)
    if pc.any(clash).as_py():
        at = pc.index(clash, True).as_py()
        row = table.slice(at, 2).to_pylist()
        raise _tie(spec, row[0], row[1], compared)
    keep = pc.invert(pa.concat_arrays([same_next, pa.array([False])]))
    kept = table.filter(keep)
    return kept, n - kept.num_rows


def _tie(spec: TableSpec, first: dict, second: dict, compared) -> InvalidRowError:
    key = {name: first[name] for name in spec.primary_key}
    if spec.legacy is not None:  # orders' words: (paid 1.00 and refunded 1.00)
        why = spec.legacy.tie.format(
            first=" ".join(str(first[c.name]) for c in compared),
            second=" ".join(str(second[c.name]) for c in compared),
        )
        return spec.row_error(key, spec.stamp, first[spec.stamp], why)
    apart = ", ".join(
        f"{c.name} {first[c.name]!r} and {second[c.name]!r}"
        for c in compared
        if first[c.name] != second[c.name]
    )
    return spec.row_error(
        key,
        spec.stamp,
        first[spec.stamp],
        f"the source holds two rows with this key and this {spec.stamp} and different "
        f"values ({apart}), so neither can win; keep one",
    )
