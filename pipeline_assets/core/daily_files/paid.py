"""``orders``' per-day view: the paid orders of each day and their exact totals.

The view itself is generic (:mod:`.views`, over any declared table); these are the
entry points ``orders`` always had, with the same rows, bytes and errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import tzinfo
from decimal import Decimal

from sqlalchemy.engine import Engine

from ..db.engines import guard, writing
from ..db.state import daily_revenue, prepare_warehouse
from ..table.money import format_amount
from ..table.orders import ORDERS
from .views import day_rows, day_totals

__all__ = ["day_totals", "paid_orders_by_day", "store_daily_revenue"]


def paid_orders_by_day(warehouse: Engine, days: Iterable[str], tz: tzinfo) -> dict[str, list[dict]]:
    """``{day: [row, …]}`` for every day asked (an empty list for a day with no paid order).

    Rows are sorted by ``order_id``; ``updated_at`` is shown in the pipeline's time zone,
    so a reader sees the local time that put the row on that day.
    """
    return day_rows(warehouse, days, tz, ORDERS, ORDERS.daily_files[0])


def store_daily_revenue(warehouse: Engine, totals: Mapping[str, tuple[int, Decimal]]) -> None:
    """Replace each day's row of ``daily_revenue`` (one transaction for the run)."""
    if not totals:
        return
    prepare_warehouse(warehouse)
    r = daily_revenue.c
    with guard(warehouse, "WAREHOUSE_DATABASE_URL"), writing(warehouse).begin() as conn:
        conn.execute(daily_revenue.delete().where(r.day.in_(list(totals))))
        conn.execute(
            daily_revenue.insert(),
            [
                {"day": day, "orders": count, "revenue": format_amount(total)}
                for day, (count, total) in sorted(totals.items())
            ],
        )
