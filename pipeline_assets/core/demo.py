"""The demo app database: the chapter's orders 101–106, and realistic generated orders.

This is the only code that writes to the source, playing the part of the application.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta, tzinfo
from decimal import Decimal

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .commands import DEMO_INIT
from .db import DatabaseError, guard, has_table, redact, writing
from .errors import PipelineError
from .money import format_amount, parse_amount
from .times import UTC, to_instant

# The story: the last run read up to 2026-01-21 with 105 still pending. Next, 105 is
# paid on 2026-01-25, and a late order 186 dated 2026-01-24 arrives after that.
CHAPTER_ORDERS = [
    (101, "paid", "40.00", "2026-01-03"),
    (102, "paid", "15.50", "2026-01-08"),
    (103, "refunded", "30.00", "2026-01-12"),
    (104, "paid", "12.75", "2026-01-15"),
    (105, "pending", "22.00", "2026-01-19"),
    (106, "paid", "18.20", "2026-01-21"),
]

STATUSES = (("paid", 70), ("pending", 15), ("refunded", 8), ("cancelled", 7))

_source = sa.MetaData()
source_orders = sa.Table(
    "orders", _source,
    sa.Column("order_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("status", sa.Text),
    sa.Column("amount", sa.Text),
    sa.Column("updated_at", sa.Text),
    sa.Index("orders_updated_at_idx", "updated_at"),  # required: keeps reads incremental
)


class DemoError(PipelineError):
    """A demo command that cannot do what was asked."""

    retryable = False  # bad input does not fix itself on a retry


@contextmanager
def _writing(engine: Engine) -> Iterator[sa.Connection]:
    """One write transaction on the source; a database failure is a one-line error."""
    with guard(engine, "SOURCE_DATABASE_URL"), writing(engine).begin() as conn:
        yield conn


def has_orders(engine: Engine) -> bool:
    return has_table(engine, "orders", "SOURCE_DATABASE_URL")


def init(engine: Engine, *, force: bool = False) -> int:
    """Create the demo ``orders`` table with orders 101–106; returns the number of rows."""
    if has_orders(engine) and not force:
        raise DemoError(f"the source {redact(engine.url)} already has an orders table; "
                        "pass --force to drop and recreate it")
    with _writing(engine) as conn:
        source_orders.drop(conn, checkfirst=True)
        source_orders.create(conn)
        conn.execute(source_orders.insert(), [
            dict(order_id=i, status=s, amount=a, updated_at=u) for i, s, a, u in CHAPTER_ORDERS
        ])
    return len(CHAPTER_ORDERS)


def _require_table(engine: Engine) -> None:
    if not has_orders(engine):
        raise DatabaseError(f"the source {redact(engine.url)} has no orders table yet: "
                            f"run `{DEMO_INIT}` first")


def set_order(engine: Engine, order_id: int, *, status: str, amount: str, updated_at: str,
              tz: tzinfo) -> str:
    """Insert or update one order as the app would; returns "inserted" or "updated".

    The values are checked first (exact amount, parseable timestamp) and stored as given.
    """
    if not status or not status.strip():
        raise DemoError("--status must not be empty")
    parse_amount(amount)
    to_instant(updated_at, tz)
    _require_table(engine)
    values = dict(status=status.strip(), amount=amount.strip(), updated_at=updated_at.strip())
    with _writing(engine) as conn:
        found = conn.execute(sa.select(source_orders.c.order_id)
                             .where(source_orders.c.order_id == order_id)).first()
        if found:
            conn.execute(source_orders.update().where(source_orders.c.order_id == order_id)
                         .values(**values))
            return "updated"
        conn.execute(source_orders.insert().values(order_id=order_id, **values))
        return "inserted"


def generate(engine: Engine, *, orders: int, days: int, start: date | None = None,
             late_fraction: float = 0.05, seed: int = 0, chunk_size: int = 20_000) -> dict:
    """Append ``orders`` realistic orders over ``days`` days; a fraction arrive late.

    Late orders carry an ``updated_at`` one to five days older than the rest, as if a
    slow system copied them in afterwards. The same seed gives the same rows.
    """
    if orders < 0 or days < 1:
        raise DemoError("--orders must be 0 or more and --days 1 or more")
    if not 0.0 <= late_fraction <= 1.0:
        raise DemoError(f"--late-fraction {late_fraction} must be between 0 and 1")
    _require_table(engine)
    t = source_orders.c
    with _writing(engine) as conn:
        first_id = (conn.execute(sa.select(sa.func.max(t.order_id))).scalar() or 1000) + 1
        if start is None:
            newest = conn.execute(sa.select(sa.func.max(t.updated_at))).scalar()
            start = (to_instant(newest, UTC).date() + timedelta(days=1)) if newest \
                else date(2026, 1, 1)
        rng = random.Random(seed)
        names = [s for s, _ in STATUSES]
        weights = [w for _, w in STATUSES]
        origin = datetime(start.year, start.month, start.day, tzinfo=UTC)
        span = days * 86_400
        marker = "?" if conn.dialect.name == "sqlite" else "%s"
        sql = (f"INSERT INTO orders (order_id, status, amount, updated_at) "
               f"VALUES ({marker}, {marker}, {marker}, {marker})")
        late = 0
        batch = []
        for n in range(orders):
            moment = origin + timedelta(seconds=rng.randrange(span))
            if rng.random() < late_fraction:
                moment -= timedelta(days=rng.randint(1, 5), seconds=rng.randrange(3600))
                late += 1
            cents = rng.randint(500, 25_000)
            batch.append((first_id + n, rng.choices(names, weights)[0],
                          format_amount(Decimal(cents).scaleb(-2)),
                          moment.isoformat(timespec="seconds")))
            if len(batch) >= chunk_size:
                conn.exec_driver_sql(sql, batch)
                batch = []
        if batch:
            conn.exec_driver_sql(sql, batch)
    return {"orders": orders, "first_order_id": first_id, "last_order_id": first_id + orders - 1,
            "start": start.isoformat(), "days": days, "late": late}
