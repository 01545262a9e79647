"""The source's SQL: how a declared table's names, window and rows are written for each
dialect (SQLite, PostgreSQL, MySQL/MariaDB). :mod:`.scan` runs it.

For ``orders`` every statement is the one it was before declarations existed, byte for
byte (the plans measured in ``docs/benchmarks`` depend on them). Names are quoted for the
dialect only where it needs it (``"Order"``, ``"user"`` on PostgreSQL, ``shop.payments``
as schema and table).

The SQL filter on the cursor (``updated_at`` for orders) must use the index, so it
compares the column in its own type. A text column can only be compared as strings, and
strings with different offsets or forms do not sort as instants, so for text the SQL
bound is a safe superset (a day wider on each side) and the exact comparison happens
after parsing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo

import sqlalchemy as sa

from ..db.engines import MYSQL
from ..db.quoting import preparer, quote
from ..table import working
from ..table.spec import Column, TableSpec
from ..times import UTC


@dataclass(frozen=True)
class SourceTable:
    """A source table as reflected for a declaration.

    ``table``: its columns and their database types; ``cursor_kind``: how the cursor
    compares in SQL ("text" | "date" | "timestamp" | "timestamptz"; ``spec``: the
    declaration; ``undeclared``: the names of the columns the source has and the
    declaration does not (sorted; never read, the load reports them).
    """

    table: sa.Table
    cursor_kind: str
    spec: TableSpec
    undeclared: list[str] = field(default_factory=list, hash=False)
    day_kind: str | None = None  # how the day column compares, where it is not the cursor

    def kind_of(self, by_day: bool) -> str:
        """How the window's column compares: the cursor's, or (``by_day``) the day
        column's; "integer" for an integer cursor's window of ids."""
        if self.spec.counts_ids and not by_day:
            return "integer"
        return self.day_kind if by_day and self.day_kind else self.cursor_kind

    def window_column(self, by_day: bool) -> str:
        """The declared column a window selects by: the cursor, or (``by_day``) the day's."""
        if by_day:
            return self.spec.day
        return self.spec.cursor if self.spec.counts_ids else self.spec.stamp


def _kind(dialect: str, col_type) -> str:
    """How a column of this database type compares: "text" | "date" | "timestamp" |
    "timestamptz"."""
    if dialect == "sqlite" or not isinstance(col_type, (sa.Date, sa.DateTime)):
        return "text"  # SQLite stores dates as text whatever the declared type
    if dialect == MYSQL and isinstance(col_type, sa.TIMESTAMP):
        return "timestamptz"  # stored as UTC, read in the session's zone: UTC (db.py)
    if isinstance(col_type, sa.DateTime):
        return "timestamptz" if col_type.timezone else "timestamp"
    return "date"


def _sql_bound(kind: str, instant: datetime | int, tz: tzinfo, *, lower: bool):
    """A value of a column's own type (``kind``) that bounds ``instant`` loosely enough
    (an id bounds itself)."""
    if kind == "integer":
        return int(instant)
    if kind == "timestamptz":
        return instant
    if kind == "text":
        # Any offset or zone shifts a local date by at most one day from UTC: the
        # string 'YYYY-MM-DD' one day (lower) or two days (upper) out is a superset.
        day = instant.astimezone(UTC).date() + timedelta(days=-1 if lower else 2)
        return day.isoformat()
    local = instant.astimezone(tz)
    if kind == "date":
        return local.date() if lower else local.date() + timedelta(days=1)
    shift = timedelta(days=-1 if lower else 1)  # DST folds: a day is always enough
    return local.replace(tzinfo=None) + shift


# --- names, as SQL -----------------------------------------------------------------------


def table_sql(spec: TableSpec, dialect: str) -> str:
    """The declaration's source table as ``dialect``'s SQL: ``orders``, ``shop.payments``,
    ``"Order"``."""
    schema, _, name = spec.table.rpartition(".")
    if not schema:
        return quote(name, dialect)
    shown = preparer(dialect).quote_schema(schema)
    return f"{shown.replace('%%', '%') if dialect != 'sqlite' else shown}.{quote(name, dialect)}"


# --- the window, as SQL ------------------------------------------------------------------


def _literal(value, dialect: str) -> str:
    """A bound computed by :func:`_sql_bound` as SQL text (our own dates, never user text).
    MySQL takes no offset in a literal: an instant is written as its UTC wall clock, which
    the session's zone (UTC) reads back as that instant."""
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime):
        if dialect == MYSQL:
            if value.tzinfo is not None:
                value = value.astimezone(UTC).replace(tzinfo=None)
            return f"'{value.isoformat(sep=' ')}'"
        return f"'{value.isoformat()}'"
    if isinstance(value, date):
        return f"'{value.isoformat()}'"
    return "'" + str(value).replace("'", "''") + "'"


