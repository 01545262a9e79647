"""When a declaration changes under stored rows: what the warehouse table becomes, done
in the load's own transaction, under its watermark lock, before anything is read.

The declaration of the table's latest batch (:func:`.declaration.latest`) is what is
stored; the declaration the load runs with is what is declared. Between the two:

- **a column declared now and not before** is added to the warehouse table (nullable,
  ``ALTER TABLE … ADD COLUMN``; a column that was declared once, removed and is declared
  again is there already). The rows stored before carry nothing for it, whatever the
  source holds (an app's migration fills old rows without touching their stamps, which no
  incremental read can see): the days holding them are recorded in
  ``pipeline_column_fills``, in the batch's transaction, until a load reads each of them
  whole (:func:`close_gaps`; a range load of the day is what ``verify`` prints).
- **a column no longer declared** stays in the warehouse with its data, and is no longer
  read or written (a user drops it, deliberately). Only a column the table requires
  (``orders``' table of the release before declarations) is made nullable on PostgreSQL,
  so new rows can be written without it; SQLite cannot, and refuses.
- **a type every stored value fits** (:func:`widening`: ``integer`` → ``decimal``,
  ``integer`` → ``decimal(P,S)`` when the stored values have at most ``P-S`` digits, a
  larger precision or scale, ``decimal(P,S)`` → ``decimal``, ``date`` → ``timestamp``) is
  applied: each stored value is rewritten in the new type's stored form (``5`` →
  ``"5.00"``; a date → the instant of its midnight in the pipeline's zone), with an
  ``ALTER … TYPE`` on PostgreSQL; SQLite keeps its storage where the form does not
  change, and where the column's affinity must (an integer becoming exact text) the
  column is renamed, added again as text, filled and the old one dropped. Anything
  else, and any change of a key column's type, is refused
  (:class:`~pipeline_assets.core.errors.TypeChangeRefused`) before anything is written.

A changed ``primary_key`` or ``cursor`` is refused before all this
(:func:`.declaration.check_unchanged`). PostgreSQL and SQLite both run DDL inside a
transaction: a load killed after the change and before its commit leaves the table as
it was, and the next run makes the change again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, tzinfo

import sqlalchemy as sa

from ..db.engines import guard, has_table
from ..db.schema import column_sql_type
from ..db.state import column_fills, declarations
from ..errors import SchemaChangeRefused, TypeChangeRefused
from ..table.spec import TableSpec
from ..table.types import ColumnType
from ..times import canonical
from .declaration import Recorded, fingerprint

_WAS = "__pipeline_was"  # suffix of a SQLite column being retyped, for one statement


@dataclass(frozen=True)
class Widening:
    column: str
    stored: ColumnType
    declared: ColumnType

    def to_json(self) -> dict:
        return {"column": self.column, "from": str(self.stored), "to": str(self.declared)}


@dataclass(frozen=True)
class Evolution:
    """What a load found changed in its declaration and did to the warehouse table."""

    fingerprint: str  # of the declaration the load runs with
    added: tuple[str, ...] = ()  # declared now, not in the stored declaration
    removed: tuple[str, ...] = ()  # in the stored declaration, declared no more: kept
    widened: tuple[Widening, ...] = ()
    gap_days: tuple[str, ...] = ()  # days holding rows stored before the added columns
    rows_before: int = 0  # rows the table held when they were added

    @property
    def altered(self) -> bool:
        """Whether the warehouse table changed (a column added, or values rewritten)."""
        return bool(self.added or self.widened)


def widening(stored: ColumnType, declared: ColumnType) -> str | None:
    """How a stored column of type ``stored`` may become ``declared``: ``"always"`` (every
    value of the one is a value of the other), ``"if the values fit"`` (``integer`` →
    ``decimal(P,S)`` with fewer than 19 digits before the point), or None: refused."""
    if stored.widens_to(declared):
        return "always"
    if stored.codec.fit_digits(stored, declared) is not None:
        return "if the values fit"
    return None


def evolve(conn: sa.Connection, spec: TableSpec, stored: Recorded | None, tz: tzinfo) -> Evolution:
    """Bring ``spec``'s warehouse table to its declaration, in ``conn``'s transaction (see
    the module): nothing to do (one comparison) when the latest batch was written with the
    same declaration. Raises :class:`~pipeline_assets.core.errors.SchemaChangeRefused` before
    changing anything when a change cannot be followed."""
    fp = fingerprint(spec)
    if stored is not None and stored.fingerprint == fp:
        return Evolution(fp)
    q = conn.dialect.identifier_preparer.quote
    present = {c["name"]: c for c in sa.inspect(conn).get_columns(spec.name)}
    if stored is None:  # no declaration recorded: what the table holds is what is stored
        was = {name: None for name in present}
    else:
        was = {
            name: ColumnType.named(c["type"]) for name, c in stored.declaration["columns"].items()
        }
    added = tuple(c.name for c in spec.columns if c.name not in was)
    removed = tuple(name for name in was if name not in spec.column_names)
    widened = []
    for column in spec.columns:
        old = was.get(column.name)
        if column.name in added and column.name in present and stored is not None:
            old = _last_declared_type(conn, spec.name, column.name)  # declared once before
        if old is not None and old != column.type:
            widened.append(_allowed(conn, spec, Widening(column.name, old, column.type)))
    required = [
        name
        for name in removed
        if name in present and not present[name]["nullable"] and name not in spec.primary_key
    ]
    if required and conn.dialect.name == "sqlite":
        raise SchemaChangeRefused(
            f"table {spec.name}: column(s) {', '.join(required)} are no longer declared, but "
            "the SQLite warehouse table requires them (NOT NULL, a table made before "
            "declarations), so new rows could not be written without them; nothing was "
            "written. Keep them declared, or declare the new shape under a new name."
        )
    # every check passed: change the table
    for name in required:  # PostgreSQL: the pipeline no longer writes them
        conn.exec_driver_sql(f"ALTER TABLE {q(spec.name)} ALTER COLUMN {q(name)} DROP NOT NULL")
    for name in added:
        if name not in present:
            kind = column_sql_type(spec.column(name).type).compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE {q(spec.name)} ADD COLUMN {q(name)} {kind}")
    for change in widened:
        _rewrite(conn, spec, change, tz)
    rows, days = _stored_days(conn, spec, tz) if added else (0, ())
    return Evolution(fp, added, removed, tuple(widened), days, rows)


def _last_declared_type(conn: sa.Connection, table: str, column: str) -> ColumnType | None:
    """The type ``column`` had in the newest recorded declaration of ``table`` that held
    it (a column declared, removed, and declared again: its stored values are of that)."""
    d = declarations.c
    rows = conn.execute(
        sa.select(d.declaration)
        .where(d.table_name == table)
        .order_by(d.recorded_at.desc(), d.first_batch_id.desc())
    )
    for (text,) in rows:
        held = json.loads(text)["columns"].get(column)
        if held is not None:
            return ColumnType.named(held["type"])
    return None


def _allowed(conn: sa.Connection, spec: TableSpec, change: Widening) -> Widening:
    """``change`` when the stored values all fit the declared type; else refused."""
    old, new = change.stored, change.declared
    refuse = lambda why: TypeChangeRefused(spec.name, change.column, str(old), str(new), why)  # noqa: E731
    if change.column in spec.primary_key:
        raise refuse(
            "a key column's type is part of what the same row means (widening it could "
            "make two stored keys one)"
        )
    how = widening(old, new)
    if how == "always":
        return change
    if how is None:
        raise refuse(old.codec.refusal(old, new))
    # integer -> decimal(P,S) with fewer than 19 digits before the point: the stored ones
    digits = old.codec.fit_digits(old, new)
    q = conn.dialect.identifier_preparer.quote
    low, high = conn.exec_driver_sql(
        f"SELECT min({q(change.column)}), max({q(change.column)}) FROM {q(spec.name)}"
    ).one()
    worst = max((v for v in (low, high) if v is not None), key=abs, default=0)
    if abs(int(worst)) >= 10**digits:
        raise refuse(
            f"a stored value ({int(worst)}) has more than {digits} digits before the point"
        )
    return change


def _rewrite(conn: sa.Connection, spec: TableSpec, change: Widening, tz: tzinfo) -> None:
    """Each stored value of the column in the declared type's stored form, as the stored
    type's codec says: in SQL (``widen_sql``), or value by value (``widen_value``)."""
    q = conn.dialect.identifier_preparer.quote
    table, column = q(spec.name), q(change.column)
    old, new = change.stored, change.declared
    pg = conn.dialect.name == "postgresql"
    widened = old.codec.widen_sql(old, new, column)
    was, now = (column_sql_type(t).compile(dialect=conn.dialect) for t in (old, new))
    if old.codec.arrow_type != new.codec.arrow_type:  # a number becomes text: 5 -> "5.00"
        if pg:
            conn.exec_driver_sql(
                f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {now} USING {widened}"
            )
            return
        # SQLite: a column of integer affinity would store "5.10" as the float 5.1
        renamed = q(change.column + _WAS)
        conn.exec_driver_sql(f"ALTER TABLE {table} RENAME COLUMN {column} TO {renamed}")
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} {now}")
        from_renamed = old.codec.widen_sql(old, new, renamed)
        conn.exec_driver_sql(f"UPDATE {table} SET {column} = {from_renamed}")
        conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {renamed}")
        return
    if pg and was != now:  # text that grows: VARCHAR(10) -> VARCHAR(32)
        conn.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {now}")
    if widened is not None:  # text rewritten in SQL: more places written out
        conn.exec_driver_sql(f"UPDATE {table} SET {column} = {widened} WHERE {column} IS NOT NULL")
        return
    rewrite = old.codec.widen_value(old, new, tz)
    if rewrite is not None:
        _rewrite_values(conn, table, column, rewrite, (was, now))


