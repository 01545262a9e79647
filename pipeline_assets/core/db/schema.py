"""A declared table's warehouse table: its columns in their stored forms, its key, and the
index on its change stamp.

The stored form of each type is :meth:`~pipeline_assets.core.table.types.ColumnType.stored`'s: exact
text for decimals, canonical UTC text for timestamps (fixed width, so it sorts as it compares, on
SQLite and PostgreSQL alike), ``YYYY-MM-DD`` for dates, 64-bit integers, double precision
floats, booleans (0/1 on SQLite). Key columns are NOT NULL; every other column is
nullable in the warehouse, "required" being checked when the source is read, so a column
added to a declaration later can be added to a table that already holds rows.

``orders`` keeps the table it has always had: its columns NOT NULL, as its spec's
``legacy`` says.
"""

from __future__ import annotations

from functools import lru_cache

import sqlalchemy as sa

from ..table.spec import TableSpec, Totals
from ..table.types import ColumnType


def column_sql_type(kind: ColumnType, *, rowid: bool = False) -> sa.types.TypeEngine:
    """The SQLAlchemy type of a stored column of ``kind`` (``rowid``: the single integer
    key, which SQLite makes the table's rowid when declared INTEGER): its codec's."""
    return kind.codec.sql_type(kind, rowid=rowid)


@lru_cache(maxsize=64)
def warehouse_table(spec: TableSpec) -> sa.Table:
    """The warehouse table of ``spec`` (its own MetaData: created with the first load)."""
    # On SQLite, a single INTEGER key (64-bit there too) is the table's rowid: one B-tree
    # instead of the table plus a key index, about half the cost of each insert and
    # lookup. A warehouse created with BIGINT before keeps working as it is.
    rowid = (
        len(spec.primary_key) == 1
        and spec.column(spec.primary_key[0]).type.codec.orders_numerically
    )
    columns = [
        sa.Column(
            c.name,
            column_sql_type(c.type, rowid=rowid),
            # orders' columns are NOT NULL, as the release before declarations made them
            nullable=c.name not in spec.primary_key and not spec.legacy,
            autoincrement=False,
            quote=True,
        )
        for c in spec.columns
    ]
    # the key's columns in key order, whatever their order among the columns
    table = sa.Table(
        spec.name, sa.MetaData(), *columns, sa.PrimaryKeyConstraint(*spec.primary_key), quote=True
    )
    sa.Index(index_name(spec), table.c[spec.stamp])
    if spec.day_apart:  # what day files, verify and range loads select by
        sa.Index(index_name(spec, spec.day), table.c[spec.day])
    return table


def totals_columns(spec: TableSpec, totals: Totals) -> tuple[str, dict[str, str]]:
    """The columns of ``totals``' warehouse table: its count column (``rows``) and, by
    summed column, the column of its sum (the same name); ``orders``' totals keep the
    names they always had (``daily_revenue``: ``orders``, ``revenue``)."""
    legacy = spec.legacy
    if legacy is not None and spec.daily_files and totals == spec.daily_files[0].totals:
        count, column = legacy.totals_columns
        return count, {totals.sum[0]: column}
    return "rows", {name: name for name in totals.sum}


def totals_table(spec: TableSpec, totals: Totals) -> sa.Table:
    """The warehouse table of ``totals``: ``day`` (``YYYY-MM-DD`` in the pipeline's zone,
    the key), the row count and one exact text column per summed column
    (:func:`totals_columns`)."""
    count, columns = totals_columns(spec, totals)
    return sa.Table(
        totals.name,
        sa.MetaData(),
        sa.Column("day", sa.String(10), primary_key=True),
        sa.Column(count, sa.BigInteger, nullable=False),
        *(sa.Column(name, sa.Text, nullable=False) for name in columns.values()),
    )


def index_name(spec: TableSpec, column: str | None = None) -> str:
    """``<name>_<cursor>_idx``, as ``orders_updated_at_idx`` (kept within SQL's 63); the
    index of another ``column`` likewise."""
    return f"{spec.name}_{column or spec.stamp}_idx"[:63]


def present_columns(bind: sa.Engine | sa.Connection, name: str) -> set[str]:
    """The columns the warehouse table ``name`` has (one catalog query; none if missing)."""
    if bind.dialect.name == "sqlite":
        quoted = name.replace('"', '""')
        sql, params = f'SELECT name FROM pragma_table_info("{quoted}")', {}
    else:
        sql = (
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = :t"
        )
        params = {"t": name}
    if isinstance(bind, sa.Engine):
        with bind.connect() as conn:
            return set(conn.execute(sa.text(sql), params).scalars())
    return set(bind.execute(sa.text(sql), params).scalars())


def missing_columns(bind: sa.Engine | sa.Connection, spec: TableSpec) -> frozenset[str]:
    """The declared columns ``spec``'s warehouse table lacks: declared since its last load,
    which adds them (core/warehouse/evolve.py). Readers read them as NULL until then."""
    present = present_columns(bind, spec.name)
    return frozenset(c for c in spec.column_names if present and c not in present)


def ensure_table(conn: sa.Connection, spec: TableSpec) -> None:
    """Create the warehouse table of ``spec`` and its index if missing, in ``conn``'s
    transaction; a table made before its ``day_column`` was declared gains that index."""
    table = warehouse_table(spec)
    table.create(conn, checkfirst=True)
    if spec.day_apart:
        for index in table.indexes:
            index.create(conn, checkfirst=True)