def _read_as(src: SourceTable, column: Column, dialect: str) -> str:
    """One declared column as the scan selects it (the rules: :func:`scan_sql`)."""
    name = quote(column.name, dialect)
    col_type = src.table.c[column.name].type
    stored = (
        src.cursor_kind
        if column.name == src.spec.stamp
        else src.kind_of(True)
        if column.name == src.spec.day
        else _kind(dialect, col_type)
    )
    if dialect == "sqlite":
        return f"CAST({name} AS TEXT) AS {name}"
    read = column.type.codec.source_select(column.type, name, col_type, stored, dialect)
    return name if read is None else f"{read} AS {name}"


def _numeric_key(column: str, dialect: str) -> str:
    """The key of a text key column as the integer it holds; a value that is none sorts
    last, where validation names it."""
    if dialect == "sqlite":
        return f"CAST({column} AS INTEGER), {column}"
    if dialect == MYSQL:
        return f"CAST({column} AS SIGNED), {column}"
    return (
        rf"CASE WHEN trim(CAST({column} AS TEXT)) ~ '^-?[0-9]{{1,18}}$' "
        f"THEN CAST(trim(CAST({column} AS TEXT)) AS BIGINT) END, {column}"
    )


def _order_by(src: SourceTable, dialect: str, *, plus: bool) -> str:
    """The primary key's columns in key order, each compared as its type, never by a
    database's collation (``plus``: SQLite's ``+``, no index serves the order)."""
    table = table_sql(src.spec, dialect)
    terms = []
    for key in src.spec.primary_key:
        codec = src.spec.column(key).type.codec
        col_type = src.table.c[key].type
        # the column, qualified: a bare name is the text alias of the select list
        column = f"{table}.{quote(key, dialect)}"
        if codec.orders_numerically:
            terms.append(
                _numeric_key(column, dialect)
                if not isinstance(col_type, sa.Integer)
                else f"+{column}"
                if plus
                else column
            )
        elif dialect != "sqlite" and codec.is_moment and _kind(dialect, col_type) != "text":
            terms.append(column)  # a native date or instant orders as one
        elif dialect == "sqlite":  # BINARY: code point order of UTF-8, whatever the column's
            terms.append(f"{'+' if plus else ''}{column} COLLATE BINARY")
        elif dialect == MYSQL:
            terms.append(f"CAST({column} AS BINARY)")
        else:
            terms.append(f'CAST({column} AS TEXT) COLLATE "C"')
    return ", ".join(terms)


def _nullable(spec: TableSpec) -> list[int]:
    """The positions of the nullable columns among the declared ones."""
    return [i for i, c in enumerate(spec.columns) if c.nullable]


def _select_list(src: SourceTable, dialect: str) -> list[str]:
    """The declared columns as :func:`scan_sql` selects them, in declaration order.

    On SQLite a nullable column is read as ``ifnull(…, '')`` with a ``… IS NULL`` column
    after the declared ones, which :func:`scan_window` folds back into NULLs: SQLite's
    Arrow reader guesses a column's type from its first batch, and a column NULL
    throughout it would make a later text an error.
    """
    spec = src.spec
    columns = [_read_as(src, c, dialect) for c in spec.columns]
    if dialect == "sqlite":
        for i in _nullable(spec):
            name = quote(spec.columns[i].name, dialect)
            columns[i] = f"ifnull(CAST({name} AS TEXT), '') AS {name}"
            flag = quote(f"{working.NULL_FLAG}{i}", dialect)
            columns.append(f"{name} IS NULL AS {flag}")
    return columns


