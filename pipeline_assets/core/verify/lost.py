"""Which warehouse orders the source holds nowhere any more, asked by key.

The ``orders_match_source`` check names, on each day it found different, the orders the
source lost (deleted in the app) apart from those that only moved (their ``updated_at``
now falls on another day). An order is *held* when some source row, whatever its
``updated_at``, has its key as :func:`~pipeline_assets.core.columnar.keys_of` reads it:
the rule of :func:`~pipeline_assets.core.source.scan_keys`, the range load's scan of
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
Only ``SELECT``s: no temporary table, nothing written to the source. Two cases keep the
scan of every key (:func:`~pipeline_assets.core.source.scan_keys`): no index on
``order_id`` and more than one ``IN`` list to send (each would read the whole table), and
a PostgreSQL or MySQL key column that is neither an integer nor a text column.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import tzinfo

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..columnar import keys_of
from ..db import MYSQL, dialect_of, guard
from ..source import SourceTable, keys_sql, mysql_batches, quote, scan_keys, window_filter
from .sides import Span

LOOKUP_BATCH = 1_000  # keys per IN list: a statement of a few KiB on every engine
_ENV = "SOURCE_DATABASE_URL"


def lost_keys(source: Engine, src: SourceTable, tz: tzinfo, keys: pa.Array,
              spans: Sequence[Span]) -> pa.Array:
    """The ``keys`` (unique warehouse keys stamped in ``spans``) that no source row holds.

    ``src``: ``orders``, or a table keyed by one integer column as ``orders`` is."""
    dialect = dialect_of(source)
    kind = _key_kind(src, dialect)
    if not len(keys):
        return keys
    if kind is None:
        return _not_scanned(source, src, keys)
    with _reader(source, dialect) as read:
        stamped = [read(keys_sql(src, dialect) + window_filter(src, dialect, tz, start, end))
                   for start, end in spans]
        missing = _not_in(keys, stamped)
        scan = len(missing) > LOOKUP_BATCH and not _key_indexed(source, src)
        if not scan:
            for sql in _lookups(src, dialect, missing.to_pylist()):
                missing = _not_in(missing, [read(sql)])
            if len(missing) and kind != "integer":
                missing = _not_in(missing, [read(_unusual_keys_sql(src, dialect))])
    # without an index on the key, one scan rather than a read of the table per IN list
    return _not_scanned(source, src, missing) if scan else missing


@contextmanager
def _reader(source: Engine, dialect: str) -> Iterator[Callable[[str], pa.Array]]:
    """``read(sql)``: the keys a ``SELECT`` of one key column gives, as ``keys_of`` reads
    them. Through connectorx on MySQL (its Python driver is slow to parse many rows);
    elsewhere through one connection of the engine's own driver: a few small reads, no
    Arrow driver to connect (0.07 s a connection on PostgreSQL), on SQLite no second
    SQLite library in the process."""
    if dialect == MYSQL:
        def read_mysql(sql: str) -> pa.Array:
            found = [keys_of(b.column(0)) for b in mysql_batches(source, sql, 65_536)
                     if b.num_rows]
            return pa.concat_arrays(found) if found else pa.array([], pa.int64())

        yield read_mysql
        return
    with guard(source, _ENV), source.connect() as conn:
        def read(sql: str) -> pa.Array:
            result = conn.exec_driver_sql(sql)
            try:  # the driver's rows as they come: no row objects for a column of keys
                return _keys_of([row[0] for row in result.cursor.fetchall()])
            finally:
                result.close()

        yield read


def _keys_of(values: list) -> pa.Array:
    """``keys_of`` of a column of Python values (integers or text)."""
    try:
        return keys_of(pa.array(values))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # mixed, empty, too large
        return keys_of(pa.array([None if v is None else str(v) for v in values],
                                pa.string()))


def _not_in(keys: pa.Array, held: Iterable[pa.Array]) -> pa.Array:
    """``keys`` without those in any of the ``held`` arrays."""
    for found in held:
        if len(keys):
            keys = keys.filter(pc.invert(pc.is_in(keys, value_set=found)))
    return keys


def _not_scanned(source: Engine, src: SourceTable, keys: pa.Array) -> pa.Array:
    """``keys`` without those the scan of every source key finds (the range load's)."""
    with closing(scan_keys(source, src)) as scanned:
        for found in scanned:
            keys = keys.filter(pc.invert(pc.is_in(keys, value_set=found)))
            if not len(keys):
                break
    return keys


def _key_kind(src: SourceTable, dialect: str) -> str | None:
    """"integer": only integers; "text": may hold a key in any form; None: neither, on a
    server (a numeric or uuid column), where only the scan of every key reads it as is."""
    column = src.table.c[_key_name(src)].type
    if dialect == "sqlite":
        return "text"  # a SQLite column holds any type in any row, whatever it declares
    if isinstance(column, sa.Integer):
        return "integer"
    return "text" if isinstance(column, sa.String) else None


def _key_name(src: SourceTable) -> str:
    (key,) = src.spec.primary_key
    return key


def _lookups(src: SourceTable, dialect: str, keys: list[int]) -> Iterator[str]:
    """``SELECT``s of the rows whose key is written as one of ``keys`` the plain way: an
    integer, or its decimal text (both on SQLite, whose columns hold either; literals,
    since they are our own integers). Each compares the column itself, so that its index
    serves it (a MySQL text column compared with a number would not use it)."""
    kind = _key_kind(src, dialect)
    select, key = keys_sql(src, dialect), quote(_key_name(src), dialect)
    for offset in range(0, len(keys), LOOKUP_BATCH):
        part = keys[offset:offset + LOOKUP_BATCH]
        if dialect == "sqlite":
            values = ", ".join(f"{k}, '{k}'" for k in part)
        elif kind == "integer":
            values = ", ".join(str(k) for k in part)
        else:
            values = ", ".join(f"'{k}'" for k in part)
        yield f"{select} WHERE {key} IN ({values})"


def _unusual_keys_sql(src: SourceTable, dialect: str) -> str:
    """The rows whose key, if any, is not written as the plain decimal ``IN`` asks for: a
    leading zero or any character but a digit (a blank, a sign, a newline), or (SQLite) a
    blob. Integers sort before text and blobs in a SQLite index: ``>= ''`` is their range.
    """
    select, key = keys_sql(src, dialect), quote(_key_name(src), dialect)
    if dialect == "sqlite":
        return (f"{select} WHERE {key} >= '' AND (typeof({key}) = 'blob' "
                f"OR {key} GLOB '0*' OR {key} GLOB '*[^0-9]*')")
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
        firsts += [u.get("column_names") or []
                   for u in inspector.get_unique_constraints(name, **where)]
    return any(columns[:1] == [_key_name(src)] for columns in firsts)
