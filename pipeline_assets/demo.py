"""The demo app database: the chapter's orders 101–106 in a history of realistic orders.

This is the only code that writes to the source, playing the part of the application.

``demo init`` places everything relative to the day it is given (``today``, from the
caller's clock; never read here), so the demo always lives in the present: a history
of orders over the days before today, ending yesterday, with the chapter's story among
them. The shop's day ends at :data:`DAY_CLOSES`: every history row is stamped before
that hour, so an order set later in the day (``yesterday 20:00``) is the newest one
and moves the watermark.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime, time, timedelta, tzinfo
from decimal import Decimal

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .core.commands import DEMO_INIT
from .core.db.engines import guard, has_table, writing
from .core.errors import DatabaseError, DemoError
from .core.secrets import redact
from .core.table.money import format_amount, parse_amount
from .core.times import UTC, to_instant

# The story, in days before today. With today = 2026-01-27 (CHAPTER_TODAY) these are the
# chapter's own dates: the last run read up to the 21st with 105 still pending; next,
# 105 is paid, and a late order 186, dated before that payment, arrives after it.
CHAPTER_STORY = [
    (101, "paid", "40.00", 24),
    (102, "paid", "15.50", 19),
    (103, "refunded", "30.00", 15),
    (104, "paid", "12.75", 12),
    (105, "pending", "22.00", 8),
    (106, "paid", "18.20", 6),
]
CHAPTER_TODAY = date(2026, 1, 27)

HISTORY_DAYS = 28  # what `demo init` adds by default: four weeks, ending yesterday
HISTORY_FIRST_ID = 1001
DAY_OPENS, DAY_CLOSES = 8, 18  # history rows are stamped between these hours (local)


def chapter_orders(today: date = CHAPTER_TODAY) -> list[tuple[int, str, str, str]]:
    """Orders 101–106 as ``(order_id, status, amount, updated_at)``, dated before ``today``."""
    return [
        (order_id, status, amount, (today - timedelta(days=back)).isoformat())
        for order_id, status, amount, back in CHAPTER_STORY
    ]


CHAPTER_ORDERS = chapter_orders()  # the story on the chapter's own calendar (January 2026)

STATUSES = (("paid", 70), ("pending", 15), ("refunded", 8), ("cancelled", 7))

_source = sa.MetaData()
source_orders = sa.Table(
    "orders",
    _source,
    sa.Column("order_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("status", sa.Text),
    sa.Column("amount", sa.Text),
    # MySQL indexes no TEXT column: a VARCHAR there, text like everywhere else
    sa.Column("updated_at", sa.Text().with_variant(sa.String(40), "mysql", "mariadb")),
    sa.Index("orders_updated_at_idx", "updated_at"),  # required: keeps reads incremental
)


@contextmanager
def _writing(engine: Engine) -> Iterator[sa.Connection]:
    """One write transaction on the source; a database failure is a one-line error."""
    with guard(engine, "SOURCE_DATABASE_URL"), writing(engine).begin() as conn:
        yield conn


def has_orders(engine: Engine) -> bool:
    return has_table(engine, "orders", "SOURCE_DATABASE_URL")


def init(
    engine: Engine,
    *,
    force: bool = False,
    today: date = CHAPTER_TODAY,
    tz: tzinfo = UTC,
    history_days: int = 0,
    seed: int = 0,
) -> int:
    """Create the demo ``orders`` table; returns the number of rows.

    It holds orders 101–106 dated relative to ``today`` and, with ``history_days``, the
    realistic orders of that many days before ``today`` (see :func:`history_orders`).
    """
    if history_days < 0:
        raise DemoError(f"--history-days {history_days} must be 0 or more")
    if has_orders(engine) and not force:
        raise DemoError(
            f"the source {redact(engine.url)} already has an orders table; "
            "pass --force to drop and recreate it"
        )
    rows = chapter_orders(today) + history_orders(today, tz, days=history_days, seed=seed)
    with _writing(engine) as conn:
        source_orders.drop(conn, checkfirst=True)
        source_orders.create(conn)
        conn.execute(
            source_orders.insert(),
            [dict(order_id=i, status=s, amount=a, updated_at=u) for i, s, a, u in rows],
        )
    return len(rows)


def history_orders(
    today: date, tz: tzinfo, *, days: int = HISTORY_DAYS, seed: int = 0
) -> list[tuple[int, str, str, str]]:
    """Realistic orders over the ``days`` days before ``today``, ending yesterday.

    Order ids follow the order in which the app wrote the rows. Weekdays are busier than
    weekends. Most orders are paid when placed; some are paid or refunded a few days
    later (their ``updated_at`` is then that later moment), and those whose payment is
    still due by the end of yesterday are ``pending``; a few arrive late, stamped up to
    three days before the moment they were written. Every stamp is between
    :data:`DAY_OPENS` and :data:`DAY_CLOSES` local time, with its offset. The same
    ``today``, zone and seed give the same rows.
    """
    if days <= 0:
        return []
    rng = random.Random(seed)
    first = today - timedelta(days=days)
    cutoff = datetime.combine(today - timedelta(days=1), time(DAY_CLOSES), tzinfo=tz)

    def during(day: date) -> datetime:
        second = rng.randrange((DAY_CLOSES - DAY_OPENS) * 3600)
        return datetime.combine(day, time(DAY_OPENS), tzinfo=tz) + timedelta(seconds=second)

    written = []  # (moment placed: gives the order id, status, amount, stamp)
    for n in range(days):
        day = first + timedelta(days=n)
        busy = 1.0 if day.weekday() < 5 else 0.6
        for _ in range(max(3, round(rng.gauss(18 + n * 0.15, 4) * busy))):
            placed = during(day)
            cents = min(40_000, max(300, round(rng.lognormvariate(math.log(3_200), 0.6))))
            amount = format_amount(Decimal(cents).scaleb(-2))
            roll = rng.random()
            if roll < 0.07:
                status, stamp = "cancelled", placed
            elif roll < 0.27:  # paid (or refunded) some days after it was placed
                later = during(day + timedelta(days=rng.randint(1, 3)))
                status = "refunded" if rng.random() < 0.2 else "paid"
                status, stamp = (status, later) if later < cutoff else ("pending", placed)
            else:
                status, stamp = "paid", placed
            if rng.random() < 0.05:  # copied in late by a slow system: an older stamp
                back = min(rng.randint(1, 3), (stamp.date() - first).days)
                stamp = stamp - timedelta(days=back)
            written.append((placed, status, amount, stamp))
    written.sort(key=lambda row: row[0])
    return [
        (HISTORY_FIRST_ID + k, status, amount, stamp.isoformat(timespec="seconds"))
        for k, (_, status, amount, stamp) in enumerate(written)
    ]


def _require_table(engine: Engine) -> None:
    if not has_orders(engine):
        raise DatabaseError(
            f"the source {redact(engine.url)} has no orders table yet: run `{DEMO_INIT}` first"
        )


def set_order(
    engine: Engine, order_id: int, *, status: str, amount: str, updated_at: str, tz: tzinfo
) -> str:
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
        found = conn.execute(
            sa.select(source_orders.c.order_id).where(source_orders.c.order_id == order_id)
        ).first()
        if found:
            conn.execute(
                source_orders.update().where(source_orders.c.order_id == order_id).values(**values)
            )
            return "updated"
        conn.execute(source_orders.insert().values(order_id=order_id, **values))
        return "inserted"


def delete_order(engine: Engine, order_id: int) -> tuple[str, str, str]:
    """Delete one order as the app would; returns the ``(status, amount, updated_at)`` it
    had, so the caller can say which day it left. An order the source does not hold is a
    :class:`DemoError`, and nothing is written."""
    _require_table(engine)
    t = source_orders.c
    with _writing(engine) as conn:
        found = conn.execute(
            sa.select(t.status, t.amount, t.updated_at).where(t.order_id == order_id)
        ).first()
        if found is None:
            raise DemoError(
                f"order {order_id} is not in the source {redact(engine.url)}: nothing deleted"
            )
        conn.execute(source_orders.delete().where(t.order_id == order_id))
    return tuple(found)


def generate(
    engine: Engine,
    *,
    orders: int,
    days: int,
    start: date | None = None,
    late_fraction: float = 0.05,
    seed: int = 0,
    chunk_size: int = 20_000,
) -> dict:
    """Append ``orders`` realistic orders over ``days`` days; a fraction arrive late.

    Late orders carry an ``updated_at`` one to five days older than the rest, as if a
    slow system copied them in afterwards. The same seed gives the same rows.
    """
    if orders < 0 or days < 1:
        raise DemoError("--orders must be 0 or more and --days 1 or more")
    if not 0.0 <= late_fraction <= 1.0:
        raise DemoError(f"--late-fraction {late_fraction} must be between 0 and 1")
    _require_table(engine)
    with _writing(engine) as conn:
        first_id, start = _where_to_continue(conn, start)
        rows = _random_orders(random.Random(seed), first_id, orders, start, days, late_fraction)
        late = _insert_in_chunks(conn, rows, chunk_size)
    return {
        "orders": orders,
        "first_order_id": first_id,
        "last_order_id": first_id + orders - 1,
        "start": start.isoformat(),
        "days": days,
        "late": late,
    }


def _where_to_continue(conn: sa.Connection, start: date | None) -> tuple[int, date]:
    """Where appended orders carry on: the id after the source's highest (1001 in an
    empty table) and, unless given, the day after its newest stamp (else 2026-01-01)."""
    t = source_orders.c
    first_id = (conn.execute(sa.select(sa.func.max(t.order_id))).scalar() or 1000) + 1
    if start is None:
        newest = conn.execute(sa.select(sa.func.max(t.updated_at))).scalar()
        start = (to_instant(newest, UTC).date() + timedelta(days=1)) if newest else date(2026, 1, 1)
    return first_id, start


def _random_orders(
    rng: random.Random, first_id: int, count: int, start: date, days: int, late_fraction: float
) -> Iterator[tuple[tuple[int, str, str, str], bool]]:
    """``count`` orders from ``first_id`` on, stamped over ``days`` days from ``start``
    (UTC), each with whether it arrives late, stamped one to five days older. Made one at
    a time: a large append is never held whole."""
    names = [s for s, _ in STATUSES]
    weights = [w for _, w in STATUSES]
    origin = datetime(start.year, start.month, start.day, tzinfo=UTC)
    span = days * 86_400
    for n in range(count):
        moment = origin + timedelta(seconds=rng.randrange(span))
        late = rng.random() < late_fraction
        if late:
            moment -= timedelta(days=rng.randint(1, 5), seconds=rng.randrange(3600))
        cents = rng.randint(500, 25_000)
        row = (
            first_id + n,
            rng.choices(names, weights)[0],
            format_amount(Decimal(cents).scaleb(-2)),
            moment.isoformat(timespec="seconds"),
        )
        yield row, late


def _insert_in_chunks(
    conn: sa.Connection, rows: Iterator[tuple[tuple, bool]], chunk_size: int
) -> int:
    """Insert ``(row, late)`` pairs ``chunk_size`` rows to a statement, through the driver;
    returns how many of them arrived late."""
    marker = "?" if conn.dialect.name == "sqlite" else "%s"
    sql = (
        f"INSERT INTO orders (order_id, status, amount, updated_at) "
        f"VALUES ({marker}, {marker}, {marker}, {marker})"
    )
    late = 0
    batch = []
    for row, was_late in rows:
        late += was_late
        batch.append(row)
        if len(batch) >= chunk_size:
            conn.exec_driver_sql(sql, batch)
            batch = []
    if batch:
        conn.exec_driver_sql(sql, batch)
    return late
