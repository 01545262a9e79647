"""Per-day views of the warehouse, for any declared table: the rows of a daily file's
view on each day, and their exact totals.

A view is a :class:`~pipeline_assets.core.table.spec.DailyFiles` of a
:class:`~pipeline_assets.core.table.spec.TableSpec`: the rows of the warehouse table ``spec.name``
matching its ``where``, whose day column (the cursor by default) falls on the day in the
pipeline's zone, holding exactly the file's columns, sorted by the primary key (integers by
value, text by code point: sorted here, never by the database's collation).

One query per run, over the whole range of days asked for, however many days that is: a
timestamp day column is stored as canonical UTC text, which sorts as it compares, so a day in
any time zone is a plain indexed range ``[midnight, next midnight)`` on that column; a
date column is stored as ``YYYY-MM-DD`` text, and the day is that date.

The warehouse keeps each value in its stored form
(:meth:`~pipeline_assets.core.table.types.ColumnType.stored`); the view gives each in the form a day
file writes (:meth:`~pipeline_assets.core.table.types.ColumnType.to_json`), read back through
:meth:`~pipeline_assets.core.table.types.ColumnType.from_stored`. A stored value that is not of its
column's type is passed on as it is, so that :func:`.serialize_day` refuses it with the day, the row
and the value in its words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import tzinfo
from decimal import Decimal

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..db.engines import guard, has_table, writing
from ..db.schema import missing_columns, totals_columns, totals_table, warehouse_table
from ..errors import TypeValueError
from ..table.codecs.decimals import format_decimal
from ..table.spec import DailyFiles, TableSpec, Totals
from ..table.types import ColumnType
from ..times import UTC, canonical, day_end, day_start, from_canonical, parse_day
from .serialize import file_of

_ENV = "WAREHOUSE_DATABASE_URL"


def day_rows(
    warehouse: Engine,
    days: Iterable[str],
    tz: tzinfo,
    spec: TableSpec,
    files: DailyFiles | None = None,
) -> dict[str, list[dict]]:
    """``{day: [row, …]}`` for every day asked (an empty list for a day with no row):
    the rows of ``files`` (default: the declaration's first daily file) of ``spec``
    (default: ``orders``) whose day column falls on the day in ``tz``, each a dict of exactly
    the file's columns in JSON-ready form (a timestamp in ``tz``, so a reader sees the
    local time that put the row on that day), sorted by the primary key.

    A warehouse no load has made the table in yet has no rows.
    """
    files = file_of(spec, files)
    wanted = sorted({parse_day(d) for d in days})
    out: dict[str, list[dict]] = {d.isoformat(): [] for d in wanted}
    if not wanted:
        return out
    names = list(dict.fromkeys([*files.columns, *(c for c, _ in files.where), spec.day]))
    c = warehouse_table(spec).c
    conditions = [*_day_range(c, spec, wanted, tz), *_view_filter(c, spec, files)]
    # A read: no schema creation and no write transaction (verify calls this per span).
    if not has_table(warehouse, spec.name, _ENV):
        return out
    with guard(warehouse, _ENV):
        absent = missing_columns(warehouse, spec)  # declared since the last load: NULL
    query = (
        sa.select(*(sa.null().label(n) if n in absent else c[n] for n in names))
        .where(*conditions)
        .order_by(*(c[k] for k in spec.primary_key))
    )
    _read_days(warehouse, query, names, out, tz, spec, files)
    return out


def _day_range(c, spec: TableSpec, wanted: list, tz: tzinfo) -> list:
    """The day column's range over the days ``wanted`` (sorted), each bound under a name of
    its own: SQLAlchemy names a bound value after its column otherwise, and a column's
    name may be any text (a space breaks an IN list)."""
    if spec.column(spec.day).type.codec.is_instant:
        low = canonical(day_start(wanted[0], tz))
        high = canonical(day_end(wanted[-1], tz))
        return [
            c[spec.day] >= sa.bindparam("low", low),
            c[spec.day] < sa.bindparam("high", high),
        ]
    return [  # a date: the day is the date itself
        c[spec.day] >= sa.bindparam("low", wanted[0].isoformat()),
        c[spec.day] <= sa.bindparam("high", wanted[-1].isoformat()),
    ]


def _view_filter(c, spec: TableSpec, files: DailyFiles) -> list:
    """The view's ``where``, as the warehouse stores its values."""
    conditions = []
    for i, (name, allowed) in enumerate(files.where):
        kind = spec.column(name).type
        values = [kind.stored(v) for v in allowed if v is not None]
        match = (
            c[name].in_(sa.bindparam(f"where{i}", values, expanding=True)) if values else sa.false()
        )
        conditions.append(sa.or_(match, c[name].is_(None)) if None in allowed else match)
    return conditions


