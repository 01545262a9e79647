"""Stage and merge: the window's rows go into a temporary table, then into ``orders``.

Everything happens on the load's own connection, inside its one transaction: a crash at
any point leaves neither staged nor merged rows behind (a temporary table dies with its
transaction or connection).

- :meth:`Stage.add` bulk-writes normalized Arrow batches into ``orders_stage``
  (PostgreSQL: ``COPY … FROM STDIN``; SQLite: the driver's ``executemany``).
- :meth:`Stage.measure` compares the staged rows with ``orders`` in SQL, before the
  merge: how many are new, changed, unchanged; the new day of every changed row and the
  old day of every changed row that was paid; the late rows among the changed ones.
- :meth:`Stage.merge` is one ``INSERT … SELECT … ON CONFLICT (order_id) DO UPDATE …
  WHERE`` the row really changed, so unchanged rows are not rewritten.
"""

from __future__ import annotations

import io
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

import pyarrow as pa
import pyarrow.csv as pacsv
import sqlalchemy as sa

from .columnar import day_text, days_of
from .db import DatabaseError, orders
from .times import canonical, from_canonical

STAGE = "orders_stage"
COLUMNS = ("order_id", "status", "amount", "updated_at", "day")
# A first load into an empty table builds the updated_at index once, after the rows,
# when there are at least this many: one sort instead of a random insert per row.
REINDEX_FROM = 50_000

_DIFFERS = ("(o.status <> s.status OR o.amount <> s.amount OR o.updated_at <> s.updated_at)")
_CHANGED = f"(o.order_id IS NULL OR {_DIFFERS})"
_JOIN = "{stage} s LEFT JOIN orders o ON o.order_id = s.order_id"
# Only the staged rows that exist: the stage must stay the outer loop (SQLite would
# otherwise scan all of orders and probe the stage; CROSS JOIN pins its join order).
_INNER = {"sqlite": "{stage} s CROSS JOIN orders o ON o.order_id = s.order_id",
          "postgresql": "{stage} s JOIN orders o ON o.order_id = s.order_id"}

_MERGE = (
    "INSERT INTO orders (order_id, status, amount, updated_at) "
    "SELECT order_id, status, amount, updated_at FROM {stage} WHERE true ORDER BY order_id "
    "ON CONFLICT (order_id) DO UPDATE SET status = excluded.status, "
    "amount = excluded.amount, updated_at = excluded.updated_at "
    "WHERE orders.status <> excluded.status OR orders.amount <> excluded.amount "
    "OR orders.updated_at <> excluded.updated_at"
)

# Into an empty table (the load holds the watermark lock, so no other load writes):
# a plain insert, without a conflict check per row.
_INSERT_ALL = (
    "INSERT INTO orders (order_id, status, amount, updated_at) "
    "SELECT order_id, status, amount, updated_at FROM {stage} ORDER BY order_id"
)


@dataclass
class Changes:
    """What merging the stage will do to ``orders``."""

    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    days: set[str] = field(default_factory=set)
    late_rows: int = 0
    oldest_late: datetime | None = None  # the latest-arriving changed row's updated_at


