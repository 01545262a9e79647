"""The row rules applied to a whole Arrow batch at once, for any declared table.

A scanned batch (a :class:`~pipeline_assets.core.table.spec.TableSpec`'s declared columns, as the
source holds them) becomes that table's NORMAL table (:func:`normal_schema`): each declared column
as the warehouse stores it (:meth:`~pipeline_assets.core.table.types.ColumnType.stored`: exact
decimal text, canonical UTC timestamps, ``YYYY-MM-DD`` dates), plus the row's ``instant`` (its
cursor as an instant) and ``day`` (the day column's day in the pipeline's zone; the day
column is the cursor unless the declaration names another, whose instant is then kept too).

Each column takes a vectorized fast path for its common forms (:mod:`.fast`).
Every row the fast path does not vouch for (a ``+`` sign, ``1e3``, a comma, a DST-gap
wall clock, a NULL in a required column ...) goes through the exact parser, one row at a
time (:mod:`.checks`): :meth:`~pipeline_assets.core.table.types.ColumnType.parse` for each column,
with the row rules of the table's :class:`~pipeline_assets.core.table.spec.Legacy` where it
has one (``orders``). Same result, same error naming the table, the column, the row's key and
the value. The fast path only ever
accepts what the exact parser accepts and produces the same stored value, day and
instant; the tests compare both on every form, for ``orders`` and for a table of every
type.

"""

from __future__ import annotations

from datetime import datetime, tzinfo
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc

from ..table import working
from ..table.spec import TableSpec
from ..times import UTC
from ..times.arrays import INSTANT, zone_name
from .checks import parse_rows
from .fast import fast_column, text_column


@lru_cache(maxsize=64)
def normal_schema(spec: TableSpec) -> pa.Schema:
    """The NORMAL table of ``spec``: its declared columns in their stored form, in declared
    order, then ``instant`` (the cursor as an instant; a ``date`` cursor is midnight of
    its day in the pipeline's zone), ``day`` (the day column's day in that zone, as days
    since 1970-01-01) and, where the day column is not the cursor, ``day_at`` (the day
    column as an instant). Every field is nullable (a nullable column's NULL stays NULL)."""
    return pa.schema(
        [(c.name, c.type.codec.arrow_type) for c in spec.columns]
        + [(working.INSTANT, INSTANT), (working.DAY, pa.int32())]
        + ([(working.DAY_AT, INSTANT)] if spec.day_apart else [])
    )


def normalize(raw: pa.RecordBatch | pa.Table, tz: tzinfo, spec: TableSpec) -> pa.Table:
    """Validate and normalize every row of ``raw`` (``spec``'s declared columns, as the
    source scan returns them) into :func:`normal_schema`; raises :class:`InvalidRowError`
    naming the first invalid row.

    Rows keep their order within each of the two paths; callers sort afterwards.
    """
    schema = normal_schema(spec)
    n = raw.num_rows
    zone = zone_name(tz)
    if n == 0:
        return schema.empty_table()
    try:
        fast = _fast(raw, zone, spec, schema) if zone is not None else None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        fast = None  # something the kernels refuse: let the exact parser name it
    if fast is None:
        return parse_rows(raw, tz, spec, schema)
    table, ok = fast
    if pc.all(ok).as_py():
        return table
    good = table.filter(ok)
    rest = parse_rows(raw.filter(pc.invert(ok)), tz, spec, schema)
    return pa.concat_tables([good, rest])


def _fast(raw, zone: str, spec: TableSpec, schema: pa.Schema) -> tuple[pa.Table, pa.Array]:
    """(the NORMAL table, ok): ``ok`` marks the rows the fast path vouches for; the
    values of the other rows are meaningless (the exact parser reads those rows)."""
    nonblank = spec.legacy.nonblank if spec.legacy else ()
    out, ok, extras = {}, None, {}
    for column in spec.columns:
        values = raw.column(column.name)
        if pa.types.is_null(values.type):  # a reader's type for a batch of NULLs only
            values = pc.cast(values, pa.string())
        if column.name in nonblank and column.type.codec.any_text:
            stored, good = _nonblank(values, column.name)
            extra = None
        else:
            stored, good, extra = fast_column(values, column.type, zone)
        if column.nullable and values.null_count:
            present = pc.is_valid(values)
            good = pc.or_(good, pc.invert(present))
            stored = pc.if_else(present, stored, pa.scalar(None, stored.type))
        if column.name in (spec.stamp, spec.day):
            extras[column.name] = extra
        out[column.name] = stored
        ok = good if ok is None else pc.and_(ok, good)
    # a timestamp: its instants and their days (rows outside the zone rules are not ok);
    # a date: its midnight in the zone, and the day itself
    kind = spec.column(spec.stamp).type
    out[working.INSTANT], out[working.DAY], good = kind.codec.stamp_arrays(
        kind, extras[spec.stamp], zone
    )
    if good is not None:
        ok = pc.and_(ok, good)
    if spec.day_apart:  # the day (and the instant a range selects it by): the day column's
        kind = spec.column(spec.day).type
        out[working.DAY_AT], out[working.DAY], good = kind.codec.stamp_arrays(
            kind, extras[spec.day], zone
        )
        if good is not None:
            ok = pc.and_(ok, good)
    return pa.table(out, schema=schema), ok


def _nonblank(values, name: str) -> tuple[pa.Array, pa.Array]:
    """(stored, ok) of a text column where blank text is missing (``orders``' status):
    a blank value is left to the exact parser, which refuses it."""
    stored = text_column(values, name)
    return stored, pc.fill_null(pc.not_equal(pc.utf8_trim_whitespace(stored), ""), False)


def within(
    table: pa.Table, start: datetime | None, end: datetime | None, *, by_day: bool = False
) -> pa.Table:
    """Only the rows with ``start <= instant < end`` (either side open): the cursor's
    instant, or (``by_day``: a range load) the day column's, where it has its own."""
    apart = by_day and working.DAY_AT in table.column_names
    at = table[working.DAY_AT if apart else working.INSTANT]
    mask = None
    if start is not None:
        mask = pc.greater_equal(at, pa.scalar(start.astimezone(UTC), INSTANT))
    if end is not None:
        upper = pc.less(at, pa.scalar(end.astimezone(UTC), INSTANT))
        mask = upper if mask is None else pc.and_(mask, upper)
    return table if mask is None else table.filter(mask)
