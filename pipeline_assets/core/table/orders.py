"""``orders``, the chapter's table, as a declaration: the attributes the release before
declarations implied (:data:`ORDERS_ATTRIBUTES`), and what it kept from that release
(:data:`LEGACY`: its words, row rules and names), as data.

This is the one place that knows what is special about ``orders``. :func:`.declare.declare`
gives :data:`LEGACY` to a declaration of exactly this shape (the code location's own
:data:`~pipeline_assets.core.table.ORDERS`, or a ``defs.yaml`` that declares the same
table); every module reads it from the spec it is given, never from the table's name.
"""

from __future__ import annotations

from .spec import Legacy

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

LEGACY = Legacy(
    words={
        "rows_counted": "order(s)",
        "those_rows": "orders",
        "table_rows_counted": "order(s)",
        "the_source": "SOURCE_DATABASE_URL",
        "table_rows": "orders",
        "Table_rows": "Orders",
        "Source_rows": "Orders",
        "future_keys": "orders",
        "file_rows_counted": "paid order(s)",
        "file_rows": "paid orders",
        "not_in_file": "no longer paid",
        "a_key": "an order_id",
        "one_row": "order",
        "report_prefix": "",
        "no_source": "create the demo with `{init}` or set SOURCE_DATABASE_URL",
        "Files_rows": "The paid orders",
        "totals_description": "Per day: the number of paid orders and their exact total, "
        "computed from the committed {file} files.",
        "rows_listed": "order {keys}",
        "rows_listed_many": "orders {keys}",
    },
    keys={
        "future_keys": "future_order_ids",
        "deleted_keys": "deleted_order_ids",
        "warehouse_files": "warehouse_paid",
    },
    row="order {key}",
    no_key="a row with no order_id",
    missing={
        "order_id": "every order needs an integer key",
        "status": "the status is missing",
        "amount": "the amount is missing",
        "updated_at": "the timestamp is missing",
    },
    nonblank=("status",),
    not_a_key="the key is not an integer",
    reason_names_value=True,
    tie=(
        "the source holds two rows of this order with this updated_at and different "
        "values ({first} and {second}), so neither can win; keep one"
    ),
    files_job="daily_files_job",
    daily_job="daily_job",
    schedule="daily_schedule",
    totals_columns=("orders", "revenue"),
    totals_metadata=("orders", "revenue", "revenue_exact"),
    missing_table=(
        "the source database {url} has no table 'orders': create the demo with `{init}` or "
        "point SOURCE_DATABASE_URL at the app"
    ),
)
