"""DailyFilesIOManager through Dagster's real execution, on real files under tmp_path."""

import hashlib
import json
from decimal import Decimal

import pytest
from dagster import (
    AssetExecutionContext,
    BackfillPolicy,
    DagsterInstance,
    DailyPartitionsDefinition,
    asset,
    materialize,
    mem_io_manager,
)

from pipeline_assets.core.daily_files import DayFilesBatch, day_status
from pipeline_assets.io_manager import DailyFilesIOManager

DAILY = DailyPartitionsDefinition(start_date="2026-01-01")
WATERMARK = "2026-01-26T12:00:00.000000+00:00"
ROWS = {
    "2026-01-24": [
        {"order_id": 12, "status": "paid", "amount": "5.25",
         "updated_at": "2026-01-24T23:59:59.000000+00:00"},
        {"order_id": 3, "status": "paid", "amount": "40.00",
         "updated_at": "2026-01-24T08:00:00.000000+00:00"},
    ],
    # 2026-01-25 has no paid orders: the IO manager writes it as [].
    "2026-01-26": [
        {"order_id": 7, "status": "paid", "amount": "22.00",
         "updated_at": "2026-01-26T03:00:00.000000+00:00"},
    ],
}
FILE_24 = (b'[{"amount":"40.00","order_id":3,"status":"paid",'
           b'"updated_at":"2026-01-24T08:00:00.000000+00:00"},'
           b'{"amount":"5.25","order_id":12,"status":"paid",'
           b'"updated_at":"2026-01-24T23:59:59.000000+00:00"}]\n')
FILE_25 = b"[]\n"
FILE_26 = (b'[{"amount":"22.00","order_id":7,"status":"paid",'
           b'"updated_at":"2026-01-26T03:00:00.000000+00:00"}]\n')
RANGE = {"dagster/asset_partition_range_start": "2026-01-24",
         "dagster/asset_partition_range_end": "2026-01-26"}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@asset(partitions_def=DAILY, backfill_policy=BackfillPolicy.single_run(),
       io_manager_key="daily_files")
def paid_orders(context: AssetExecutionContext):
    """Test stand-in: the rows of each day in the run, and the watermark."""
    return DayFilesBatch(days={day: ROWS[day] for day in context.partition_keys if day in ROWS},
                         watermark=WATERMARK)


@asset(partitions_def=DAILY, backfill_policy=BackfillPolicy.single_run())
def daily_revenue(paid_orders):
    """Test stand-in: orders and exact revenue per day, from committed days only."""
    return {day: (len(rows), str(sum((Decimal(r["amount"]) for r in rows), Decimal("0.00"))))
            for day, rows in paid_orders.items()}


@asset(partitions_def=DAILY, backfill_policy=BackfillPolicy.single_run(),
       io_manager_key="daily_files", name="paid_orders")
def paid_orders_plain(context: AssetExecutionContext):
    """Test stand-in returning a plain dict with a day outside the run."""
    return {"2026-01-25": [], "2026-02-01": []}


@asset(partitions_def=DAILY, backfill_policy=BackfillPolicy.single_run(),
       io_manager_key="daily_files", name="paid_orders")
def paid_orders_dict(context: AssetExecutionContext):
    """Test stand-in returning a plain dict: no watermark."""
    return {day: ROWS[day] for day in context.partition_keys if day in ROWS}


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def run(tmp_path, instance, assets, **kwargs):
    return materialize(
        assets, instance=instance,
        resources={"daily_files": DailyFilesIOManager(base_dir=str(tmp_path)),
                   "io_manager": mem_io_manager},
        **kwargs)


def test_one_day(tmp_path, instance):
    result = run(tmp_path, instance, [paid_orders, daily_revenue], partition_key="2026-01-26")
    folder = tmp_path / "paid_orders"
    assert (folder / "2026-01-26.json").read_bytes() == FILE_26
    manifest = json.loads((folder / f"_manifest_{result.run_id}.json").read_bytes())
    assert manifest["days_written"] == ["2026-01-26"]
    assert manifest["files"] == {"2026-01-26": {"rows": 1, "sha256": sha(FILE_26)}}
    assert manifest["watermark"] == WATERMARK
    assert result.output_for_node("daily_revenue") == {"2026-01-26": (1, "22.00")}