def _read_days(
    warehouse: Engine,
    query,
    names: list[str],
    out: dict[str, list[dict]],
    tz: tzinfo,
    spec: TableSpec,
    files: DailyFiles,
) -> None:
    """Each row of ``query`` (columns ``names``) in JSON-ready form, under its day in
    ``out`` (rows of days not asked are dropped), sorted by the primary key."""
    cursor = spec.column(spec.day)
    day_of_row = _day_reader(cursor.type, tz)
    shown_cursor = spec.day in files.columns and cursor.type.codec.is_instant
    at = {n: i for i, n in enumerate(names)}
    readers = [
        (
            n,
            at[n],
            _skip if shown_cursor and n == spec.day else json_reader(spec.column(n).type, tz),
        )
        for n in files.columns
    ]
    cursor_at = at[spec.day]
    keys = [at[k] for k in spec.primary_key]
    sorted_by_database = all(spec.column(k).type.codec.orders_numerically for k in spec.primary_key)
    per_day: dict[str, list[tuple]] = {}
    with guard(warehouse, _ENV):
        with warehouse.connect() as conn:
            for stored in conn.execute(query):
                day, local = day_of_row(stored[cursor_at])
                if day not in out:
                    continue
                row = {name: read(stored[i]) for name, i, read in readers}
                if shown_cursor:  # the local time that put the row on this day
                    row[spec.day] = local.isoformat()
                if sorted_by_database:
                    out[day].append(row)
                else:
                    # stored keys sort as they compare: text by code point (canonical
                    # UTC text and ISO dates too), numbers and a driver's dates by value
                    per_day.setdefault(day, []).append((tuple(stored[i] for i in keys), row))
    for day, pairs in per_day.items():  # code point order, whatever the collation
        pairs.sort(key=lambda pair: pair[0])
        out[day] = [row for _, row in pairs]


def _skip(value) -> None:
    return None


def _day_reader(kind: ColumnType, tz: tzinfo) -> Callable:
    """stored cursor → (its day ``YYYY-MM-DD`` in ``tz``, the local datetime or None)."""
    if kind.codec.is_instant:

        def read(value):
            if isinstance(value, str):
                local = from_canonical(value).astimezone(tz)
            else:
                local = kind.from_stored(value, tz).astimezone(tz)
            return local.date().isoformat(), local

        return read

    def read_date(value):
        return (value if isinstance(value, str) else kind.from_stored(value, tz).isoformat())[
            :10
        ], None

    return read_date


def json_reader(kind: ColumnType, tz: tzinfo) -> Callable[[object], object]:
    """stored value → the value as a day file writes it
    (:meth:`~pipeline_assets.core.ColumnType.to_json` of
    :meth:`~pipeline_assets.core.ColumnType.from_stored`). A plain ``decimal`` is kept as the text
    the warehouse holds (the source's spelling). A value not of the type comes back as it is,
    for :func:`.serialize_day` to refuse in its words."""
    ready = kind.codec.json_as_stored(kind)  # written as stored: no conversion

    def convert(value):
        if value is None:
            return None
        try:
            return kind.to_json(kind.from_stored(value, tz), tz)
        except (TypeValueError, ValueError, TypeError):
            return value

    if ready is not None:
        return lambda v: v if type(v) is ready else convert(v)
    return convert


# --- totals ------------------------------------------------------------------------------


def day_totals(rows, totals: Totals, spec: TableSpec):
    """The totals of one day's rows (a JSON day's list of rows, or a Parquet day's
    ``pyarrow.Table``): ``(rows, {column: exact sum})`` over the columns ``totals`` sums
    (NULLs left out): a ``Decimal`` for a decimal column (exact, whatever its digits), an
    ``int`` for an integer, a ``float`` for a float (``math.fsum``: the correctly rounded
    sum, whatever the order).
    """
    sums = {}
    for name in totals.sum:
        kind = spec.column(name).type
        column = [r[name] for r in rows] if isinstance(rows, Sequence) else rows[name].to_pylist()
        values = [kind.parse(v, UTC) for v in column if v is not None]
        sums[name] = kind.codec.total(kind, values)
    return len(rows), sums


def total_text(value) -> str:
    """A sum as its table stores it: exact text (a float as the shortest text that reads
    back as it)."""
    if isinstance(value, Decimal):
        return format_decimal(value)
    return repr(value)


def store_totals(
    warehouse: Engine,
    spec: TableSpec,
    totals: Totals,
    per_day: Mapping[str, tuple[int, Mapping[str, object]]],
) -> None:
    """Replace each day's row of the ``totals`` table (made when missing), in one
    transaction for the run; ``per_day`` as :func:`day_totals` gives each day's."""
    if not per_day:
        return
    table = totals_table(spec, totals)
    count, columns = totals_columns(spec, totals)
    summed = {f"sum{i}": name for i, name in enumerate(totals.sum)}  # bound names of our own
    insert = table.insert().values(
        {
            table.c.day: sa.bindparam("day_"),
            table.c[count]: sa.bindparam("rows_"),
            **{table.c[columns[name]]: sa.bindparam(bound) for bound, name in summed.items()},
        }
    )
    with guard(warehouse, _ENV), writing(warehouse).begin() as conn:
        table.create(conn, checkfirst=True)
        conn.execute(table.delete().where(table.c.day.in_(list(per_day))))
        conn.execute(
            insert,
            [
                {
                    "day_": day,
                    "rows_": count,
                    **{bound: total_text(sums[name]) for bound, name in summed.items()},
                }
                for day, (count, sums) in sorted(per_day.items())
            ],
        )
