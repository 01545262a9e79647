"""The second declared table the tests run beside ``orders``: a composite key, every type,
NULLable columns and Unicode text, as a real app's ``payments`` has them."""

from __future__ import annotations

from pipeline_assets.core.spec import ORDERS, TableSpec, declare

PAYMENTS_ATTRIBUTES = {
    "table": "payments",
    "primary_key": ["payment_id", "attempt"],
    "cursor": "modified_at",
    "columns": {
        "payment_id": "integer",
        "attempt": "integer",
        "status": "text",
        "amount_cents": "integer",
        "fee": "decimal(10,2)",
        "rate": {"type": "float", "nullable": True},
        "note": {"type": "text", "nullable": True},
        "refundable": "boolean",
        "settle_on": {"type": "date", "nullable": True},
        "modified_at": "timestamp",
    },
    "daily_files": [{
        "name": "captured_payments",
        "where": {"status": "captured"},
        "columns": ["payment_id", "attempt", "amount_cents", "fee", "note", "refundable",
                    "settle_on", "modified_at"],
        "totals": {"name": "captured_per_day", "sum": ["amount_cents", "fee"]},
    }],
}
PAYMENTS: TableSpec = declare(PAYMENTS_ATTRIBUTES)
TABLES = {"orders": ORDERS, "payments": PAYMENTS}  # for pytest.mark.parametrize
