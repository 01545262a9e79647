"""Stage, compare, merge and delete for any declared table, on SQLite and PostgreSQL.

The second table has what ``orders`` never had: a composite key, NULLs that become values
(and back), booleans, floats, dates, Unicode, and names that are SQL reserved words in
mixed case. The counts, the days touched (a row's old day only when its old version was
in a daily file) and the stored rows are what a load reports and what verify compares.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pyarrow as pa
import pytest
import sqlalchemy as sa

from pipeline_assets.core.db.engines import make_engine, writing
from pipeline_assets.core.db.schema import ensure_table, warehouse_table
from pipeline_assets.core.table import working
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.times import EPOCH, UTC, canonical
from pipeline_assets.core.warehouse.staging import Stage

from .tables import PAYMENTS

ARROW = {"integer": pa.int64(), "float": pa.float64(), "boolean": pa.bool_()}
RESERVED = declare(
    {
        "table": "Order",
        "primary_key": ["user", "select"],
        "cursor": "Updated At",
        "columns": {
            "user": "text",
            "select": "integer",
            "Group": {"type": "text", "nullable": True},
            "Updated At": "date",
        },
        "daily_files": [{"name": "grouped", "where": {"Group": ["a", None]}}],
    }
)


def stamp(day: int, hour: int = 12) -> str:
    return canonical(datetime(2026, 1, day, hour, tzinfo=UTC))


def payment(
    pid,
    attempt,
    status,
    day,
    *,
    fee="1.00",
    note=None,
    refundable=True,
    settle_on=None,
    rate=None,
    cents=100,
):
    return {
        "payment_id": pid,
        "attempt": attempt,
        "status": status,
        "amount_cents": cents,
        "fee": fee,
        "rate": rate,
        "note": note,
        "refundable": refundable,
        "settle_on": settle_on,
        "modified_at": stamp(day),
    }


def batch(spec, rows, day_of) -> pa.Table:
    """Rows in their stored forms, plus ``day``, as the load stages them."""
    columns = {
        c.name: pa.array([r[c.name] for r in rows], ARROW.get(c.type.kind, pa.string()))
        for c in spec.columns
    }
    columns[working.DAY] = pa.array([day_of(r) for r in rows], pa.int32())
    return pa.table(columns)


def payment_day(row) -> int:
    return (datetime.fromisoformat(row["modified_at"]).date() - EPOCH).days


@pytest.fixture
def warehouse(db_urls):
    engine = make_engine(db_urls["warehouse"], role="warehouse")
    yield engine
    engine.dispose()


def load(warehouse, spec, rows, day_of, *, late_before=None, delete_range=None):
    """One batch through the stage, as the load runs it; returns (changes, unmatched)."""
    with writing(warehouse).connect() as conn:
        with conn.begin():
            ensure_table(conn, spec)
        stage = Stage(conn, spec)
        with conn.begin():
            stage.create()
            stage.write(stage.prepare(batch(spec, rows, day_of)))
            changes = stage.measure(UTC, late_before=late_before)
            unmatched = None
            if delete_range is not None:
                _, unmatched = stage.unmatched(*delete_range, UTC)
                keys = list(zip(*(unmatched[k].to_pylist() for k in spec.primary_key), strict=True))
                stage.delete(keys)
            stage.merge()
        stage.close()
    return changes, unmatched


def stored(warehouse, spec) -> list[tuple]:
    table = warehouse_table(spec)
    with warehouse.connect() as conn:
        return [
            tuple(row)
            for row in conn.execute(
                sa.select(table).order_by(*(table.c[k] for k in spec.primary_key))
            )
        ]


def test_a_composite_key_with_nulls_loads_compares_and_merges(warehouse):
    first = [
        payment(1, 1, "captured", 3, note="café ☕", rate=0.25),
        payment(1, 2, "failed", 3),
        payment(2, 1, "captured", 4, settle_on="2026-01-09"),
    ]
    changes, _ = load(warehouse, PAYMENTS, first, payment_day)
    assert (changes.inserted, changes.updated, changes.unchanged) == (3, 0, 0)
    assert changes.days == {"2026-01-03", "2026-01-04"}

    second = [
        payment(1, 1, "captured", 3, note="café ☕", rate=0.25),  # unchanged
        payment(1, 2, "failed", 3, note="retried"),  # NULL -> value, same day
        payment(2, 1, "refunded", 6, settle_on=None, refundable=False),  # moved out
        payment(3, 1, "captured", 1),
    ]  # late: before the watermark
    changes, _ = load(
        warehouse, PAYMENTS, second, payment_day, late_before=datetime(2026, 1, 2, tzinfo=UTC)
    )
    assert (changes.inserted, changes.updated, changes.unchanged) == (1, 2, 1)
    # 2026-01-04 is payment 2's old day: it was captured there, so its file changes
    assert changes.days == {"2026-01-01", "2026-01-03", "2026-01-04", "2026-01-06"}
    assert (changes.late_rows, changes.oldest_late) == (1, datetime(2026, 1, 1, 12, tzinfo=UTC))
    rows = stored(warehouse, PAYMENTS)
    assert [r[:3] for r in rows] == [
        (1, 1, "captured"),
        (1, 2, "failed"),
        (2, 1, "refunded"),
        (3, 1, "captured"),
    ]
    assert rows[0][5:8] == (0.25, "café ☕", True)
    assert rows[1][6] == "retried"
    assert (bool(rows[2][7]), rows[2][8]) == (False, None)  # value -> NULL is a change

    # a row whose old version was in no file: its old day is not touched
    changes, _ = load(
        warehouse, PAYMENTS, [payment(1, 2, "failed", 5, note="retried")], payment_day
    )
    assert changes.days == {"2026-01-05"}


def test_a_range_load_finds_and_deletes_rows_by_the_whole_key(warehouse):
    load(
        warehouse,
        PAYMENTS,
        [payment(1, 1, "captured", 3), payment(1, 2, "captured", 3), payment(2, 1, "captured", 4)],
        payment_day,
    )
    window = (datetime(2026, 1, 3, tzinfo=UTC), datetime(2026, 1, 5, tzinfo=UTC))
    _, unmatched = load(
        warehouse, PAYMENTS, [payment(1, 1, "captured", 3)], payment_day, delete_range=window
    )
    assert unmatched.to_pylist() == [
        {"payment_id": 1, "attempt": 2, "status": "captured", "modified_at": stamp(3)},
        {"payment_id": 2, "attempt": 1, "status": "captured", "modified_at": stamp(4)},
    ]
    assert [r[:2] for r in stored(warehouse, PAYMENTS)] == [(1, 1)]


def test_reserved_mixed_case_names_and_a_date_stamp_are_quoted_everywhere(warehouse):
    def day(row):
        return (date.fromisoformat(row["Updated At"]) - EPOCH).days

    def row(user, n, group, on):
        return {"user": user, "select": n, "Group": group, "Updated At": on}

    load(
        warehouse,
        RESERVED,
        [row("ann", 1, "a", "2026-01-03"), row("bob", 1, "b", "2026-01-03")],
        day,
    )
    changes, _ = load(
        warehouse,
        RESERVED,
        [row("ann", 1, "b", "2026-01-05"), row("bob", 1, None, "2026-01-04")],
        day,
        late_before=datetime(2026, 1, 4, 6, tzinfo=UTC),
    )
    assert (changes.updated, changes.late_rows) == (2, 1)  # 01-04's midnight is before 06:00
    assert changes.oldest_late == datetime(2026, 1, 4, tzinfo=UTC)
    # ann left group a (its old day 01-03 changes); bob was in b, in no file: not 01-03
    assert changes.days == {"2026-01-03", "2026-01-04", "2026-01-05"}
    window = (
        datetime(2026, 1, 4, tzinfo=UTC),
        datetime(2026, 1, 4, tzinfo=UTC) + timedelta(days=1),
    )
    _, unmatched = load(warehouse, RESERVED, [], day, delete_range=window)
    assert unmatched.to_pylist() == [
        {"user": "bob", "select": 1, "Group": None, "Updated At": "2026-01-04"}
    ]
    assert stored(warehouse, RESERVED) == [("ann", 1, "b", "2026-01-05")]
