"""The watermark: the newest change stamp (``updated_at`` for ``orders``) the
incremental load of a declared table has stored; for an integer cursor, the highest id.
It is stored as text: canonical UTC for an instant, decimal digits for an id
(:func:`stored`, :func:`parsed`), so one store serves both.

Contract of the store (table ``pipeline_watermark`` in the warehouse database, one row
per declared table, named by the table's ``name``):

- it is advanced only by an incremental load, in the same transaction as the rows it
  covers, and only forward: ``new = max(old, newest read)``;
- an explicit-range load (a backfill of the load) never touches it;
- the only way back is :func:`rewind`, which records old value, new value, reason and
  time in ``pipeline_watermark_history`` next to every load's advance.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..db.engines import guard, writing
from ..db.state import of_table, prepare_warehouse, watermark_history, watermark_state
from ..errors import WatermarkError
from ..table.spec import TableSpec
from ..times import canonical, from_canonical

# --- pure rules -------------------------------------------------------------------------


Mark = datetime | int  # a watermark: an instant, or an integer cursor's id


def window_start(watermark: Mark | None, lookback: int) -> Mark | None:
    """Where an incremental read starts: ``watermark − lookback`` (None: read everything);
    ``lookback`` in days, or in ids for an id."""
    if lookback < 0:
        raise WatermarkError(f"LOOKBACK_DAYS must be 0 or more, not {lookback}")
    if watermark is None:
        return None
    if isinstance(watermark, int):
        return watermark - lookback
    return watermark - timedelta(days=lookback)


def stored(value: Mark | None) -> str | None:
    """A watermark as the store keeps it: canonical UTC text, or an id's digits."""
    if value is None:
        return None
    return str(value) if isinstance(value, int) else canonical(value)


def parsed(text: str | None) -> Mark | None:
    """What :func:`stored` wrote, read back."""
    if not text:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    return from_canonical(text)


def shown(value: Mark | None) -> str | int | None:
    """A watermark in JSON and metadata: ISO-8601, or the id as a number."""
    if value is None or isinstance(value, int):
        return value
    return value.isoformat()


def text(value: Mark | None) -> str | None:
    """A watermark as text for people and manifests: ISO-8601, or the id's digits."""
    shown_value = shown(value)
    return None if shown_value is None else str(shown_value)


def advance(watermark: Mark | None, newest_read: Mark | None) -> Mark | None:
    """``max(watermark, newest read)``: the watermark never moves back."""
    if newest_read is None:
        return watermark
    if watermark is None:
        return newest_read
    return max(watermark, newest_read)


# --- the store --------------------------------------------------------------------------


@dataclass(frozen=True)
class WatermarkChange:
    changed_at: str
    kind: str
    old_value: str | None
    new_value: str | None
    reason: str | None
    batch_id: str | None


def lock(conn: sa.Connection, holder: str, *, table: str) -> None:
    """Serialize loads: take the write lock on the watermark row for this transaction.

    On PostgreSQL this is a row lock held until commit; on SQLite the first write takes
    the database's write lock. Either way a second load waits here, then sees the first
    one's committed watermark.
    """
    conn.execute(
        watermark_state.update().where(watermark_state.c.name == table).values(lock_holder=holder)
    )


def read(conn: sa.Connection, *, table: str) -> Mark | None:
    value = conn.execute(
        sa.select(watermark_state.c.value).where(watermark_state.c.name == table)
    ).scalar()
    return parsed(value)


def write(
    conn: sa.Connection,
    old: Mark | None,
    new: Mark | None,
    *,
    kind: str,
    at: datetime,
    reason: str | None = None,
    batch_id: str | None = None,
    table: str,
) -> None:
    """Store ``new`` and record the change; a no-op when nothing changes."""
    if old == new:
        return
    if kind == "load" and old is not None and (new is None or new < old):
        raise WatermarkError(f"a load may not move the watermark back from {old} to {new}")
    conn.execute(
        watermark_state.update().where(watermark_state.c.name == table).values(value=stored(new))
    )
    conn.execute(
        watermark_history.insert().values(
            changed_at=canonical(at),
            kind=kind,
            old_value=stored(old),
            new_value=stored(new),
            reason=reason,
            batch_id=batch_id,
            table_name=table,
        )
    )


def current(engine: Engine, *, table: str) -> Mark | None:
    """The stored watermark of ``table`` (None before its first load); reads only."""
    with guard(engine, "WAREHOUSE_DATABASE_URL"):
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table(watermark_state.name):
                return None
            return read(conn, table=table)


def rewind(engine: Engine, value: Mark, *, reason: str, at: datetime, table: str) -> tuple:
    """Move the watermark of ``table`` back to ``value`` on purpose; returns ``(old, new)``."""
    if not reason or not reason.strip():
        raise WatermarkError("a rewind needs a --reason, recorded in the watermark history")
    prepare_warehouse(engine, None)
    with guard(engine, "WAREHOUSE_DATABASE_URL"), writing(engine).begin() as conn:
        lock(conn, "rewind", table=table)
        old = read(conn, table=table)
        if old is None:
            raise WatermarkError(
                "there is no watermark yet: nothing to rewind (the first load reads everything)"
            )
        if value >= old:
            raise WatermarkError(
                f"a rewind moves the watermark back, but {stored(value)} is not before "
                f"the current {stored(old)}; loads move it forward by themselves"
            )
        write(conn, old, value, kind="rewind", at=at, reason=reason.strip(), table=table)
    return old, value


def history(engine: Engine, *, spec: TableSpec, newest: int | None = None) -> list[WatermarkChange]:
    """Every change of ``spec``'s watermark, oldest first (``newest``: only the newest
    that many, read backwards through the key: as cheap after a year as on day one);
    reads only."""
    h = watermark_history.c
    with guard(engine, "WAREHOUSE_DATABASE_URL"):
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table(watermark_history.name):
                return []
            if "table_name" not in {
                c["name"] for c in sa.inspect(conn).get_columns(watermark_history.name)
            }:
                if spec.legacy is None:  # made before declarations: orders' history only
                    return []
                query = sa.select(
                    h.changed_at, h.kind, h.old_value, h.new_value, h.reason, h.batch_id
                )
            else:
                query = sa.select(
                    h.changed_at, h.kind, h.old_value, h.new_value, h.reason, h.batch_id
                ).where(of_table(h.table_name, spec))
            if newest is None:
                rows = conn.execute(query.order_by(h.id)).all()
            else:
                rows = conn.execute(query.order_by(h.id.desc()).limit(newest)).all()[::-1]
    return [WatermarkChange(*row) for row in rows]
