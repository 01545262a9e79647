"""Stage and merge: the window's rows go into a temporary table, then into the warehouse
table of the declaration (``orders``, or any :class:`~pipeline_assets.core.table.spec.TableSpec`).

Everything happens on the load's own connection, inside its one transaction: a crash at
any point leaves neither staged nor merged rows behind (a temporary table dies with its
transaction or connection).

- :meth:`Stage.prepare` and :meth:`Stage.write` bulk-write normalized Arrow batches
  into ``<name>_stage`` (PostgreSQL: ``COPY … FROM STDIN``; SQLite: the driver's
  ``executemany``). A load into an empty ``orders`` writes the rows there directly
  instead (nothing to compare with; see :meth:`Stage.create`).
- :meth:`Stage.measure` compares the staged rows with ``orders`` in SQL, before the
  merge, in one pass: the rows that are new or differ go into a second temporary table,
  ``<name>_changed``, with the old change stamp and the old values of the daily files'
  filter columns of each; every count (new, changed, unchanged), the new day of every
  changed row, the old day of every changed row that was in a daily file (for
  ``orders``: that was paid) and the late rows among the changed ones are read from it. An
  incremental run re-reads the lookback window, most of it unchanged: the join runs
  once, everything after it touches only the changes.
- :meth:`Stage.merge` is one ``INSERT … SELECT … ON CONFLICT (<key>) DO UPDATE …
  WHERE`` the row really changed, of the changed rows only, so unchanged rows are
  neither probed twice nor rewritten.

Every name is quoted as its dialect needs (mixed case, reserved words); values are
compared NULL-safely (``IS DISTINCT FROM``), so a NULL that becomes a value, or a column
added to a table that holds rows already, counts as a change. The statements' text is
:mod:`.stage_sql`'s, which :class:`Stage` builds on.
"""

from __future__ import annotations

import io
import sqlite3
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

import pyarrow as pa
import pyarrow.csv as pacsv
import sqlalchemy as sa

from ..db.schema import warehouse_table
from ..table import working
from ..table.spec import TableSpec
from ..times.arrays import day_text
from .stage_sql import StageSql

ROWS_PER_INSERT = 100  # rows per SQLite INSERT of the stage (see Stage._insert_runs)
MOVES_KEPT = 1_000  # day moves a load reports (Changes.moves), at most


@dataclass
class Changes:
    """What merging the stage will do to the warehouse table."""

    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    days: set[str] = field(default_factory=set)
    late_rows: int = 0
    oldest_late: datetime | None = None  # the latest-arriving changed row's change stamp
    # (old day, new day) of the rows a file held that moved to another day: with a
    # day_column only (the refresh sensor rebuilds both in one run)
    moves: set[tuple[str, str]] = field(default_factory=set)