def test_partition_range_is_one_run_with_one_manifest(tmp_path, instance):
    result = run(tmp_path, instance, [paid_orders, daily_revenue], tags=RANGE)
    folder = tmp_path / "paid_orders"
    assert (folder / "2026-01-24.json").read_bytes() == FILE_24
    assert (folder / "2026-01-25.json").read_bytes() == FILE_25
    assert (folder / "2026-01-26.json").read_bytes() == FILE_26
    manifests = sorted(folder.glob("_manifest_*.json"))
    assert [p.name for p in manifests] == [f"_manifest_{result.run_id}.json"]
    manifest = json.loads(manifests[0].read_bytes())
    assert manifest["run_id"] == result.run_id
    assert manifest["days_written"] == ["2026-01-24", "2026-01-25", "2026-01-26"]
    assert manifest["watermark"] == WATERMARK
    assert manifest["files"] == {
        "2026-01-24": {"rows": 2, "sha256": sha(FILE_24)},
        "2026-01-25": {"rows": 0, "sha256": sha(FILE_25)},
        "2026-01-26": {"rows": 1, "sha256": sha(FILE_26)},
    }
    assert result.output_for_node("daily_revenue") == {
        "2026-01-24": (2, "45.25"), "2026-01-25": (0, "0.00"), "2026-01-26": (1, "22.00")}

    materializations = result.asset_materializations_for_node("paid_orders")
    assert sorted(m.partition for m in materializations) == [
        "2026-01-24", "2026-01-25", "2026-01-26"]
    metadata = materializations[0].metadata
    assert metadata["days_in_run"].value == 3
    assert (metadata["first_day"].value, metadata["last_day"].value) == ("2026-01-24",
                                                                         "2026-01-26")
    assert metadata["rows_in_run"].value == 3
    assert metadata["manifest"].value == str(manifests[0])
    assert [p.name for p in folder.rglob("*.partial")] == []


def test_a_plain_dict_is_written_without_a_watermark(tmp_path, instance):
    result = run(tmp_path, instance, [paid_orders_dict], tags=RANGE)
    folder = tmp_path / "paid_orders"
    manifest = json.loads((folder / f"_manifest_{result.run_id}.json").read_bytes())
    assert manifest["watermark"] is None
    assert manifest["days_written"] == ["2026-01-24", "2026-01-25", "2026-01-26"]
    assert (folder / "2026-01-24.json").read_bytes() == FILE_24


def test_rerun_rewrites_identical_files_with_a_newer_manifest(tmp_path, instance):
    first = run(tmp_path, instance, [paid_orders], tags=RANGE)
    second = run(tmp_path, instance, [paid_orders], partition_key="2026-01-24")
    folder = tmp_path / "paid_orders"
    assert (folder / "2026-01-24.json").read_bytes() == FILE_24
    assert day_status(folder, "2026-01-24").manifest == f"_manifest_{second.run_id}.json"
    assert day_status(folder, "2026-01-25").manifest == f"_manifest_{first.run_id}.json"


def test_load_input_fails_naming_an_uncommitted_day(tmp_path, instance):
    run(tmp_path, instance, [paid_orders], tags=RANGE)
    (tmp_path / "paid_orders" / "2026-01-25.json").write_bytes(b'[{"order_id": 1}]\n')
    result = run(tmp_path, instance, [paid_orders, daily_revenue], selection=[daily_revenue],
                 tags=RANGE, raise_on_error=False)
    assert not result.success
    [failure] = result.get_step_failure_events()
    message = failure.step_failure_data.error.cause.message
    assert "UncommittedDayError: paid_orders day 2026-01-25 is not committed" in message
    assert ("Rebuild it: dagster asset materialize -m pipeline_assets.definitions "
            "--select paid_orders,daily_revenue --partition 2026-01-25") in message
    assert "2026-01-24" not in message


def test_load_input_fails_for_a_day_never_built(tmp_path, instance):
    run(tmp_path, instance, [paid_orders], partition_key="2026-01-24")
    result = run(tmp_path, instance, [paid_orders, daily_revenue], selection=[daily_revenue],
                 partition_key="2026-01-25", raise_on_error=False)
    assert not result.success
    message = result.get_step_failure_events()[0].step_failure_data.error.cause.message
    assert "paid_orders day 2026-01-25 is not committed: it was never built" in message


def test_a_day_outside_the_run_is_an_error_and_writes_nothing(tmp_path, instance):
    result = run(tmp_path, instance, [paid_orders_plain], partition_key="2026-01-25",
                 raise_on_error=False)
    assert not result.success
    message = result.get_step_failure_events()[0].step_failure_data.error.cause.message
    assert "returned days ['2026-02-01'] outside this run's partitions" in message
    assert not (tmp_path / "paid_orders").exists()