def scan_sql(
    src: SourceTable,
    dialect: str,
    tz: tzinfo,
    start: datetime | None,
    end: datetime | None,
    *,
    by_index: bool = False,
    by_day: bool = False,
    also: tuple[int, ...] = (),
) -> str:
    """The window's rows as plain SQL for the Arrow reader: the declared columns, in
    declaration order, ordered by the primary key.

    How each declared type is read, per dialect (an integer column "native" only where the
    source column is an integer type; otherwise as text, parsed as text):

    ============  ===================  ==================================  =================
    type          SQLite               MySQL / MariaDB                     PostgreSQL
    ============  ===================  ==================================  =================
    integer       TEXT                 native (else CHAR)                  native (else TEXT)
    text          TEXT                 CHAR                                TEXT
    decimal(P,S)  TEXT                 CHAR (exact spelling)               TEXT (exact)
    float         TEXT (round-trips)   CHAR                                TEXT (shortest
                                                                           exact spelling)
    boolean       TEXT ('0'/'1')       CHAR ('0'/'1'; BIT as col+0)        native bool (else
                                                                           TEXT)
    date          TEXT                 CHAR ('YYYY-MM-DD')                 native date (else
                                                                           TEXT)
    timestamp     TEXT                 CHAR; a TIMESTAMP + '+00:00'        native (else TEXT)
    ============  ===================  ==================================  =================

    On SQLite every value is read as text (a column may mix types row by row, and a
    columnar reader fixes one type per column); the exact parser reads it as before. A
    nullable column is read there with a flag: :func:`_select_list`.

    The order: integer key columns by value (one that is not an integer column is sorted
    as the integers it holds, 9 before 10, as every reader of the scan expects), text by
    code point (``COLLATE BINARY`` on SQLite, ``CAST(… AS BINARY)`` on MySQL,
    ``COLLATE "C"`` on PostgreSQL; never the database's collation), native dates and
    instants as such. All copies of one key are adjacent.

    ``by_index`` (SQLite): ``ORDER BY +orders.order_id``, which keeps the planner from
    scanning the table in key order, so it reads the window through the ``updated_at``
    index and sorts what it read. Without it a bounded window is filtered on
    ``+updated_at``: SQLite, which keeps no statistics, would otherwise read a range of a
    month through the index and sort it all (3.5 s for a million rows, against 1 s for the
    scan in key order).

    ``by_day``: the window is on the day column (a range load), not on the cursor.
    ``also``: ids an integer cursor's window reads besides (its remembered holes).
    """
    cursor = quote(src.window_column(by_day), dialect)
    filtered = f"+{cursor}" if dialect == "sqlite" and not by_index else cursor
    where = window_filter(src, dialect, tz, start, end, column=filtered, by_day=by_day, also=also)
    order = _order_by(src, dialect, plus=bool(by_index and where))
    return (
        f"SELECT {', '.join(_select_list(src, dialect))} FROM {table_sql(src.spec, dialect)}"
        f"{where} ORDER BY {order}"
    )


def window_filter(
    src: SourceTable,
    dialect: str,
    tz: tzinfo,
    start: datetime | None,
    end: datetime | None,
    *,
    column: str | None = None,
    by_day: bool = False,
    also: tuple[int, ...] = (),
) -> str:
    """`` WHERE …`` on the cursor (``by_day``: on the day column) for ``[start, end)``, in
    the column's own type ("" for all): the window rule of every reader. For a text
    column it is the safe superset :func:`_sql_bound` gives; readers of rows apply the
    exact bounds after parsing. ``column``: that column as SQL (default: its quoted name);
    ``+updated_at`` keeps SQLite from reading the window through the index. ``also``: ids
    read besides the window (an integer cursor's remembered holes, our own integers)."""
    if column is None:
        column = quote(src.window_column(by_day), dialect)
    kind = src.kind_of(by_day)
    cast = (
        {"timestamptz": "::timestamptz", "timestamp": "::timestamp", "date": "::date"}.get(kind, "")
        if dialect == "postgresql"
        else ""
    )
    where = []
    if start is not None:
        bound = _literal(_sql_bound(kind, start, tz, lower=True), dialect)
        where.append(f"{column} >= {bound}{cast}")
    if end is not None:
        bound = _literal(_sql_bound(kind, end, tz, lower=False), dialect)
        where.append(f"{column} < {bound}{cast}")
    if also and where:
        ids = ", ".join(str(int(n)) for n in also)
        return f" WHERE ({' AND '.join(where)} OR {column} IN ({ids}))"
    return " WHERE " + " AND ".join(where) if where else ""


def keys_sql(src: SourceTable, dialect: str) -> str:
    """Every row's primary key, whatever its cursor, as plain SQL (unordered); each key
    column read as :func:`scan_sql` reads it."""
    keys = [_read_as(src, src.spec.column(k), dialect) for k in src.spec.primary_key]
    return f"SELECT {', '.join(keys)} FROM {table_sql(src.spec, dialect)}"