def _rewrite_values(conn: sa.Connection, table: str, column: str, rewrite, types) -> None:
    """Each distinct stored value of ``column`` (SQL names) as ``rewrite`` gives it;
    ``types``: the SQL types of the values before and after."""
    values = [
        d
        for (d,) in conn.exec_driver_sql(
            f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL"
        )
    ]
    mapping = [{"old": d, "new": rewrite(d)} for d in values]
    if not mapping:
        return
    conn.exec_driver_sql(
        f"CREATE TEMP TABLE pipeline_retyped (old {types[0]} PRIMARY KEY, new {types[1]})"
    )
    conn.execute(sa.text("INSERT INTO pipeline_retyped (old, new) VALUES (:old, :new)"), mapping)
    conn.exec_driver_sql(
        f"UPDATE {table} SET {column} = (SELECT new FROM pipeline_retyped r "
        f"WHERE r.old = {table}.{column}) WHERE {column} IS NOT NULL"
    )
    conn.exec_driver_sql("DROP TABLE pipeline_retyped")


def _stored_days(conn: sa.Connection, spec: TableSpec, tz: tzinfo) -> tuple[int, tuple[str, ...]]:
    """How many rows the table holds, and the days they are on in ``tz``: read through the
    day column's index (distinct minutes of canonical UTC text, each on one day in any
    zone whose offset is whole minutes), once, when a column is added. (A day column
    added with it is NULL in every stored row: no day yet.)"""
    q = conn.dialect.identifier_preparer.quote
    table, day = q(spec.name), q(spec.day)
    rows = conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar() or 0
    if not rows:
        return 0, ()
    held = f"FROM {table} WHERE {day} IS NOT NULL"
    if spec.column(spec.day).type.codec.is_day:
        found = conn.exec_driver_sql(f"SELECT DISTINCT {day} {held}")
        return rows, tuple(sorted(d for (d,) in found))
    minutes = conn.exec_driver_sql(f"SELECT DISTINCT substr({day}, 1, 16) {held}")
    days = {datetime.fromisoformat(f"{m}:00+00:00").astimezone(tz).date() for (m,) in minutes}
    return rows, tuple(sorted(d.isoformat() for d in days))


