"""``orders``, the chapter's table, as a declaration: the attributes the release before
declarations implied (:data:`ORDERS_ATTRIBUTES`), which ``definitions.py`` serves.

It is one declaration among others: every module takes the table it works on as a
:class:`~.spec.TableSpec`, and this one reaches them only through the code location.
"""

from __future__ import annotations

from .declare import declare

# The chapter's table, as a declaration: the names, columns, filter and totals the
# pipeline had before declarations existed.
ORDERS_ATTRIBUTES = {
    "table": "orders",
    "primary_key": "order_id",
    "cursor": "updated_at",
    "columns": {
        "order_id": "integer",
        "status": "text",
        "amount": "decimal",
        "updated_at": "timestamp",
    },
    "daily_files": [
        {
            "name": "paid_orders",
            "where": {"status": "paid"},
            "totals": {"name": "daily_revenue", "sum": ["amount"]},
        }
    ],
}
ORDERS = declare(ORDERS_ATTRIBUTES)