class Stage(StageSql):
    """The temporary table of one load, on the load's connection, in its transaction.

    (A scratch file bulk-written by the SQLite ADBC driver and attached to the load's
    connection was tried: it is faster to fill, but two SQLite libraries in one process
    do not see each other's file locks, and the attached file read back corrupt.)
    """

    def __init__(self, conn: sa.Connection, spec: TableSpec):
        super().__init__(conn.dialect, spec)
        self.conn = conn
        self.rows = 0
        self.measured = False
        self.direct = False
        self.primary_key: str | None = None  # PostgreSQL: its name, while a direct load lacks it
        self.unchanged = 0  # staged rows the table holds as they are (set by measure)

    # --- the steps -------------------------------------------------------------------

    def create(self, *, direct: bool = False) -> None:
        """Inside the load's transaction: a rollback takes the table with it.

        ``direct`` (a load into an empty table; never a dry run): the rows go straight
        into the table, its change-stamp index (on PostgreSQL its primary key too)
        dropped until :meth:`merge` builds it once; a temporary copy would only be written
        and read once more. Readers see the
        empty table until the commit (SQLite) or wait for it (PostgreSQL: dropping the
        index locks the table, as building it at the end did before).
        """
        self.direct = direct
        if self.direct:
            for index in self._indexes():
                index.drop(self.conn, checkfirst=self.spec.day_apart)
            if self.dialect == "postgresql":
                # and the key's index: built once from the sorted rows at the end, a third
                # of COPY's time on a million rows of a two-column key, instead of
                # growing it row by row (see merge)
                self.primary_key = self.conn.execute(
                    sa.text(
                        "SELECT conname FROM pg_constraint "
                        "WHERE conrelid = to_regclass(:t) AND contype = 'p'"
                    ),
                    {"t": self.target},
                ).scalar()
                if self.primary_key:
                    self.conn.exec_driver_sql(
                        f"ALTER TABLE {self.target} DROP CONSTRAINT {self.q(self.primary_key)}"
                    )
            return
        if self.dialect == "sqlite":
            for name in (self.name, self.changed):
                self.conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
        else:
            for name in (self.stage_table, self.changed_table):
                self.conn.exec_driver_sql(f"DROP TABLE IF EXISTS pg_temp.{self.q(name)}")
        self.conn.exec_driver_sql(self._stage_ddl())

    def _indexes(self) -> list[sa.Index]:
        """The table's indexes: the cursor's, and the day column's where it has one."""
        return sorted(warehouse_table(self.spec).indexes, key=lambda i: i.name)

    def prepare(self, table: pa.Table) -> tuple[int, object]:
        """What :meth:`write` sends for ``table``: Python rows for SQLite's
        ``executemany``, CSV bytes for PostgreSQL's ``COPY``. Touches no connection, so
        the scan's thread does it while the previous batch is being written."""
        names = self.columns if self.direct else (*self.columns, working.DAY)
        table = table.select(list(names))
        if table.num_rows == 0:
            return 0, None
        if self.dialect == "sqlite":
            # one flat list, columns interleaved by slice assignment (in C), bound in runs
            width = len(names)
            flat: list = [None] * (table.num_rows * width)
            for i, name in enumerate(names):
                flat[i::width] = table[name].to_pylist()
            return table.num_rows, flat
        buffer = io.BytesIO()
        pacsv.write_csv(table, buffer, pacsv.WriteOptions(include_header=False))
        return table.num_rows, buffer.getbuffer()

    def write(self, prepared: tuple[int, object]) -> None:
        """Append rows made by :meth:`prepare` (distinct keys, ascending, none before)."""
        count, payload = prepared
        if count == 0:
            return
        names = self.columns if self.direct else (*self.columns, working.DAY)
        target = self.target if self.direct else self.name
        columns = ", ".join(self.raw(n) for n in names)  # to the driver as is
        driver = self.conn.connection.driver_connection
        if self.dialect == "sqlite":
            self._insert_runs(
                driver, f"INSERT INTO {target} ({columns}) VALUES ", len(names), payload
            )
        else:
            with (
                driver.cursor() as cur,
                cur.copy(f"COPY {target} ({columns}) FROM STDIN (FORMAT csv)") as copy,
            ):
                copy.write(payload)
        self.rows += count

    @staticmethod
    def _insert_runs(driver, insert: str, width: int, flat: list) -> None:
        """SQLite: ``flat`` (rows of ``width`` values in a row) in statements of
        :data:`ROWS_PER_INSERT` rows (``VALUES (…), (…), …``, within SQLite's limit on
        bound values): a statement per row cost a step and a Python tuple per row."""
        limit = driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        per = max(1, min(ROWS_PER_INSERT, limit // width))
        one = "(" + ", ".join("?" * width) + ")"
        step = per * width
        whole = len(flat) - len(flat) % step
        if whole:
            driver.executemany(
                insert + ", ".join([one] * per),
                [flat[i : i + step] for i in range(0, whole, step)],
            )
        if whole < len(flat):
            rest = (len(flat) - whole) // width
            driver.execute(insert + ", ".join([one] * rest), flat[whole:])

    def measure(self, tz: tzinfo, *, late_before: datetime | None) -> Changes:
        """Compare the stage with the table (before the merge): one join, then only the
        changed rows."""
        changes = Changes()
        if self.rows == 0:
            return changes
        if self.dialect == "postgresql":
            # One index probe of the table per staged row, whatever its size: PostgreSQL
            # would otherwise hash-join against a scan of the whole table (0.22 s on
            # 1,000,000 rows for a 49,000-row stage, against 0.09 s).
            self.conn.exec_driver_sql("SET LOCAL enable_hashjoin = off")
            self.conn.exec_driver_sql("SET LOCAL enable_mergejoin = off")
            for sql in self._collect_sql(" ON COMMIT DROP"):
                self.conn.exec_driver_sql(sql)
            self.conn.exec_driver_sql("RESET enable_hashjoin")
            self.conn.exec_driver_sql("RESET enable_mergejoin")
        else:
            for sql in self._collect_sql(""):
                self.conn.exec_driver_sql(sql)
        self.measured = True
        late_sql, late = self._late(late_before, tz)
        row = self.conn.execute(
            sa.text(
                f"SELECT COUNT(*), COUNT({self.tq(working.EXISTED)}), "
                f"SUM(CASE WHEN {late_sql} THEN 1 ELSE 0 END), "
                f"MIN(CASE WHEN {late_sql} THEN {self.tq(self.late_column)} END) "
                f"FROM {self.changed}"
            ),
            {"late": late},
        ).one()
        changed, updated = int(row[0] or 0), int(row[1] or 0)
        existing = self.rows - (changed - updated)
        changes.inserted = changed - updated
        changes.updated = updated
        changes.unchanged = existing - updated
        self.unchanged = changes.unchanged
        changes.late_rows = int(row[2] or 0)
        changes.oldest_late = self._instant(row[3], tz) if row[3] is not None else None
        if changed == 0:
            return changes
        changes.days = {
            day_text(n)
            for n in self.conn.execute(
                sa.text(f"SELECT DISTINCT {self.q(working.DAY)} FROM {self.changed}")
            ).scalars()
        }
        in_files, params = self._old_in_files()
        old = self.conn.execute(
            sa.text(  # an old day whose file held the row changes too
                f"SELECT DISTINCT {self.tq(working.old(self.spec.day))} FROM {self.changed} "
                f"WHERE {self.tq(working.EXISTED)} IS NOT NULL AND ({in_files})"
            ),
            params,
        )
        for part in old.partitions(65_536):
            changes.days |= self._days([text for (text,) in part], tz)
        if self.spec.day_column is not None:
            changes.moves = self._moves(in_files, params, tz)
        return changes

    def _moves(self, in_files: str, params: dict, tz: tzinfo) -> set[tuple[str, str]]:
        """The distinct (old day, new day) of the changed rows a file held on another day
        than the one they are on now (at most :data:`MOVES_KEPT`: a bulk change of days
        is rebuilt as the touched days it is)."""
        q = self.tq
        found = self.conn.execute(
            sa.text(
                f"SELECT DISTINCT {q(working.old(self.spec.day))}, {q(working.DAY)} "
                f"FROM {self.changed} WHERE {q(working.EXISTED)} IS NOT NULL AND ({in_files})"
            ),
            params,
        )
        moves = set()
        for old_value, new_day in found.fetchmany(4 * MOVES_KEPT):
            (old_day,) = self._days([old_value], tz)
            if old_day != day_text(new_day):
                moves.add((old_day, day_text(new_day)))
        return set(sorted(moves)[:MOVES_KEPT])

    def unmatched(
        self, start: datetime | None, end: datetime | None, tz: tzinfo | None = None
    ) -> tuple[int, pa.Table]:
        """For a range load: how many rows of the table are stamped in ``[start, end)``,
        and those of them whose key the stage (the source's rows in the range) does not
        hold: the key columns, the daily files' filter columns and the day column.
        Before the merge, in the transaction. (``tz`` is needed for a date stamp only.)
        ``start`` and ``end`` None: the whole table (a table compared whole)."""
        q = self.tq  # every statement below is sa.text
        picked = list(dict.fromkeys((*self.keys, *self.old[1:], self.spec.day)))
        types = {name: self.spec.column(name).type.codec.arrow_type for name in picked}
        empty = pa.table({name: pa.array([], types[name]) for name in picked})
        if self.direct:  # the table was empty: nothing there to lose
            return 0, empty
        whole = start is None  # a table compared whole: the range is every row

        def within(column: str) -> str:  # a range is of days
            return "1 = 1" if whole else f"{column} >= :start AND {column} < :end"

        bounds = {} if whole else self._bounds(start, end, tz)
        in_range = self.conn.execute(
            sa.text(f"SELECT count(*) FROM {self.target} WHERE {within(q(self.spec.day))}"),
            bounds,
        ).scalar()
        if not in_range:
            return 0, empty
        if self.measured:
            # Every staged row that the table holds unchanged is stamped in the range, and
            # so is a changed one whose old stamp was: when they are all the range holds,
            # no row lacks its source row, and the anti-join below (1.2 s for a month of a
            # million rows on SQLite) is not needed.
            moved_in = self.conn.execute(
                sa.text(
                    f"SELECT count(*) FROM {self.changed} WHERE {q(working.EXISTED)} IS NOT NULL "
                    f"AND {within(q(working.old(self.spec.day)))}"
                ),
                bounds,
            ).scalar()
            if self.unchanged + int(moved_in or 0) == in_range:
                return int(in_range), empty
        result = self.conn.execute(
            sa.text(
                f"SELECT {', '.join('o.' + q(c) for c in picked)} FROM {self.target} o "
                f"WHERE {within('o.' + q(self.spec.day))} AND NOT EXISTS "
                f"(SELECT 1 FROM {self.name} s WHERE {self._key_match('s', 'o', text=True)}) "
                f"ORDER BY {', '.join('o.' + q(k) for k in self.keys)}"
            ),
            bounds,
        )
        rows = result.all()
        columns = list(zip(*rows, strict=True)) if rows else [[] for _ in picked]
        return int(in_range), pa.table(
            {
                name: pa.array(
                    [v if v is None or types[name] != pa.bool_() else bool(v) for v in values],
                    types[name],
                )
                for name, values in zip(picked, columns, strict=True)
            }
        )

    def delete(self, keys: list) -> None:
        """Delete these rows (keys: values of a single-column key, or tuples) from the
        table: a range load's rows the source lost."""
        if len(self.keys) == 1 and all(
            isinstance(k, int) and not isinstance(k, bool) for k in keys
        ):
            key = self.q(self.keys[0])
            for i in range(0, len(keys), 1_000):
                chunk = [int(k) for k in keys[i : i + 1_000]]
                self.conn.exec_driver_sql(
                    f"DELETE FROM {self.target} WHERE {key} IN ({', '.join(map(str, chunk))})"
                )
            return
        where = " AND ".join(f"{self.tq(k)} = :k{i}" for i, k in enumerate(self.keys))
        rows = [
            {f"k{i}": v for i, v in enumerate(key if isinstance(key, tuple) else (key,))}
            for key in keys
        ]
        if rows:
            self.conn.execute(sa.text(f"DELETE FROM {self.target} WHERE {where}"), rows)

    def merge(self) -> None:
        """Upsert into the table: one statement, the rows :meth:`measure` collected.

        After a direct load into the empty table the rows are there already: this builds
        the change stamp's index, once.
        """
        if self.direct:
            if self.primary_key:
                keys = ", ".join(self.q(k) for k in self.keys)
                self.conn.exec_driver_sql(
                    f"ALTER TABLE {self.target} ADD CONSTRAINT {self.q(self.primary_key)} "
                    f"PRIMARY KEY ({keys})"
                )
            for index in self._indexes():
                index.create(self.conn)
            return
        if self.rows == 0:
            return
        if not self.measured:
            raise RuntimeError("Stage.merge into a non-empty table needs Stage.measure first")
        self.conn.exec_driver_sql(self._merge_sql())

    def close(self) -> None:
        """After the load's transaction: a committed SQLite stage is dropped here."""
        if self.dialect == "sqlite" and not self.conn.in_transaction():
            with suppress(sa.exc.DBAPIError):
                for name in (self.name, self.changed):
                    self.conn.connection.driver_connection.execute(f"DROP TABLE IF EXISTS {name}")