# --- the days still to fill -----------------------------------------------------------------


@dataclass(frozen=True)
class Gap:
    """A column a declaration added to a table holding rows: the days whose rows were
    stored without it and have not been read whole since."""

    table: str
    column: str
    added_batch_id: str
    declaration: str
    added_at: str
    rows_before: int
    days: tuple[str, ...]

    def to_json(self) -> dict:
        return {
            "column": self.column,
            "added_by_batch": self.added_batch_id,
            "added_at": self.added_at,
            "days": list(self.days),
        }


def record_gaps(
    conn: sa.Connection, spec: TableSpec, evolution: Evolution, batch_id: str, at: datetime
) -> None:
    """Record, in the batch's transaction, the days still to fill of each column the batch
    added to a table that held rows."""
    if not evolution.gap_days:
        return
    conn.execute(
        column_fills.insert(),
        [
            {
                "table_name": spec.name,
                "column_name": column,
                "added_batch_id": batch_id,
                "declaration": evolution.fingerprint,
                "added_at": canonical(at),
                "rows_before": evolution.rows_before,
                "days": json.dumps(list(evolution.gap_days)),
            }
            for column in evolution.added
        ],
    )


def close_gaps(conn: sa.Connection, spec: TableSpec, first: date | None, last: date | None) -> None:
    """Days ``first``…``last`` (None: unbounded) were read whole by the batch: every row
    stamped on them now holds what the source holds, so no gap keeps them."""
    c = column_fills.c
    for gap in gaps(conn, spec):
        left = unread(gap.days, first, last)
        if len(left) != len(gap.days):
            conn.execute(
                column_fills.update()
                .where(
                    c.table_name == spec.name,
                    c.column_name == gap.column,
                    c.added_batch_id == gap.added_batch_id,
                )
                .values(days=json.dumps(left))
            )


