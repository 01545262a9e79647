"""The chapter's ``orders`` through the one path every declared table takes, in the short
forms the tests (and the benchmarks) call it by: each is the generic function with
:data:`~pipeline_assets.core.table.ORDERS` passed in, nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import tzinfo

import pyarrow as pa
from sqlalchemy.engine import Engine

from pipeline_assets.core.commands import range_command
from pipeline_assets.core.daily_files.views import day_rows, day_totals
from pipeline_assets.core.load.batch import load_table
from pipeline_assets.core.load.result import LoadResult
from pipeline_assets.core.rows.checks import newest_per_key, parse_row
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.verify.compare import compare_rows

PAID = ORDERS.daily_files[0]


def load_orders(source: Engine, warehouse: Engine, **kwargs) -> LoadResult:
    """:func:`~pipeline_assets.core.load.batch.load_table` of ``orders``."""
    return load_table(source, warehouse, spec=ORDERS, **kwargs)


def paid_orders_by_day(warehouse: Engine, days: Iterable[str], tz: tzinfo) -> dict[str, list]:
    """``{day: [row, …]}`` of ``paid_orders`` (an empty list for a day with none)."""
    return day_rows(warehouse, days, tz, ORDERS, PAID)


def paid_totals(rows) -> tuple:
    """``(paid orders, their exact total amount)`` of one day's rows."""
    count, sums = day_totals(rows, PAID.totals, ORDERS)
    return count, sums["amount"]


def newest_per_order(table: pa.Table) -> tuple[pa.Table, int]:
    return newest_per_key(table, ORDERS)


def orders_range_command(first: str, last: str, **kwargs) -> str:
    return range_command(first, last, spec=ORDERS, **kwargs)


def validate(order_id, status, amount, updated_at, tz: tzinfo) -> dict:
    """One raw ``orders`` row read by the exact rules (parsed values by column), or
    :class:`~pipeline_assets.core.errors.InvalidRowError`."""
    values = {"order_id": order_id, "status": status, "amount": amount, "updated_at": updated_at}
    return parse_row(values, tz, ORDERS)


def stored(row: dict) -> tuple:
    """A parsed ``orders`` row as the warehouse keeps it (exact amount text, canonical UTC)."""
    return tuple(ORDERS.column(name).type.stored(row[name]) for name in ORDERS.column_names)


def compare_orders(source: Engine, warehouse: Engine, tz: tzinfo, **kwargs):
    """:func:`~pipeline_assets.core.verify.compare.compare_rows` of ``orders``."""
    return compare_rows(source, warehouse, tz, spec=ORDERS, **kwargs)
