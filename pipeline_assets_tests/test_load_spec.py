"""The load of a second declared table, ``payments`` (a key of two columns, every type,
NULLs, Unicode), through the same core as ``orders``, beside it in one warehouse, on
SQLite, PostgreSQL and (as a source) MariaDB.

The story of the chapter, told for payments: the first load, a late row inside the
lookback, an update that moves a row to another day, a retry skipped by its batch id, a
range load that deletes a row the app deleted (one attempt of a payment, not the other),
and a bad value that writes nothing. Each table's watermark, history and ledger are its
own.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
import sqlalchemy as sa

from pipeline_assets import demo
from pipeline_assets.core.db.schema import warehouse_table
from pipeline_assets.core.db.state import batches
from pipeline_assets.core.errors import InvalidRowError
from pipeline_assets.core.load.batch import load_table
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets_tests.orders import load_orders

from .conftest import NOW
from .tables import PAYMENTS, delete_payment, make_payments, put_payments

DAY = "2026-01-20"
ROWS = [  # payment_id, attempt, status, cents, fee, rate, note, refundable, settle_on, stamp
    (7, 9, "failed", 1999, "0.00", None, None, False, None, "2026-01-20 09:00:00"),
    (7, 10, "captured", 1999, "1.10", 0.5, "Grüße ☕ 𝄞", True, "2026-01-21", "2026-01-20 10:00:00"),
    (3, 1, "refunded", -500, "-0.50", -1e-07, "naïve 'quoted'", False, None, "2026-01-21 12:00:00"),
    (12, 1, "captured", 250000, "12345678.99", 2.5, "", True, "2026-01-22", "2026-01-22 23:59:59"),
]


def run(engines, **kw):
    source, warehouse = engines
    return load_table(source, warehouse, spec=PAYMENTS, tz=UTC, lookback_days=2, now=NOW, **kw)


def stored(warehouse) -> dict[tuple, dict]:
    table = warehouse_table(PAYMENTS)
    with warehouse.connect() as conn:
        rows = conn.execute(sa.select(table)).mappings().all()
    return {(r["payment_id"], r["attempt"]): dict(r) for r in rows}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def payments(engines):
    make_payments(engines[0], rows=ROWS)
    return engines


def test_a_first_load_copies_every_payment_with_its_types_and_nulls(payments):
    result = run(payments)

    assert (result.kind, result.rows_read, result.inserted) == ("incremental", 4, 4)
    assert result.batch_id.startswith("payments-")
    assert result.watermark_after == at("2026-01-22 23:59:59")
    assert result.days_touched == ("2026-01-20", "2026-01-21", "2026-01-22")
    rows = stored(payments[1])
    assert sorted(rows) == [(3, 1), (7, 9), (7, 10), (12, 1)]
    failed, captured = rows[(7, 9)], rows[(7, 10)]
    assert (failed["rate"], failed["note"], failed["settle_on"]) == (None, None, None)
    assert bool(failed["refundable"]) is False and bool(captured["refundable"]) is True
    assert captured["note"] == "Grüße ☕ 𝄞"
    assert Decimal(captured["fee"]) == Decimal("1.10") and captured["fee"] == "1.10"
    assert rows[(12, 1)]["fee"] == "12345678.99"
    assert captured["settle_on"] == "2026-01-21"
    assert captured["modified_at"] == "2026-01-20T10:00:00.000000+00:00"
    assert wm.current(payments[1], table="payments") == at("2026-01-22 23:59:59")
    assert wm.current(payments[1], table=ORDERS.name) is None  # orders' watermark: never loaded


def test_late_rows_moved_days_and_retries_by_key(payments):
    first = run(payments)
    # late (before the watermark, inside the lookback), and an update that moves (3, 1)
    put_payments(
        payments[0],
        [
            (5, 1, "captured", 100, "1.00", 1.0, "late", True, None, "2026-01-21 08:00:00"),
            (3, 1, "captured", -500, "-0.50", -1e-07, "moved", False, None, "2026-01-22 06:00:00"),
        ],
    )
    second = run(payments)

    assert (second.inserted, second.updated, second.late_rows) == (1, 1, 2)
    assert second.watermark_before == second.watermark_after == first.watermark_after
    # the moved row's old day and new day, and the late row's
    assert second.days_touched == ("2026-01-21", "2026-01-22")
    assert stored(payments[1])[(3, 1)]["note"] == "moved"
    retry = run(payments)  # nothing changed since: the same rows, the same window
    assert retry.skipped and retry.batch_id == second.batch_id
    assert (retry.inserted, retry.updated) == (0, 0)


def test_a_range_load_deletes_one_attempt_the_app_deleted(payments):
    run(payments)
    delete_payment(payments[0], 7, 10)
    result = run(payments, start=at("2026-01-20 00:00:00"), end=at("2026-01-21 00:00:00"))

    assert result.kind == "range" and result.rows_deleted == 1
    assert result.deleted_keys == ((7, 10),)
    assert result.days_touched == ("2026-01-20",)
    assert result.watermark_after == result.watermark_before  # a range never moves it
    assert sorted(stored(payments[1])) == [(3, 1), (7, 9), (12, 1)]


def test_each_table_keeps_its_own_watermark_history_and_ledger(payments):
    source, warehouse = payments
    demo.init(source)  # the chapter's orders, beside the payments
    orders = load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    paid = run(payments)
    wm.rewind(
        warehouse, at("2026-01-21 00:00:00"), reason="replay payments", at=NOW, table="payments"
    )

    assert wm.current(warehouse, table="payments") == at("2026-01-21 00:00:00")
    assert (
        wm.current(warehouse, table=ORDERS.name)
        == orders.watermark_after
        != at("2026-01-22 23:59:59")
    )
    assert [c.kind for c in wm.history(warehouse, spec=PAYMENTS)] == [
        "load",
        "rewind",
    ]
    assert [c.batch_id for c in wm.history(warehouse, spec=ORDERS)] == [orders.batch_id]
    with warehouse.connect() as conn:
        ledger = dict(conn.execute(sa.select(batches.c.batch_id, batches.c.table_name)).all())
    assert ledger == {orders.batch_id: "orders", paid.batch_id: "payments"}
    # the next payments load reads from its own watermark, not orders'
    again = run(payments)
    assert again.window_start == at("2026-01-19 00:00:00")


def test_a_null_in_a_required_column_writes_nothing(payments):
    source, warehouse = payments
    run(payments)
    before = stored(warehouse)
    dialect = source.dialect.name
    with source.begin() as conn:  # the app's column allows NULL; the declaration does not
        if dialect == "postgresql":
            conn.exec_driver_sql("ALTER TABLE payments ALTER COLUMN fee DROP NOT NULL")
        elif dialect != "sqlite":
            conn.exec_driver_sql("ALTER TABLE payments MODIFY fee DECIMAL(10,2) NULL")
        conn.execute(
            sa.text(
                "UPDATE payments SET fee = NULL, note = 'x', modified_at = :m WHERE payment_id = 12"
            ),
            {"m": "2026-01-23T00:00:00+00:00" if dialect == "sqlite" else "2026-01-23 00:00:00"},
        )
    with pytest.raises(InvalidRowError) as caught:
        run(payments)

    message = str(caught.value)
    assert "payments" in message and "payment_id=12" in message and "fee" in message
    assert stored(warehouse) == before
    assert wm.current(warehouse, table="payments") == at("2026-01-22 23:59:59")


def test_the_orders_load_is_the_declared_load(engines):
    """``load_orders`` is ``load_table`` of ORDERS: same batch id, same result."""
    source, warehouse = engines
    demo.init(source)
    result = load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    same = load_table(source, warehouse, spec=ORDERS, tz=UTC, lookback_days=2, now=NOW)
    assert result.batch_id.startswith("orders-") and result.inserted > 0
    assert (same.inserted, same.updated) == (0, 0) and same.batch_id.startswith("orders-")
    assert same.window_start == result.watermark_after - timedelta(days=2)
    with warehouse.connect() as conn:
        assert conn.execute(sa.select(batches.c.table_name)).scalar() == "orders"
