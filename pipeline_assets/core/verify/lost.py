"""Which warehouse rows the source holds nowhere any more, asked by key.

The ``orders_match_source`` check names, on each day it found different, the orders the
source lost (deleted in the app) apart from those that only moved (their ``updated_at``
now falls on another day). An order is *held* when some source row, whatever its
``updated_at``, has its key as :func:`~pipeline_assets.core.rows.normalize.keys_of` reads it:
the rule of :func:`~pipeline_assets.core.source.scan.scan_keys`, the range load's scan of
every key. :func:`lost_keys` gives the same answer without reading every key of the
source:

1. the source's keys stamped in the days compared (the window's SQL superset, through
   the ``updated_at`` index): a warehouse key among them is held, it has not even moved;
2. the keys left, the ones that left those days, looked up by key: ``IN`` lists of
   :data:`LOOKUP_BATCH` keys, each a probe of the key's index. A row found holds the key
   its value reads as (``keys_of``), exactly as in the scan;
3. when keys are still not found and the key column can hold text (any SQLite column; a
   text column elsewhere), the rows whose key is not written the plain way (``' 0101'``,
   ``'101\\n'``, a blob: order 101 all the same, never matched by ``'101'``): on SQLite
   the text and blob values, a range of the key's index that is empty where the keys are
   integers; on a PostgreSQL or MySQL text column a filter the server applies to every
   row, returning only those.

So the cost grows with the days compared and the keys that left them, not the table.
For a declared table the same steps run on its key (:mod:`~pipeline_assets.core.rows.keys`): a
composite key is looked up by its first column (its index's), and the rows found hold the keys they
read as; a text key is matched as it is written, so step 3 is only for integer keys; a key
whose first column is a date or a timestamp (spelled many ways) keeps the scan.
Only ``SELECT``s: no temporary table, nothing written to the source. Two cases keep the
scan of every key (:func:`~pipeline_assets.core.source.scan.scan_keys`): no index on
``order_id`` and more than one ``IN`` list to send (each would read the whole table), and
a PostgreSQL or MySQL key column that is neither an integer nor a text column.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import tzinfo

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..db.engines import MYSQL, dialect_of, guard
from ..db.quoting import quote, through_sqlalchemy
from ..rows.keys import not_in, stored_keys
from ..source.scan import mysql_batches, scan_keys
from ..source.sql import SourceTable, keys_sql, window_filter
from .sides import Span

LOOKUP_BATCH = 1_000  # keys per IN list: a statement of a few KiB on every engine
_ENV = "SOURCE_DATABASE_URL"


def lost_keys(
    source: Engine, src: SourceTable, tz: tzinfo, keys: pa.Array | pa.Table, spans: Sequence[Span]
) -> pa.Array | pa.Table:
    """The ``keys`` (unique warehouse keys stamped in ``spans``) that no source row holds.

    ``keys``: a table of the key columns as stored (:mod:`~pipeline_assets.core.rows.keys`), or, for
    a one-column key such as ``orders``', an array of them; the answer has the same form."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        (name,) = src.spec.primary_key
        return _lost(source, src, tz, pa.table({name: keys}), spans)[name].combine_chunks()
    return _lost(source, src, tz, keys, spans)


def _lost(
    source: Engine, src: SourceTable, tz: tzinfo, keys: pa.Table, spans: Sequence[Span]
) -> pa.Table:
    dialect = dialect_of(source)
    kind = _key_kind(src, dialect)
    if not keys.num_rows:
        return keys
    if kind is None:
        return _not_scanned(source, src, tz, keys)
    spec = src.spec
    with _reader(source, dialect, src, tz) as read:
        stamped = [
            read(keys_sql(src, dialect) + window_filter(src, dialect, tz, start, end, by_day=True))
            for start, end in spans
        ]
        missing = not_in(keys, stamped, spec)
        scan = missing.num_rows > LOOKUP_BATCH and not _key_indexed(source, src)
        if not scan:
            firsts = list(dict.fromkeys(missing[spec.primary_key[0]].to_pylist()))
            for sql in _lookups(src, dialect, firsts):
                missing = not_in(missing, [read(sql)], spec)
            if missing.num_rows and kind == "spelled":
                missing = not_in(missing, [read(_unusual_keys_sql(src, dialect))], spec)
    # without an index on the key, one scan rather than a read of the table per IN list
    return _not_scanned(source, src, tz, missing) if scan else missing


@contextmanager
def _reader(
    source: Engine, dialect: str, src: SourceTable, tz: tzinfo
) -> Iterator[Callable[[str], pa.Table]]:
    """``read(sql)``: the keys a ``SELECT`` of the key columns gives, as the warehouse
    stores them (:func:`~pipeline_assets.core.rows.keys.stored_keys`). Through connectorx on MySQL
    (its Python driver is slow to parse many rows); elsewhere through one connection of the engine's
    own driver: a few small reads, no Arrow driver to connect (0.07 s a connection on
    PostgreSQL), on SQLite no second SQLite library in the process."""
    spec = src.spec
    if dialect == MYSQL:

        def read_mysql(sql: str) -> pa.Table:
            found = [
                stored_keys(b.columns, spec, tz)
                for b in mysql_batches(source, sql, 65_536)
                if b.num_rows
            ]
            return (
                pa.concat_tables(found)
                if found
                else stored_keys([[] for _ in spec.primary_key], spec, tz)
            )

        yield read_mysql
        return
    with guard(source, _ENV), source.connect() as conn:

        def read(sql: str) -> pa.Table:
            result = conn.exec_driver_sql(through_sqlalchemy(sql, dialect_of(source)))
            try:  # the driver's rows as they come: no row objects for columns of keys
                rows = result.cursor.fetchall()
            finally:
                result.close()
            columns = [[row[i] for row in rows] for i in range(len(spec.primary_key))]
            return stored_keys(columns, spec, tz)

        yield read


