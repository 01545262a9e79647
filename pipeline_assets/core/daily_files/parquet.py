"""The bytes of a Parquet day file (a file set declared ``format: parquet``): typed
columns, rows sorted by the primary key, the same rows giving the same bytes.

A day's table comes from either side the JSON files come from: rows of Python values
(:func:`parquet_table` of a list, checked by the JSON writer's own rules) or an Arrow
table of stored rows (the warehouse's, what the files asset and ``verify`` read). Both
end in one conversion, column by column, through each kind's codec
(:meth:`~pipeline_assets.core.table.codecs.base.Codec.parquet_array`): integer int64,
text string, ``decimal(P,S)`` decimal128(P,S), plain ``decimal`` its exact text, float
double, boolean bool, date date32, timestamp microseconds adjusted to UTC.

:data:`WRITER` fixes everything else that shapes the bytes: format version, compression
and its level, dictionary encoding, statistics, row-group and page sizes, no embedded
Arrow schema. A rebuild of an unchanged day therefore writes the same bytes with the
same pyarrow. Another pyarrow may encode them otherwise (its version is in every file's
``created_by``); its files hold the same rows, which is what ``verify`` then compares.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DayFilesError
from ..table import working
from ..table.spec import DailyFiles, TableSpec
from .hashes import allowed_rows, either, stored_array
from .layout import check_day
from .serialize import clean_rows, file_of, row_label

# Every option that shapes a file's bytes, fixed (see the module).
WRITER = {
    "version": "2.6",
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": True,
    "write_statistics": True,
    "data_page_version": "1.0",
    "data_page_size": 1 << 20,
    "store_schema": False,
    "write_page_index": False,
}
ROW_GROUP_ROWS = 1 << 20  # a day of up to a million rows is one row group


def parquet_schema(spec: TableSpec, files: DailyFiles | None = None) -> pa.Schema:
    """The columns of ``files``' Parquet day files, in its order, each of its declared
    type; a key or required column is not nullable."""
    files = file_of(spec, files)
    fields = []
    for name in files.columns:
        column = spec.column(name)
        kind = column.type
        required = name in spec.primary_key or not column.nullable
        fields.append(pa.field(name, kind.codec.parquet_type(kind), nullable=not required))
    return pa.schema(fields)


def _stored_form(rows: Sequence[Mapping], spec: TableSpec, files: DailyFiles) -> pa.Table:
    """Rows of a day file's JSON values as an Arrow table the codecs read (text for a
    decimal, a date and a timestamp)."""
    columns = {}
    for name in files.columns:
        kind = spec.column(name).type
        arrow = kind.codec.parquet_type(kind)
        if not (pa.types.is_integer(arrow) or pa.types.is_floating(arrow) or arrow == pa.bool_()):
            arrow = pa.string()
        columns[name] = pa.array([row[name] for row in rows], arrow)
    return pa.table(columns)


def parquet_table(
    day: str, rows: Sequence[Mapping] | pa.Table, spec: TableSpec, files: DailyFiles | None = None
) -> pa.Table:
    """The day's rows as its Parquet file holds them: :func:`parquet_schema`'s columns,
    sorted by the key. ``rows`` is a list of rows (each value as :func:`.serialize_day`
    takes it) or an Arrow table of the file's columns as the warehouse stores them (or
    already converted). A value the file cannot hold, or a key given twice, raises
    :class:`DayFilesError` naming the day, the row and the value; nothing is written."""
    check_day(day)
    files = file_of(spec, files)
    if not isinstance(rows, pa.Table):
        rows = _stored_form(clean_rows(day, rows, spec, files), spec, files)
    schema = parquet_schema(spec, files)
    arrays = []
    for field in schema:
        kind = spec.column(field.name).type
        array, wrong = stored_array(rows[field.name], kind)
        array, worse = kind.codec.parquet_array(kind, array)
        bad = either(wrong, worse)
        if not field.nullable and array.null_count:
            bad = either(bad, pc.is_null(array))
        if bad is not None and pc.any(bad).as_py():
            _refuse(day, rows, bad, field.name, spec)
        arrays.append(array if array.type == field.type else pc.cast(array, field.type))
    table = pa.Table.from_arrays(arrays, schema=schema)
    if table.num_rows > 1:
        table = table.sort_by([(k, "ascending") for k in spec.primary_key])
        _refuse_twice(day, table, spec)
    return table


def _refuse(day: str, rows: pa.Table, bad, name: str, spec: TableSpec) -> None:
    first = rows.filter(pc.fill_null(bad, False)).slice(0, 1).to_pylist()[0]
    kind = spec.column(name).type
    label = row_label(spec, tuple(first[k] for k in spec.primary_key))
    value = first[name]
    why = "is NULL in a required column" if value is None else f"is not a {kind} value"
    raise DayFilesError(f"day {day}, {label}: {name} {value!r} {why} of a Parquet day file")


def _refuse_twice(day: str, table: pa.Table, spec: TableSpec) -> None:
    """A key given twice (``table`` sorted by the key) is refused, naming it."""
    same = None
    for k in spec.primary_key:
        column = table[k].combine_chunks()
        equal = pc.equal(column.slice(1), column.slice(0, len(column) - 1))
        same = equal if same is None else pc.and_(same, equal)
    if pc.any(pc.fill_null(same, False)).as_py():
        at = pc.index(pc.fill_null(same, False), True).as_py()
        row = table.slice(at, 1).to_pylist()[0]
        label = row_label(spec, tuple(row[k] for k in spec.primary_key))
        raise DayFilesError(
            f"day {day}: {label} appears twice; a day holds each {spec.say('one_row')} once"
        )


def parquet_bytes(
    day: str, rows: Sequence[Mapping] | pa.Table, spec: TableSpec, files: DailyFiles | None = None
) -> tuple[bytes, int]:
    """(the bytes of the day's Parquet file, its rows): :func:`parquet_table` written with
    :data:`WRITER`, its key order recorded as the file's sorting columns."""
    import pyarrow.parquet as pq  # 0.15 s to import: only where a file is written or read

    table = parquet_table(day, rows, spec, files)
    sink = io.BytesIO()
    pq.write_table(
        table,
        sink,
        row_group_size=ROW_GROUP_ROWS,
        sorting_columns=[
            pq.SortingColumn(table.schema.get_field_index(k)) for k in spec.primary_key
        ],
        **WRITER,
    )
    return sink.getvalue(), table.num_rows


def read_parquet(data: bytes) -> pa.Table:
    """The table a Parquet day file holds; :class:`ValueError` when it is not one.

    Read on the calling thread, from the bytes in memory: pyarrow's default reads ahead
    on its IO threads (``pre_buffer``), and a process that exits while one of them is
    still alive aborts (``terminate called without an active exception``, SIGABRT;
    apache/arrow#34314) after its work is done: 2 of 60 short readers did so on this
    machine, none of 150 read this way. A day's bytes are already in memory: nothing to
    read ahead."""
    import pyarrow.parquet as pq

    try:
        return pq.read_table(pa.BufferReader(data), use_threads=False, pre_buffer=False)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"the file is not valid Parquet ({str(exc).splitlines()[0]})") from None


