"""The stage's names and statements as SQL text, for SQLite and PostgreSQL: the stage
table, the changed rows collected from it, the merge, which old rows a daily file held,
and the change stamp's bounds in the form the tables store it.

:class:`StageSql` only writes text; :class:`~.staging.Stage`, which runs it on the load's
connection, builds on it. Every name is quoted as its dialect needs (mixed case, reserved
words), in the form each way of sending SQL takes it.
"""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

import sqlalchemy as sa

from ..db.quoting import quote
from ..errors import DatabaseError
from ..table import working
from ..table.spec import TableSpec
from ..table.types import INTEGER
from ..times import canonical, day_of, day_start, from_canonical
from ..times.arrays import days_of


class StageSql:
    """The names of one load's temporary tables and the statements on them, in
    ``dialect``'s SQL; touches no connection."""

    def __init__(self, dialect: sa.Dialect, spec: TableSpec):
        self.spec = spec
        self.dialect = dialect.name
        if self.dialect not in ("sqlite", "postgresql"):
            raise DatabaseError(
                f"the warehouse dialect {self.dialect!r} is not supported; use SQLite or PostgreSQL"
            )
        # A name as SQL, in the form each way of sending SQL takes it (a name may be any
        # text: a % or a : in it means something to two of them):
        q = dialect.identifier_preparer.quote
        self.q = q  # exec_driver_sql: SQLAlchemy's own (psycopg reads % there: doubled)
        self.raw = lambda name: quote(name, self.dialect)  # to the driver as is (COPY)
        self.tq = lambda name: self.raw(name).replace(":", "\\:")  # sa.text: : binds
        stage, changed = f"{spec.name}_stage", f"{spec.name}_changed"
        self.stage_table, self.changed_table = stage, changed
        self.name = f"temp.{q(stage)}" if self.dialect == "sqlite" else q(stage)
        self.changed = f"temp.{q(changed)}" if self.dialect == "sqlite" else q(changed)
        self.target = q(spec.name)
        self.keys = spec.primary_key
        self.columns = spec.column_names
        self.values = tuple(c for c in self.columns if c not in self.keys)
        # old values kept per changed row: the day column (its old day) and what the
        # daily files filter on (whether that old day's file held it)
        self.old = (
            spec.day,
            *sorted({c for f in spec.daily_files for c, _ in f.where} - {spec.day}),
        )

    # --- statements ------------------------------------------------------------------

    def _distinct(self, left: str, right: str) -> str:
        op = "IS NOT" if self.dialect == "sqlite" else "IS DISTINCT FROM"
        return f"{left} {op} {right}"

    def _key_match(self, a: str, b: str, text: bool = False) -> str:
        q = self.tq if text else self.q
        return " AND ".join(f"{a}.{q(k)} = {b}.{q(k)}" for k in self.keys)

    def _collect_sql(self, on_commit: str) -> list[str]:
        """The changed table, made and filled: its columns declared by name, then filled
        by ``INSERT … SELECT`` (a ``CREATE TABLE … AS SELECT`` lets SQLite name a column
        itself: ``"TRUE"`` became ``column2``)."""
        q = self.q
        differs = " OR ".join(self._distinct(f"o.{q(c)}", f"s.{q(c)}") for c in self.values)
        new = f"o.{q(self.keys[0])} IS NULL" + (f" OR {differs}" if differs else "")
        kinds = {c.name: c.type.codec for c in self.spec.columns}
        columns = [
            *((c, f"s.{q(c)}", kinds[c]) for c in self.columns),
            (working.DAY, f"s.{q(working.DAY)}", INTEGER.codec),
            (working.EXISTED, f"o.{q(self.keys[0])}", kinds[self.keys[0]]),
            *((working.old(c), f"o.{q(c)}", kinds[c]) for c in self.old),
        ]
        # SQLite: no declared type, so no affinity converts a value (as the AS SELECT did)
        declared = ", ".join(
            q(name) + ("" if self.dialect == "sqlite" else f" {codec.stage_type(self.dialect)}")
            for name, _, codec in columns
        )
        # The stage is the outer loop (a LEFT JOIN keeps it there on SQLite too): one
        # probe of the table's key per staged row.
        return [
            f"CREATE TEMP TABLE {q(self.changed_table)} ({declared}){on_commit}",
            f"INSERT INTO {self.changed} ({', '.join(q(name) for name, _, _ in columns)}) "
            f"SELECT {', '.join(picked for _, picked, _ in columns)} "
            f"FROM {self.name} s LEFT JOIN {self.target} o ON "
            f"{self._key_match('o', 's')} WHERE {new}",
        ]

    def _merge_sql(self) -> str:
        q = self.q
        names = ", ".join(q(c) for c in self.columns)
        keys = ", ".join(q(k) for k in self.keys)
        if not self.values:
            action = "DO NOTHING"
        else:
            sets = ", ".join(f"{q(c)} = excluded.{q(c)}" for c in self.values)
            where = " OR ".join(
                self._distinct(f"{self.target}.{q(c)}", f"excluded.{q(c)}") for c in self.values
            )
            action = f"DO UPDATE SET {sets} WHERE {where}"
        return (
            f"INSERT INTO {self.target} ({names}) SELECT {names} FROM {self.changed} "
            f"WHERE 1 = 1 ORDER BY {keys} ON CONFLICT ({keys}) {action}"
        )

    def _stage_ddl(self) -> str:
        rowid = (
            self.dialect == "sqlite"
            and len(self.keys) == 1
            and self.spec.column(self.keys[0]).type.codec.orders_numerically
        )
        parts = []
        for column in self.spec.columns:
            sql = f"{self.q(column.name)} {column.type.codec.stage_type(self.dialect)}"
            if rowid and column.name == self.keys[0]:
                sql += " PRIMARY KEY"  # the rowid: rows arrive in key order, appended
            elif not column.nullable:
                sql += " NOT NULL"
            parts.append(sql)
        parts.append(f"{self.q(working.DAY)} INTEGER NOT NULL")
        if self.dialect == "sqlite" and not rowid:
            parts.append(f"PRIMARY KEY ({', '.join(self.q(k) for k in self.keys)})")
        suffix = " ON COMMIT DROP" if self.dialect == "postgresql" else ""
        return f"CREATE TEMP TABLE {self.q(self.stage_table)} ({', '.join(parts)}){suffix}"

    def _old_in_files(self) -> tuple[str, dict]:
        """SQL that is true for a changed row whose old version was in a daily file."""
        if not self.spec.daily_files:
            return "1 = 1", {}  # never a bare true: on SQLite a column may be named so
        params: dict = {}
        views = []
        for f in self.spec.daily_files:
            terms = []
            for column, allowed in f.where:
                kind = self.spec.column(column).type
                names = []
                for value in allowed:
                    if value is None:
                        continue
                    params[f"w{len(params)}"] = kind.stored(value)
                    names.append(f":w{len(params) - 1}")
                old = self.tq(working.old(column))
                term = f"{old} IN ({', '.join(names)})" if names else "1 = 0"
                if None in allowed:
                    term = f"({term} OR {old} IS NULL)"
                terms.append(term)
            views.append("(" + (" AND ".join(terms) or "1 = 1") + ")")
        return " OR ".join(views), params

    # --- the change stamp, as the tables store it -------------------------------------

    def _is_date(self, column: str | None = None) -> bool:
        """Whether the day column (or ``column``) is a date."""
        return self.spec.column(column or self.spec.day).type.codec.is_day

    def _late(self, late_before: datetime | None, tz: tzinfo) -> tuple[str, object]:
        """SQL (for ``sa.text``) for "stamped before ``late_before``" on the stage's rows
        (by the cursor), and its bound."""
        cursor = self.tq(self.late_column)
        if late_before is None or self.spec.counts_ids:  # an id: below the watermark's
            return f"{cursor} < :late", late_before
        if not self._is_date(self.spec.stamp):
            return f"{cursor} < :late", canonical(late_before)
        # a date is stamped at its midnight: before late_before up to the first day whose
        # midnight is not
        return f"{cursor} < :late", self._first_day_from(late_before, tz).isoformat()

    @staticmethod
    def _first_day_from(moment: datetime, tz: tzinfo):
        day = day_of(moment, tz)
        return day if day_start(day, tz) >= moment else day + timedelta(days=1)

    @property
    def late_column(self) -> str:
        """The column lateness is measured on: the cursor (an id), else the stamp."""
        return self.spec.cursor if self.spec.counts_ids else self.spec.stamp

    def _instant(self, stored, tz: tzinfo) -> datetime | int:
        """A stored :attr:`late_column` value as an instant (an id as itself)."""
        if self.spec.counts_ids:
            return int(stored)
        if self._is_date(self.spec.stamp):
            return day_start(datetime.strptime(stored, "%Y-%m-%d").date(), tz)
        return from_canonical(stored)

    def _days(self, stamps: list[str], tz: tzinfo) -> set[str]:
        if self._is_date():
            return set(stamps)
        return days_of(stamps, tz)

    def _bounds(self, start: datetime, end: datetime, tz: tzinfo) -> dict:
        if self._is_date():
            return {
                "start": self._first_day_from(start, tz).isoformat(),
                "end": self._first_day_from(end, tz).isoformat(),
            }
        return {"start": canonical(start), "end": canonical(end)}
