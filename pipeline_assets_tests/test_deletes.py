"""Orders deleted in the app: a range load replaces its range by key, within a guard.

On both backends (``engines``), through the core: the range load deletes, in its one
transaction, the warehouse orders stamped in its range that the source holds nowhere any
more, and no others (an order stamped elsewhere now is the next load's to move); their
days are touched; the ledger and the result say how many and which (a digest). A load
that would delete more than the share allowed refuses, writing nothing, until
``allow_deletes``; an incremental load never deletes and says nothing of deletions. The
source is only read, also by a read-only user; a key-less source deletes an order only
when its every copy is gone.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

import pytest
import sqlalchemy as sa

from pipeline_assets import demo
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.db.schema import warehouse_table
from pipeline_assets.core.db.state import batches
from pipeline_assets.core.errors import DeleteRefused
from pipeline_assets.core.load.deletions import DeletePolicy
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets_tests.orders import load_orders

from .conftest import NOW
from .test_load import snapshot

orders = warehouse_table(ORDERS)  # orders' warehouse table

JANUARY = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC))


def load(engines, *, start=None, end=None, **kw):
    source, warehouse = engines
    return load_orders(
        source, warehouse, tz=UTC, lookback_days=2, now=NOW, start=start, end=end, **kw
    )


def app_deletes(source, *ids: int) -> None:
    with source.begin() as conn:
        conn.execute(
            sa.text("DELETE FROM orders WHERE order_id IN :ids").bindparams(
                sa.bindparam("ids", expanding=True)
            ),
            {"ids": list(ids)},
        )


def stored_ids(warehouse) -> list[int]:
    with warehouse.connect() as conn:
        return [
            int(r[0])
            for r in conn.execute(sa.select(orders.c.order_id).order_by(orders.c.order_id))
        ]


def ledger(warehouse) -> list[tuple]:
    b = batches.c
    with warehouse.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sa.select(b.kind, b.rows_deleted, b.deleted_digest, b.mass_delete_allowed).order_by(
                    b.id
                )
            )
        ]


def test_a_range_load_deletes_what_the_source_lost_and_nothing_else(engines):
    source, warehouse = engines
    demo.init(source)  # 101–106 on 01-03 … 01-21
    mark = load(engines).watermark_after
    app_deletes(source, 101, 104)  # gone from the app
    demo.set_order(
        source, 102, status="paid", amount="15.50", updated_at="2026-02-03", tz=UTC
    )  # moved out of the range: still the app's, not to be deleted
    result = load(engines, start=JANUARY[0], end=JANUARY[1])
    assert result.rows_deleted == 2 and result.deleted_keys == (101, 104)
    assert result.deleted_digest == hashlib.sha256(b"101\n104\n").hexdigest()
    assert not result.mass_delete_allowed and not result.skipped
    assert {"2026-01-03", "2026-01-15"} <= set(result.days_touched)  # the deleted days
    assert stored_ids(warehouse) == [102, 103, 105, 106]  # 102 waits for the next load
    assert ledger(warehouse)[-1] == ("range", 2, result.deleted_digest, False)
    assert (
        wm.current(warehouse, table=ORDERS.name) == mark
    )  # a range load leaves the watermark alone
    again = load(engines, start=JANUARY[0], end=JANUARY[1])  # the repair, run twice
    assert (again.rows_deleted, again.skipped) == (0, True)


def test_an_incremental_load_never_deletes_and_says_nothing_of_it(engines):
    source, warehouse = engines
    demo.init(source)
    load(engines)
    app_deletes(source, 106)  # inside the lookback window of the next load
    result = load(engines)
    assert result.rows_deleted is None and result.deleted_keys == ()
    assert 106 in stored_ids(warehouse)
    assert ledger(warehouse)[-1][:2] == ("incremental", None)


@pytest.mark.parametrize("allowed", [False, True])
def test_a_source_that_lost_most_of_a_range_is_refused_until_allowed(engines, allowed):
    source, warehouse = engines
    demo.init(source)
    load(engines)
    app_deletes(source, 101, 102, 103, 104)  # 4 of the 6 orders of January
    before = snapshot(engines)
    if not allowed:
        with pytest.raises(DeleteRefused) as refused:
            load(engines, start=JANUARY[0], end=JANUARY[1])
        assert (refused.value.would_delete, refused.value.in_range) == (4, 6)
        text = str(refused.value)
        assert "would delete 4 of the 6 order(s)" in text
        assert "MAX_DELETE_SHARE=0.5" in text and "allow_deletes: true" in text
        assert "2026-01-01T00:00:00+00:00" in text and "nothing was written" in text
        assert snapshot(engines) == before  # rows, ledger, watermark: as they were
        return
    result = load(engines, start=JANUARY[0], end=JANUARY[1], deletes=DeletePolicy(allow=True))
    assert (result.rows_deleted, result.mass_delete_allowed) == (4, True)
    assert stored_ids(warehouse) == [105, 106]
    assert ledger(warehouse)[-1][1::2] == (4, True)


def test_the_share_is_a_setting_and_zero_refuses_any_delete(engines):
    source, warehouse = engines
    demo.init(source)
    load(engines)
    app_deletes(source, 106)
    with pytest.raises(DeleteRefused):
        load(engines, start=JANUARY[0], end=JANUARY[1], deletes=DeletePolicy(max_share=0.0))
    assert (
        load(
            engines, start=JANUARY[0], end=JANUARY[1], deletes=DeletePolicy(max_share=1.0)
        ).rows_deleted
        == 1
    )


def test_a_dry_run_reports_the_deletes_and_writes_nothing(engines):
    source, warehouse = engines
    demo.init(source)
    load(engines)
    app_deletes(source, 103)
    before = snapshot(engines)
    plan = load(engines, start=JANUARY[0], end=JANUARY[1], dry_run=True)
    assert (plan.rows_deleted, plan.deleted_keys) == (1, (103,))
    assert snapshot(engines) == before


@pytest.mark.parametrize("copies_left", [0, 1])
def test_a_keyless_source_deletes_an_order_only_when_every_copy_is_gone(engines, copies_left):
    """A view or a replica without constraints may hold an order twice; deleting one copy
    (the newest, say) leaves the order in the source, which the range load must see."""
    source, warehouse = engines
    with source.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE orders (order_id BIGINT, status TEXT, amount TEXT, updated_at TEXT)"
        )
        conn.execute(
            sa.text("INSERT INTO orders VALUES (:i, :s, :a, :u)"),
            [
                dict(i=1, s="paid", a="10.00", u="2026-01-05"),
                dict(i=1, s="paid", a="11.00", u="2026-01-06"),
                dict(i=2, s="paid", a="2.00", u="2026-01-06"),
                dict(i=3, s="paid", a="3.00", u="2026-01-07"),
            ],
        )
    load(engines)
    with source.begin() as conn:
        conn.exec_driver_sql(
            "DELETE FROM orders WHERE order_id = 1 AND amount = '11.00'"
            if copies_left
            else "DELETE FROM orders WHERE order_id = 1"
        )
    result = load(engines, start=JANUARY[0], end=JANUARY[1])
    if copies_left:  # the older copy is the order now: updated back to it, not deleted
        assert (result.rows_deleted, result.updated) == (0, 1)
        assert stored_ids(warehouse) == [1, 2, 3]
    else:
        assert result.rows_deleted == 1 and stored_ids(warehouse) == [2, 3]


def test_a_warehouse_made_before_deletions_gains_the_ledger_columns(tmp_path):
    """A ledger created without rows_deleted (an older release) is migrated on first use."""
    url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    with sa.create_engine(url).begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE pipeline_batches (id INTEGER PRIMARY KEY, batch_id VARCHAR(64) "
            "NOT NULL UNIQUE, kind VARCHAR(16) NOT NULL, window_start VARCHAR(32), "
            "window_end VARCHAR(32), rows_read BIGINT NOT NULL, inserted BIGINT NOT NULL, "
            "updated BIGINT NOT NULL, unchanged BIGINT NOT NULL, watermark_before "
            "VARCHAR(32), watermark_after VARCHAR(32), committed_at VARCHAR(32) NOT NULL, "
            "days_touched TEXT NOT NULL)"
        )
        conn.exec_driver_sql(
            "INSERT INTO pipeline_batches VALUES (1, 'old', 'incremental', "
            "NULL, NULL, 6, 6, 0, 0, NULL, NULL, 'x', '[]')"
        )
    source = make_engine(f"sqlite:///{tmp_path / 'app.db'}", role="app")
    warehouse = make_engine(url, role="warehouse")
    demo.init(source)
    load((source, warehouse), start=JANUARY[0], end=JANUARY[1])
    assert ledger(warehouse) == [("incremental", None, None, None), ("range", 0, None, False)]
    source.dispose()
    warehouse.dispose()
