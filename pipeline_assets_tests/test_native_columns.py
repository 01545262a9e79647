"""Sources with native column types: NUMERIC amounts, DATE and TIMESTAMP(TZ) updated_at.

On PostgreSQL the SQL filter compares the column in its own type (so the index is
used) and the exact comparison is redone on instants; on SQLite every declared type is
text underneath, including REAL amounts, which must still come out exact.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.source.scan import inspect_source
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, to_instant, zone
from pipeline_assets_tests.orders import load_orders

from .conftest import NOW

NY = zone("America/New_York")


def make_source(url: str, updated_type: str, amount_type: str, rows: list[tuple]):
    engine = make_engine(url, role="app")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE orders (order_id INTEGER PRIMARY KEY, status TEXT, "
            f"amount {amount_type}, updated_at {updated_type})"
        )
        conn.exec_driver_sql("CREATE INDEX orders_updated_at_idx ON orders (updated_at)")
        conn.execute(
            sa.text("INSERT INTO orders VALUES (:i, :s, :a, :u)"),
            [dict(i=i, s=s, a=a, u=u) for i, s, a, u in rows],
        )
    return engine


ROWS = [
    (1, "paid", "40.00", "2026-01-20 10:00:00+00"),
    (2, "paid", "0.10", "2026-01-23 03:00:00+00"),  # in New York still the 22nd
    (3, "pending", "12.50", "2026-01-24 23:30:00+00"),
]


@pytest.mark.postgres
@pytest.mark.parametrize(
    "updated_type, kind",
    [
        ("TIMESTAMPTZ", "timestamptz"),
        ("TIMESTAMP", "timestamp"),
        ("DATE", "date"),
        ("TEXT", "text"),
    ],
)
def test_postgres_native_columns(postgres, updated_type, kind):
    source = make_source(postgres.url("source"), updated_type, "NUMERIC(12, 2)", ROWS)
    warehouse = make_engine(postgres.url("warehouse"), role="warehouse")
    assert inspect_source(source, ORDERS).cursor_kind == kind
    try:
        first = load_orders(source, warehouse, tz=NY, lookback_days=1, now=NOW)
        assert first.rows_read == 3
        with warehouse.connect() as conn:
            amounts = conn.exec_driver_sql("SELECT amount FROM orders ORDER BY order_id").all()
        assert [a for (a,) in amounts] == ["40.00", "0.10", "12.50"]  # exact, same text
        # The window starts a day before the watermark (order 3). Order 2 is 20.5 hours
        # older than order 3 and falls outside, except as a DATE: then both are bare days
        # (the 23rd and the 24th, midnight in New York) and the 23rd is inside.
        second = load_orders(source, warehouse, tz=NY, lookback_days=1, now=NOW)
        inside = {"timestamptz": 1, "timestamp": 1, "date": 2, "text": 1}[kind]
        assert second.rows_read == inside and second.unchanged == inside
        assert second.watermark_after == first.watermark_after
    finally:
        source.dispose()
        warehouse.dispose()


def test_sqlite_real_amounts_and_declared_timestamp_columns(tmp_path):
    source = make_source(
        f"sqlite:///{tmp_path / 'app.db'}",
        "TIMESTAMP",
        "REAL",
        [(1, "paid", 40.5, "2026-01-20T10:00:00Z"), (2, "paid", 0.1, "2026-01-23")],
    )
    warehouse = make_engine(f"sqlite:///{tmp_path / 'wh.db'}", role="warehouse")
    assert inspect_source(source, ORDERS).cursor_kind == "text"
    result = load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    assert result.rows_read == 2
    with warehouse.connect() as conn:
        rows = conn.exec_driver_sql("SELECT amount, updated_at FROM orders ORDER BY 1").all()
    # SQLite's REAL 0.1 is printed by SQLite itself as '0.1': no binary float reaches Python
    assert sorted(a for a, _ in rows) == ["0.1", "40.5"]
    assert result.watermark_after == to_instant("2026-01-23", UTC)
