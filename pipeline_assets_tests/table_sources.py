"""A declared table's source, written with plain SQL: what the app does to its rows.

For any :class:`~pipeline_assets.core.table.spec.TableSpec` of ``tables.TABLES``, on SQLite
(every column text or a plain affinity, timestamps as ISO text with an offset),
PostgreSQL (native types: BIGINT, NUMERIC(P,S), DOUBLE PRECISION, BOOLEAN, DATE,
TIMESTAMPTZ) and MySQL/MariaDB (the same, a DATETIME(6) in UTC): create the table, put
a row (a numbered row of every declared column, NULLs in nullable columns of even rows,
Unicode text), delete it, or re-stamp it. The tests that run the same story on
``orders`` and ``payments`` use it; nothing of the pipeline's own code writes the source.
"""

from __future__ import annotations

import json
import shlex
from datetime import date, datetime, timezone
from decimal import Decimal

import sqlalchemy as sa

from pipeline_assets.core.load.batch import load_table
from pipeline_assets.core.load.deletions import DeletePolicy
from pipeline_assets.core.table.spec import TableSpec
from pipeline_assets.core.times import UTC
from pipeline_assets.core.verify import verify

from .conftest import NOW

_SQLITE = {
    "integer": "INTEGER",
    "text": "TEXT",
    "decimal": "TEXT",
    "float": "REAL",
    "boolean": "BOOLEAN",
    "date": "TEXT",
    "timestamp": "TEXT",
}
_POSTGRES = {
    "integer": "BIGINT",
    "text": "TEXT",
    "decimal": "NUMERIC",
    "float": "DOUBLE PRECISION",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMPTZ",
}
_MYSQL = {
    **_POSTGRES,
    "text": "VARCHAR(200)",
    "decimal": "VARCHAR(40)",
    "float": "DOUBLE",
    "timestamp": "DATETIME(6)",
}


def stamp(text: str) -> datetime:
    """``2026-01-05T10:00`` (UTC) as an aware instant."""
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


