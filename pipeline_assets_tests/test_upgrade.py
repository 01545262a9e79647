"""A warehouse written by the release before declared tables upgrades in place.

``previous_release/`` holds what that release's own code wrote (``make.py`` says how it
was made): the app's orders, and a SQLite and a PostgreSQL warehouse after three loads,
a range load and a rewind. The first run of this release on them must carry the
watermark, its history and the batch ledger over, reload nothing and lose nothing: the
rows stay as they were, the next load reads from the old watermark, and a batch the old
release committed is recognized by its id.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.db.schema import warehouse_table
from pipeline_assets.core.db.state import batches, watermark_history
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets.core.warehouse.declaration import declaration_of_batch, fingerprint
from pipeline_assets_tests.orders import load_orders

orders = warehouse_table(ORDERS)  # orders' warehouse table

HERE = Path(__file__).parent / "previous_release"
NOW = datetime(2026, 1, 21, 12, tzinfo=UTC)  # a day after the old release's last run


def restore(backend: str, urls: dict[str, str]) -> tuple[sa.Engine, sa.Engine]:
    source = make_engine(urls["source"], role="app")
    warehouse = make_engine(urls["warehouse"], role="warehouse")
    rows = json.loads((HERE / "source.json").read_text())
    with source.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE orders (order_id BIGINT PRIMARY KEY, status TEXT, "
            "amount TEXT, updated_at TEXT)"
        )
        conn.execute(
            sa.text("INSERT INTO orders VALUES (:i, :s, :a, :u)"),
            [dict(i=i, s=s, a=a, u=u) for i, s, a, u in rows],
        )
    dump = (HERE / f"{backend}.sql").read_text()
    with warehouse.connect() as conn:
        if backend == "sqlite":
            conn.connection.dbapi_connection.executescript(dump)
        else:
            conn.exec_driver_sql(dump)
            conn.exec_driver_sql("SET search_path TO public")
            conn.commit()
    return source, warehouse


def everything(warehouse: sa.Engine) -> dict[str, list[tuple]]:
    with warehouse.connect() as conn:
        return {
            t.name: [
                tuple(r)[: len(OLD_COLUMNS[t.name])]
                for r in conn.execute(
                    sa.select(*[t.c[c] for c in OLD_COLUMNS[t.name]]).order_by(
                        *t.primary_key.columns
                    )
                )
            ]
            for t in (orders, batches, watermark_history)
        }


ADDED = ("table_name", "declaration")  # the columns added to the old release's tables
OLD_COLUMNS = {  # every column the old release wrote
    "orders": ("order_id", "status", "amount", "updated_at"),
    "pipeline_batches": tuple(c.name for c in batches.columns if c.name not in ADDED),
    "pipeline_watermark_history": tuple(
        c.name for c in watermark_history.columns if c.name != "table_name"
    ),
}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def previous(request, tmp_path):
    from .support import database_urls

    urls = database_urls(request.param, tmp_path, request)
    source, warehouse = restore(request.param, urls)
    yield source, warehouse
    source.dispose()
    warehouse.dispose()


def test_the_first_run_carries_everything_over_and_reloads_nothing(previous):
    source, warehouse = previous
    before = everything(warehouse)
    old_watermark = wm.current(warehouse, table=ORDERS.name)
    old_history = wm.history(warehouse, spec=ORDERS)
    last_batch = before["pipeline_batches"][-1][1]
    assert old_watermark is not None and len(old_history) == 3  # load, rewind, load

    result = load_orders(
        source, warehouse, tz=UTC, lookback_days=2, now=NOW, announced_batch=last_batch
    )

    # nothing reloaded: the window starts at the old watermark minus the lookback
    assert result.watermark_before == old_watermark == result.watermark_after
    assert result.window_start == wm.window_start(old_watermark, 2)
    assert (result.inserted, result.updated, result.days_touched) == (0, 0, ())
    assert result.rows_read < len(before["orders"])
    after = everything(warehouse)
    assert after["orders"] == before["orders"]
    assert after["pipeline_watermark_history"] == before["pipeline_watermark_history"]
    # the same window and rows as a batch of the old release (the one before the rewind):
    # the same id, skipped
    same_window = [
        row[1]
        for row in before["pipeline_batches"]
        if row[3] == result.window_start.isoformat(timespec="microseconds")
    ]
    assert result.skipped and [result.batch_id] == same_window
    assert after["pipeline_batches"] == before["pipeline_batches"]
    assert wm.history(warehouse, spec=ORDERS) == old_history  # the old rows are orders' history
    assert wm.current(warehouse, table=ORDERS.name) == old_watermark


def test_a_batch_the_old_release_committed_is_recognized_by_its_id(previous):
    source, warehouse = previous
    old_range = next(row for row in everything(warehouse)["pipeline_batches"] if row[2] == "range")
    start, end = (datetime.fromisoformat(old_range[3]), datetime.fromisoformat(old_range[4]))

    again = load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW, start=start, end=end)

    assert again.batch_id == old_range[1] and again.skipped
    with warehouse.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(batches)).scalar() == len(
            everything(warehouse)["pipeline_batches"]
        )


def test_a_late_row_after_the_upgrade_is_loaded_as_before(previous):
    source, warehouse = previous
    old_watermark = wm.current(warehouse, table=ORDERS.name)
    with source.begin() as conn:  # late: an hour before the watermark
        conn.execute(
            sa.text("UPDATE orders SET status = 'refunded', updated_at = :u WHERE order_id = 101"),
            {"u": (old_watermark - timedelta(hours=1)).isoformat()},
        )

    result = load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)

    assert (result.updated, result.late_rows) == (1, 1)
    assert result.watermark_after == old_watermark
    with warehouse.connect() as conn:
        assert (
            conn.execute(sa.select(orders.c.status).where(orders.c.order_id == 101)).scalar()
            == "refunded"
        )
        tables = dict(conn.execute(sa.select(batches.c.batch_id, batches.c.table_name)).all())
    assert tables[result.batch_id] == "orders"
    assert sum(name is None for name in tables.values()) == 4  # the old release's batches
    # the new batch recorded ORDERS' declaration; the old release's count as written under it
    with warehouse.connect() as conn:
        assert {declaration_of_batch(conn, b, spec=ORDERS).fingerprint for b in tables} == {
            fingerprint(ORDERS)
        }
