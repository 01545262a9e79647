"""The second declared table the tests run beside ``orders``: a composite key, every type,
NULLable columns and Unicode text, as a real app's ``payments`` has them."""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from pipeline_assets.core.db.engines import dialect_of
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.table.spec import TableSpec

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
    "daily_files": [
        {
            "name": "captured_payments",
            "where": {"status": "captured"},
            "columns": [
                "payment_id",
                "attempt",
                "amount_cents",
                "fee",
                "note",
                "refundable",
                "settle_on",
                "modified_at",
            ],
            "totals": {"name": "captured_per_day", "sum": ["amount_cents", "fee"]},
        }
    ],
}
PAYMENTS: TableSpec = declare(PAYMENTS_ATTRIBUTES)
TABLES = {"orders": ORDERS, "payments": PAYMENTS}  # for pytest.mark.parametrize

# A table whose columns are named as the machinery's own working columns were (day,
# instant, paid, file, _row, key, column, rows), as SQL's reserved words (order, select,
# Group: mixed case too) and in other scripts (Größe): any name a source can have.
HOSTILE_ATTRIBUTES = {
    "table": "Group",
    "name": "hostile",
    "primary_key": ["key", "order"],
    "cursor": "instant",
    "columns": {
        "key": "integer",
        "order": "integer",
        "day": "date",
        "paid": "boolean",
        "file": "text",
        "select": "decimal(10,2)",
        "instant": "timestamp",
        "Group": {"type": "text", "nullable": True},
        "Größe": {"type": "float", "nullable": True},
        "_row": {"type": "integer", "nullable": True},
        "column": {"type": "text", "nullable": True},
        "rows": "integer",
        "per cent %": {"type": "decimal(10,2)", "nullable": True},  # % and : mean things
        "a:b": {"type": "text", "nullable": True},  # to drivers and to SQLAlchemy's text()
        "two words": {"type": "boolean", "nullable": True},
        "it's `odd`": {"type": "date", "nullable": True},  # each dialect's quote marks
    },
    "daily_files": [
        {
            "name": "hostile_files",
            "where": {"file": "kept"},
            "totals": {"name": "hostile_totals", "sum": ["select", "_row", "per cent %"]},
        }
    ],
}
HOSTILE: TableSpec = declare(HOSTILE_ATTRIBUTES)

# A table whose rows belong to the day they were captured, not the day they were last
# changed: ``day_column`` apart from the cursor (a date day column: ``settled_on``).
CAPTURES_ATTRIBUTES = {
    "table": "captures",
    "primary_key": ["capture_id", "attempt"],
    "cursor": "modified_at",
    "day_column": "captured_at",
    "columns": {
        "capture_id": "integer",
        "attempt": "integer",
        "status": "text",
        "amount": "decimal(10,2)",
        "note": {"type": "text", "nullable": True},
        "captured_at": "timestamp",
        "modified_at": "timestamp",
    },
    "daily_files": [
        {
            "name": "captured_files",
            "where": {"status": "captured"},
            "totals": {"name": "captured_totals", "sum": ["amount"]},
        }
    ],
}
CAPTURES: TableSpec = declare(CAPTURES_ATTRIBUTES)

# A table without a change stamp (a price list): every run compares it whole.
PRICES_ATTRIBUTES = {
    "table": "prices",
    "primary_key": ["sku"],
    "cursor": None,
    "day_column": "listed_on",
    "columns": {
        "sku": "integer",
        "status": "text",
        "price": "decimal(10,2)",
        "note": {"type": "text", "nullable": True},
        "listed_on": "date",
    },
    "daily_files": [
        {
            "name": "listed_prices",
            "where": {"status": "listed"},
            "totals": {"name": "listed_totals", "sum": ["price"]},
        }
    ],
}
PRICES: TableSpec = declare(PRICES_ATTRIBUTES)

# An append-only event log: an id that only grows, and the day each event occurred.
EVENTS_ATTRIBUTES = {
    "table": "events",
    "primary_key": "event_id",
    "cursor": "event_id",
    "lookback_ids": 2,
    "day_column": "occurred_at",
    "columns": {
        "event_id": "integer",
        "kind": "text",
        "amount": "decimal(10,2)",
        "note": {"type": "text", "nullable": True},
        "occurred_at": "timestamp",
    },
    "daily_files": [
        {
            "name": "purchases",
            "where": {"kind": "purchase"},
            "totals": {"name": "purchase_totals", "sum": ["amount"]},
        }
    ],
}
EVENTS: TableSpec = declare(EVENTS_ATTRIBUTES)


# --- a payments table in a real source -----------------------------------------------