def unread(days, first: date | None, last: date | None) -> list[str]:
    """The days of ``days`` outside ``first``…``last`` (None: unbounded on that side)."""
    low, high = first and first.isoformat(), last and last.isoformat()
    return [d for d in days if not ((low is None or d >= low) and (high is None or d <= high))]


def gaps(conn: sa.Connection, spec: TableSpec) -> list[Gap]:
    """The open gaps of ``spec``'s table, of the columns it still declares, oldest first."""
    c = column_fills.c
    found = conn.execute(
        sa.select(column_fills)
        .where(c.table_name == spec.name, c.days != "[]")
        .order_by(c.added_at, c.column_name)
    )
    return [
        Gap(
            r.table_name,
            r.column_name,
            r.added_batch_id,
            r.declaration,
            r.added_at,
            r.rows_before,
            tuple(json.loads(r.days)),
        )
        for r in found
        if r.column_name in spec.column_names
    ]


def open_gaps(warehouse, spec: TableSpec) -> list[Gap]:
    """:func:`gaps` on a warehouse engine (none before the pipeline made its tables)."""
    if not has_table(warehouse, column_fills.name, "WAREHOUSE_DATABASE_URL"):
        return []
    with guard(warehouse, "WAREHOUSE_DATABASE_URL"), warehouse.connect() as conn:
        return gaps(conn, spec)


def days_to_fill(found: list[Gap]) -> dict[str, list[str]]:
    """``{day: [column, …]}``: what each day's rows lack."""
    out: dict[str, list[str]] = {}
    for gap in found:
        for day in gap.days:
            out.setdefault(day, []).append(gap.column)
    return dict(sorted(out.items()))