class TableSource:
    """One declared table in a source database, written the way an app would."""

    def __init__(self, engine: sa.Engine, spec: TableSpec):
        self.engine, self.spec = engine, spec
        self.sqlite = engine.dialect.name == "sqlite"
        self.mysql = engine.dialect.name in ("mysql", "mariadb")

    def create(self) -> None:
        _q = self._q
        types = _SQLITE if self.sqlite else _MYSQL if self.mysql else _POSTGRES
        columns = []
        for c in self.spec.columns:
            kind = types[c.type.kind]
            if c.type.kind == "decimal" and c.type.precision and not self.sqlite:
                kind = f"NUMERIC({c.type.precision},{c.type.scale})"
            columns.append(f"{_q(c.name)} {kind}{'' if c.nullable else ' NOT NULL'}")
        key = ", ".join(_q(k) for k in self.spec.primary_key)
        with self.engine.begin() as conn:
            conn.exec_driver_sql(
                f"CREATE TABLE {_q(self.spec.table)} ({', '.join(columns)}, PRIMARY KEY ({key}))"
            )
            conn.exec_driver_sql(
                f"CREATE INDEX {_q(self.spec.table + '_cursor')} ON "
                f"{_q(self.spec.table)} ({_q(self.spec.stamp)})"
            )

    def key(self, n: int) -> tuple:
        """The key of row ``n``: ``n`` in the first column, ``n % 3 + 1`` in the others."""
        return tuple(n if i == 0 else n % 3 + 1 for i, _ in enumerate(self.spec.primary_key))

    def row(
        self,
        n: int,
        at: datetime,
        *,
        filed: bool = True,
        version: int = 0,
        day: datetime | date | None = None,
    ) -> dict:
        """Row ``n`` stamped ``at``: in the first daily file's view (``filed``) or not;
        ``version`` changes its values; ``day``: its day column's value, where the table
        declares one apart from the cursor (default ``at``, or ``at``'s date)."""
        where = dict(self.spec.daily_files[0].where)
        values = {}
        for c in self.spec.columns:
            kind = c.type.kind
            if c.nullable and n % 2 == 0:
                value = None
            elif c.name in where:
                value = where[c.name][0] if filed else "other"
            elif kind == "integer":
                value = n * 100 + version
            elif kind == "text":
                value = f"row {n} v{version} Grüße ☕"
            elif kind == "decimal":
                value = Decimal(f"{n}.{version}5")
            elif kind == "float":
                value = n + version / 4
            elif kind == "boolean":
                value = (n + version) % 2 == 0
            elif kind == "date":
                value = date(2026, 1, 1 + (n + version) % 28)
            else:
                value = at
            values[c.name] = value
        values.update(zip(self.spec.primary_key, self.key(n), strict=True))
        if self.spec.cursor is not None and not self.spec.counts_ids:
            values[self.spec.cursor] = at
        if self.spec.day_column is not None:
            is_date = self.spec.column(self.spec.day).type.kind == "date"
            day = at if day is None else day
            values[self.spec.day] = day.date() if is_date and isinstance(day, datetime) else day
        return values

    def _q(self, name: str) -> str:
        """A name quoted for ``exec_driver_sql`` (a % doubled for psycopg and PyMySQL)."""
        return self.engine.dialect.identifier_preparer.quote_identifier(name)

    def put(self, n: int, at: datetime, **kw) -> None:
        """Insert row ``n``, or replace it (the app's update)."""
        row = self.row(n, at, **kw)
        self.delete(n)
        with self.engine.begin() as conn:
            conn.execute(self._table().insert(), {c: self._param(v) for c, v in row.items()})

    def delete(self, n: int) -> None:
        table = self._table()
        with self.engine.begin() as conn:
            conn.execute(table.delete().where(self._is(table, n)))

    def restamp(self, n: int, at: datetime, *, column: str | None = None) -> None:
        """Only the cursor (or ``column``) changes (the app backdates or touches a row)."""
        table = self._table()
        with self.engine.begin() as conn:
            conn.execute(
                table.update()
                .where(self._is(table, n))
                .values({column or self.spec.stamp: self._param(at)})
            )

    def _table(self) -> sa.TableClause:
        """The table as SQLAlchemy Core writes it: every name quoted as its dialect needs
        (a colon or a percent sign in a name is no bind parameter there)."""
        schema, _, name = self.spec.table.rpartition(".")
        # quoted always: a word SQLAlchemy does not know a dialect reserves (SQLite's
        # ``nothing``) would be written bare otherwise
        quoted = [sa.column(sa.sql.quoted_name(c, True)) for c in self.spec.column_names]
        return sa.table(sa.sql.quoted_name(name, True), *quoted, schema=schema or None)

    def _is(self, table: sa.TableClause, n: int):
        return sa.and_(
            *(table.c[k] == v for k, v in zip(self.spec.primary_key, self.key(n), strict=True))
        )

    def _param(self, value):
        if self.mysql and isinstance(value, datetime):
            return value.astimezone(timezone.utc).replace(tzinfo=None)
        if not self.sqlite:
            return value
        if isinstance(value, (datetime, date)):
            return value.isoformat()
        if isinstance(value, Decimal):
            return str(value)
        return value


def load(
    app: TableSource,
    warehouse: sa.Engine,
    start: str | None = None,
    end: str | None = None,
    allow: bool = False,
    now=NOW,
):
    """A real load of ``app``'s table into ``warehouse`` (UTC, two days of lookback, the
    tests' clock unless ``now``): incremental, or a range load of the days ``[start,
    end)`` (``YYYY-MM-DD``); ``allow``: its deletes past the share too."""
    bound = {} if start is None else {"start": stamp(start), "end": stamp(end)}
    return load_table(
        app.engine,
        warehouse,
        spec=app.spec,
        tz=UTC,
        lookback_days=2,
        now=now,
        deletes=DeletePolicy(allow=allow),
        **bound,
    )


def check(app: TableSource, warehouse: sa.Engine, folder):
    """``verify`` of ``app``'s table, its files in ``folder``, on the tests' clock."""
    return verify(
        app.engine,
        warehouse,
        folder,
        tz=UTC,
        today=NOW.date(),
        partitions_start=date(2026, 1, 1),
        spec=app.spec,
    )


def ranges(commands: list[str]) -> list[tuple[str, str]]:
    """The ``(start, end)`` of each range load among printed commands (each a run of one
    table's asset with its run config)."""
    out = []
    for command in commands:
        argv = shlex.split(command)
        if "--config-json" in argv:
            (op,) = json.loads(argv[argv.index("--config-json") + 1])["ops"].values()
            out.append((op["config"]["start"], op["config"]["end"]))
    return out