# The app's payments table, per source dialect (a column nobody declared included).
PAYMENTS_DDL = {
    "sqlite": "CREATE TABLE {t} (payment_id INTEGER NOT NULL, attempt INTEGER NOT NULL, "
    "status TEXT NOT NULL, amount_cents INTEGER NOT NULL, fee DECIMAL(10,2), "
    "rate REAL, note TEXT, refundable BOOLEAN, settle_on DATE, modified_at "
    "TIMESTAMP NOT NULL, legacy_code TEXT, PRIMARY KEY (payment_id, attempt))",
    "postgresql": "CREATE TABLE {t} (payment_id BIGINT NOT NULL, attempt INTEGER NOT NULL, "
    "status VARCHAR(20) NOT NULL, amount_cents BIGINT NOT NULL, "
    "fee NUMERIC(10,2) NOT NULL, rate DOUBLE PRECISION, note TEXT, "
    "refundable BOOLEAN NOT NULL, settle_on DATE, "
    "modified_at TIMESTAMPTZ NOT NULL, legacy_code TEXT, "
    "PRIMARY KEY (payment_id, attempt))",
    "mysql": "CREATE TABLE {t} (payment_id BIGINT NOT NULL, attempt INT NOT NULL, "
    "status VARCHAR(20) NOT NULL, amount_cents BIGINT NOT NULL, "
    "fee DECIMAL(10,2) NOT NULL, rate DOUBLE, note TEXT, refundable BOOLEAN NOT NULL, "
    "settle_on DATE, modified_at TIMESTAMP NOT NULL, legacy_code TEXT, "
    "PRIMARY KEY (payment_id, attempt)) CHARACTER SET utf8mb4",
}


COLUMNS = (
    "payment_id",
    "attempt",
    "status",
    "amount_cents",
    "fee",
    "rate",
    "note",
    "refundable",
    "settle_on",
    "modified_at",
)


def _stamp(backend: str, modified_at: str) -> str:
    """``YYYY-MM-DD HH:MM:SS`` (UTC) as the app writes it: with an offset on SQLite."""
    return f"{modified_at[:10]}T{modified_at[11:]}+00:00" if backend == "sqlite" else modified_at


def make_payments(
    engine, backend: str | None = None, table: str = "payments", rows: list[tuple] = ()
) -> None:
    """Create the app's payments table (rows: tuples in :data:`COLUMNS` order, stamps in
    UTC) on ``engine``'s dialect."""
    backend = backend or dialect_of(engine)
    with engine.begin() as conn:
        if "." in table:
            conn.exec_driver_sql(f"CREATE SCHEMA {table.partition('.')[0]}")
        conn.exec_driver_sql(PAYMENTS_DDL[backend].format(t=table))
    put_payments(engine, rows, table=table, backend=backend)


def put_payments(engine, rows, *, table: str = "payments", backend: str | None = None) -> None:
    """Insert or replace payments as the app does (one transaction)."""
    backend = backend or dialect_of(engine)
    rows = list(rows)
    if not rows:
        return
    with engine.begin() as conn:
        for row in rows:
            conn.execute(
                sa.text(f"DELETE FROM {table} WHERE payment_id = :p AND attempt = :a"),
                {"p": row[0], "a": row[1]},
            )
        conn.execute(
            sa.text(
                f"INSERT INTO {table} (payment_id, attempt, status, amount_cents, fee, rate, note, "
                "refundable, settle_on, modified_at, legacy_code) VALUES (:p, :a, :s, :c, :f, "
                ":r, :n, :b, :d, :m, 'x')"
            ),
            [
                dict(p=p, a=a, s=s, c=c, f=f, r=r, n=n, b=b, d=d, m=_stamp(backend, m))
                for p, a, s, c, f, r, n, b, d, m in rows
            ],
        )


def delete_payment(engine, payment_id: int, attempt: int, table: str = "payments") -> None:
    """The app deleting one payment attempt."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(f"DELETE FROM {table} WHERE payment_id = :p AND attempt = :a"),
            {"p": payment_id, "a": attempt},
        )


def in_format(attributes: dict, form: str) -> dict:
    """The declaration with its daily files written as ``form`` (json or parquet)."""
    return {**attributes, "daily_files": [{**f, "format": form} for f in attributes["daily_files"]]}


def in_parquet(spec: TableSpec) -> TableSpec:
    """``spec`` with its daily files in Parquet (a spec declared in code, ``orders``'s too)."""
    files = tuple(dataclasses.replace(f, format="parquet") for f in spec.daily_files)
    return dataclasses.replace(spec, daily_files=files)


# payments with its day files in Parquet (``format: parquet``): the file writer's paths
# in the other format. Not in TABLES: the tests that iterate it run each table once.
PAYMENTS_PARQUET_ATTRIBUTES = in_format(PAYMENTS_ATTRIBUTES, "parquet")
PAYMENTS_PARQUET: TableSpec = declare(PAYMENTS_PARQUET_ATTRIBUTES)