class Stage:
    """The temporary table of one load, on the load's connection, in its transaction.

    (A scratch file bulk-written by the SQLite ADBC driver and attached to the load's
    connection was tried: it is faster to fill, but two SQLite libraries in one process
    do not see each other's file locks, and the attached file read back corrupt.)
    """

    def __init__(self, conn: sa.Connection):
        self.conn = conn
        self.dialect = conn.dialect.name
        if self.dialect not in ("sqlite", "postgresql"):
            raise DatabaseError(f"the warehouse dialect {self.dialect!r} is not supported; "
                                "use SQLite or PostgreSQL")
        self.rows = 0
        self.name = f"temp.{STAGE}" if self.dialect == "sqlite" else STAGE

    def create(self) -> None:
        """Inside the load's transaction: a rollback takes the table with it."""
        if self.dialect == "sqlite":
            self.conn.exec_driver_sql(f"DROP TABLE IF EXISTS {self.name}")
            # order_id is the rowid: rows arrive in key order and are appended
            self.conn.exec_driver_sql(
                f"CREATE TEMP TABLE {STAGE} (order_id INTEGER PRIMARY KEY, status TEXT NOT "
                "NULL, amount TEXT NOT NULL, updated_at TEXT NOT NULL, day INTEGER NOT NULL)")
        else:
            self.conn.exec_driver_sql(f"DROP TABLE IF EXISTS pg_temp.{STAGE}")
            self.conn.exec_driver_sql(
                f"CREATE TEMP TABLE {STAGE} (order_id BIGINT NOT NULL, status TEXT NOT NULL, "
                "amount TEXT NOT NULL, updated_at TEXT NOT NULL, day INTEGER NOT NULL) "
                "ON COMMIT DROP")

    def add(self, table: pa.Table) -> None:
        """Append normalized rows (distinct keys, ascending, none staged before)."""
        if table.num_rows == 0:
            return
        table = table.select(list(COLUMNS))
        if self.dialect == "sqlite":
            columns = [table[name].to_pylist() for name in COLUMNS]
            self.conn.connection.driver_connection.executemany(
                f"INSERT INTO {self.name} VALUES (?, ?, ?, ?, ?)", zip(*columns, strict=True))
        else:
            buffer = io.BytesIO()
            pacsv.write_csv(table, buffer, pacsv.WriteOptions(include_header=False))
            driver = self.conn.connection.driver_connection
            with driver.cursor() as cur, cur.copy(
                    f"COPY {self.name} ({', '.join(COLUMNS)}) FROM STDIN (FORMAT csv)") as copy:
                copy.write(buffer.getbuffer())
        self.rows += table.num_rows

    def measure(self, tz: tzinfo, *, late_before: datetime | None) -> Changes:
        """Compare the stage with ``orders`` (before the merge)."""
        changes = Changes()
        if self.rows == 0:
            return changes
        if self.dialect == "postgresql":
            self.conn.exec_driver_sql(f"ANALYZE {self.name}")
        late = canonical(late_before) if late_before is not None else None
        join = _JOIN.format(stage=self.name)
        row = self.conn.execute(sa.text(
            f"SELECT COUNT(o.order_id), "
            f"SUM(CASE WHEN o.order_id IS NOT NULL AND {_DIFFERS} THEN 1 ELSE 0 END), "
            f"SUM(CASE WHEN {_CHANGED} AND s.updated_at < :late THEN 1 ELSE 0 END), "
            f"MIN(CASE WHEN {_CHANGED} AND s.updated_at < :late THEN s.updated_at END) "
            f"FROM {join}"), {"late": late}).one()
        existing, updated = int(row[0] or 0), int(row[1] or 0)
        changes.inserted = self.rows - existing
        changes.updated = updated
        changes.unchanged = existing - updated
        changes.late_rows = int(row[2] or 0)
        changes.oldest_late = from_canonical(row[3]) if row[3] else None
        if changes.inserted + changes.updated == 0:
            return changes
        changes.days = {day_text(n) for n in self.conn.execute(sa.text(
            f"SELECT DISTINCT s.day FROM {join} WHERE {_CHANGED}")).scalars()}
        inner = _INNER[self.dialect].format(stage=self.name)
        old = self.conn.execute(sa.text(
            f"SELECT DISTINCT o.updated_at FROM {inner} "
            f"WHERE o.status = 'paid' AND {_DIFFERS}"))  # its old day's file must change
        for part in old.partitions(65_536):
            changes.days |= days_of([text for (text,) in part], tz)
        return changes

    def merge(self, *, into_empty: bool) -> None:
        """Upsert the stage into ``orders``: one statement, changed rows only."""
        if self.rows == 0:
            return
        index = next(iter(orders.indexes))  # orders_updated_at_idx
        rebuild = into_empty and self.rows >= REINDEX_FROM
        if rebuild:
            index.drop(self.conn)
        statement = _INSERT_ALL if into_empty else _MERGE
        self.conn.exec_driver_sql(statement.format(stage=self.name))
        if rebuild:
            index.create(self.conn)

    def close(self) -> None:
        """After the load's transaction: a committed SQLite stage is dropped here."""
        if self.dialect == "sqlite" and not self.conn.in_transaction():
            with suppress(sa.exc.DBAPIError):
                self.conn.connection.driver_connection.execute(
                    f"DROP TABLE IF EXISTS {self.name}")