def view_tables(
    tables: Iterable[pa.Table], days: Mapping[int, str], spec: TableSpec, files: DailyFiles
) -> dict[str, pa.Table]:
    """``{day: the rows of the view on it}`` from Arrow tables of stored rows with their
    day (days since 1970-01-01: ``days`` maps the ones asked to ``YYYY-MM-DD``), each day
    holding the file's columns as stored (an empty table for a day with no row)."""
    wanted = pa.array(sorted(days), pa.int32())
    parts: dict[int, list[pa.Table]] = {number: [] for number in days}
    names = list(files.columns)
    for table in tables:
        keep = pc.is_in(table[working.DAY], value_set=wanted)
        for name, allowed in files.where:
            kind = spec.column(name).type
            keep = pc.and_(keep, allowed_rows(stored_array(table[name], kind)[0], kind, allowed))
        table = table.filter(keep)
        if not table.num_rows:
            continue
        table = table.select([*names, working.DAY]).sort_by(working.DAY)
        numbers = table[working.DAY].to_numpy()
        cuts = [0, *(np.flatnonzero(np.diff(numbers)) + 1).tolist(), len(numbers)]
        for start, end in itertools.pairwise(cuts):
            parts[int(numbers[start])].append(table.slice(start, end - start).select(names))
    out = {}
    for number, day in sorted(days.items()):
        found = parts[number]
        out[day] = pa.concat_tables(found, promote_options="permissive") if found else None
    return {day: table if table is not None else _empty(spec, files) for day, table in out.items()}


def _empty(spec: TableSpec, files: DailyFiles) -> pa.Table:
    return parquet_schema(spec, files).empty_table()
