"""A declared table's asset through Dagster's real execution: ``payments`` (a key of two
columns, every type, NULLs) loaded by ``payments_job`` beside the orders pipeline, with
its metadata and its checks under its own names."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from dagster import AssetKey

from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets.definitions import build_definitions
from pipeline_assets.settings import from_env

from .tables import PAYMENTS, delete_payment, make_payments

NOW = datetime(2026, 1, 26, 12, tzinfo=timezone.utc)
ROWS = [
    (1, 1, "captured", 500, "1.10", 0.5, "é", True, "2026-01-20", "2026-01-20 10:00:00"),
    (1, 2, "failed", 500, "1.10", None, None, False, None, "2026-01-21 10:00:00"),
    (2, 1, "captured", 700, "2.25", None, "x", True, None, "2026-01-21 11:00:00"),
    (3, 1, "captured", 900, "0.50", None, None, True, None, "2026-01-27 09:00:00"),  # future
]


@pytest.fixture
def payments(tmp_path):
    (tmp_path / "data").mkdir()
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    source = make_engine(settings.source_url, role="app")
    make_payments(source, rows=ROWS)
    yield build_definitions(settings, clock=lambda: NOW, spec=PAYMENTS), source, settings
    source.dispose()


def _metadata(result) -> dict:
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.asset_key == AssetKey("payments")
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_a_declared_table_loads_under_its_own_names_and_keys(payments, instance):
    defs, source, settings = payments
    first = defs.resolve_job_def("payments_job").execute_in_process(instance=instance)
    meta = _metadata(first)
    assert meta["batch_id"].startswith("payments-") and meta["inserted"] == 4
    assert meta["days_touched"] == ["2026-01-20", "2026-01-21", "2026-01-27"]
    # a key of two columns is a list in metadata; the watermark did not follow the future
    assert meta["future_rows"] == 1 and meta["future_keys"] == [[3, 1]]
    assert "future_order_ids" not in meta
    assert {(e.check_name, e.passed) for e in first.get_asset_check_evaluations()} == {
        ("payments_match_source", True),
        ("lateness_within_lookback", True),
    }
    warehouse = make_engine(settings.warehouse_url, role="warehouse")
    assert wm.current(warehouse, table="payments") == datetime(2026, 1, 21, 11, tzinfo=timezone.utc)
    assert wm.current(warehouse, table=ORDERS.name) is None  # orders' own watermark: untouched
    warehouse.dispose()

    # a range load removes the attempt the app deleted, named by its whole key
    delete_payment(source, 1, 2)
    config = {"start": "2026-01-21", "end": "2026-01-22", "allow_deletes": True}
    ranged = defs.resolve_job_def("payments_job").execute_in_process(
        instance=instance, run_config={"ops": {"payments": {"config": config}}}
    )
    meta = _metadata(ranged)
    assert (meta["kind"], meta["rows_deleted"], meta["deleted_keys"]) == ("range", 1, [[1, 2]])