def _not_scanned(source: Engine, src: SourceTable, tz: tzinfo, keys: pa.Table) -> pa.Table:
    """``keys`` without those the scan of every source key finds (the range load's)."""
    with closing(scan_keys(source, src)) as scanned:
        for found in scanned:
            keys = not_in(keys, [stored_keys(found.columns, src.spec, tz)], src.spec)
            if not keys.num_rows:
                break
    return keys


def _key_kind(src: SourceTable, dialect: str) -> str | None:
    """How the first key column is looked up: "integer" (holds only integers), "spelled"
    (an integer key the column may hold in any form: any SQLite column, a text column
    elsewhere), "exact" (a text key, matched as written), or None (neither, on a server: a
    numeric or uuid column, a date or timestamp key), where only the scan of every key
    reads it as the load does."""
    column = src.table.c[_key_name(src)].type
    declared = src.spec.column(_key_name(src)).type.codec
    if declared.any_text:
        return "exact" if dialect == "sqlite" or isinstance(column, sa.String) else None
    if not declared.orders_numerically:
        return None
    if dialect == "sqlite":
        return "spelled"  # a SQLite column holds any type in any row, whatever it declares
    if isinstance(column, sa.Integer):
        return "integer"
    return "spelled" if isinstance(column, sa.String) else None


def _key_name(src: SourceTable) -> str:
    """The key's first column: the one its index starts with."""
    return src.spec.primary_key[0]


def _lookups(src: SourceTable, dialect: str, keys: list) -> Iterator[str]:
    """``SELECT``s of the rows whose first key column is written as one of ``keys`` the
    plain way: an integer, or its decimal text (both on SQLite, whose columns hold either;
    literals, since they are our own integers); a text key quoted. Each compares the
    column itself, so that its index serves it (a MySQL text column compared with a
    number would not use it)."""
    kind = _key_kind(src, dialect)
    select, key = keys_sql(src, dialect), quote(_key_name(src), dialect)
    for offset in range(0, len(keys), LOOKUP_BATCH):
        part = keys[offset : offset + LOOKUP_BATCH]
        if kind == "exact":
            values = ", ".join(_text_literal(k, dialect) for k in part)
        elif dialect == "sqlite":
            values = ", ".join(f"{k}, '{k}'" for k in part)
        elif kind == "integer":
            values = ", ".join(str(k) for k in part)
        else:
            values = ", ".join(f"'{k}'" for k in part)
        yield f"{select} WHERE {key} IN ({values})"


def _text_literal(value: str, dialect: str) -> str:
    """A text key as a SQL literal (MySQL also reads a backslash as an escape)."""
    text = value.replace("'", "''")
    if dialect == MYSQL:
        text = text.replace("\\", "\\\\")
    return f"'{text}'"


def _unusual_keys_sql(src: SourceTable, dialect: str) -> str:
    """The rows whose key, if any, is not written as the plain decimal ``IN`` asks for: a
    leading zero or any character but a digit (a blank, a sign, a newline), or (SQLite) a
    blob. Integers sort before text and blobs in a SQLite index: ``>= ''`` is their range.
    """
    select, key = keys_sql(src, dialect), quote(_key_name(src), dialect)
    if dialect == "sqlite":
        return (
            f"{select} WHERE {key} >= '' AND (typeof({key}) = 'blob' "
            f"OR {key} GLOB '0*' OR {key} GLOB '*[^0-9]*')"
        )
    if dialect == MYSQL:
        return f"{select} WHERE CAST({key} AS CHAR) REGEXP '^0|[^0-9]'"
    return f"{select} WHERE CAST({key} AS TEXT) ~ '^0|[^0-9]'"


def _key_indexed(source: Engine, src: SourceTable) -> bool:
    """Whether an index (the primary key, a unique constraint or a plain one) starts with
    the key, so that an ``IN`` list is a probe per key and not a read of the table."""
    schema, _, name = src.spec.table.rpartition(".")
    where = {"schema": schema or None}
    with guard(source, _ENV), source.connect() as conn:
        inspector = sa.inspect(conn)
        firsts = [inspector.get_pk_constraint(name, **where).get("constrained_columns") or []]
        firsts += [i.get("column_names") or [] for i in inspector.get_indexes(name, **where)]
        firsts += [
            u.get("column_names") or [] for u in inspector.get_unique_constraints(name, **where)
        ]
    return any(columns[:1] == [_key_name(src)] for columns in firsts)
