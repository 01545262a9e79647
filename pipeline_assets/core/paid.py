"""Per-day views of the warehouse: the paid orders of each day and their exact totals.

One query per run, over the whole range of days asked for, however many days that is:
the canonical UTC text of ``updated_at`` sorts as it compares, so a day in any time zone
is a plain indexed range ``[midnight, next midnight)`` on that column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta, tzinfo
from decimal import Decimal

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .db import daily_revenue, guard, has_table, orders, prepare_warehouse, writing
from .money import format_amount, parse_amount
from .rows import PAID
from .times import canonical, day_start, from_canonical, parse_day


def paid_orders_by_day(warehouse: Engine, days: Iterable[str], tz: tzinfo
                       ) -> dict[str, list[dict]]:
    """``{day: [row, …]}`` for every day asked (an empty list for a day with no paid order).

    Rows are sorted by ``order_id``; ``updated_at`` is shown in the pipeline's time zone,
    so a reader sees the local time that put the row on that day.
    """
    wanted = sorted({parse_day(d) for d in days})
    out: dict[str, list[dict]] = {d.isoformat(): [] for d in wanted}
    if not wanted:
        return out
    low = canonical(day_start(wanted[0], tz))
    high = canonical(day_start(wanted[-1] + timedelta(days=1), tz))
    o = orders.c
    query = (sa.select(o.order_id, o.amount, o.updated_at)
             .where(o.status == PAID, o.updated_at >= low, o.updated_at < high)
             .order_by(o.order_id))
    # A read: no schema creation and no write transaction (verify calls this per span of
    # days). A warehouse no load has touched yet simply has no paid orders.
    if not has_table(warehouse, orders.name, "WAREHOUSE_DATABASE_URL"):
        return out
    with guard(warehouse, "WAREHOUSE_DATABASE_URL"):
        with warehouse.connect() as conn:
            for order_id, amount, updated_at in conn.execute(query):
                local = from_canonical(updated_at).astimezone(tz)
                day = local.date().isoformat()
                if day in out:
                    out[day].append({"order_id": int(order_id), "status": PAID,
                                     "amount": amount, "updated_at": local.isoformat()})
    return out


def day_totals(rows: Sequence[Mapping]) -> tuple[int, Decimal]:
    """Number of paid orders and their exact total (a Decimal, never a float)."""
    return len(rows), sum((parse_amount(r["amount"]) for r in rows), Decimal(0))


def store_daily_revenue(warehouse: Engine, totals: Mapping[str, tuple[int, Decimal]]) -> None:
    """Replace each day's row of ``daily_revenue`` (one transaction for the run)."""
    if not totals:
        return
    prepare_warehouse(warehouse)
    r = daily_revenue.c
    with guard(warehouse, "WAREHOUSE_DATABASE_URL"), writing(warehouse).begin() as conn:
        conn.execute(daily_revenue.delete().where(r.day.in_(list(totals))))
        conn.execute(daily_revenue.insert(), [
            {"day": day, "orders": count, "revenue": format_amount(total)}
            for day, (count, total) in sorted(totals.items())
        ])

