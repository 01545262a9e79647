"""DailyFilesIOManager through Dagster's real execution, on real files: a folder under
tmp_path, and the same tests on a bucket of the S3-compatible server the tests start."""

import hashlib
import json
from decimal import Decimal

from dagster import (
    AssetExecutionContext,
    BackfillPolicy,
    DailyPartitionsDefinition,
    asset,
    materialize,
    mem_io_manager,
)

from pipeline_assets.core.daily_files import DayFilesBatch, day_status
from pipeline_assets.core.table import ORDERS
from pipeline_assets.io_manager import DailyFilesIOManager

from .stores import SECRET, all_files, temp_files

DAILY = DailyPartitionsDefinition(start_date="2026-01-01")
WATERMARK = "2026-01-26T12:00:00.000000+00:00"
ROWS = {
    "2026-01-24": [
        {
            "order_id": 12,
            "status": "paid",
            "amount": "5.25",
            "updated_at": "2026-01-24T23:59:59.000000+00:00",
        },
        {
            "order_id": 3,
            "status": "paid",
            "amount": "40.00",
            "updated_at": "2026-01-24T08:00:00.000000+00:00",
        },
    ],
    # 2026-01-25 has no paid orders: the IO manager writes it as [].
    "2026-01-26": [
        {
            "order_id": 7,
            "status": "paid",
            "amount": "22.00",
            "updated_at": "2026-01-26T03:00:00.000000+00:00",
        },
    ],
}
FILE_24 = (
    b'[{"amount":"40.00","order_id":3,"status":"paid",'
    b'"updated_at":"2026-01-24T08:00:00.000000+00:00"},'
    b'{"amount":"5.25","order_id":12,"status":"paid",'
    b'"updated_at":"2026-01-24T23:59:59.000000+00:00"}]\n'
)
FILE_25 = b"[]\n"
FILE_26 = (
    b'[{"amount":"22.00","order_id":7,"status":"paid",'
    b'"updated_at":"2026-01-26T03:00:00.000000+00:00"}]\n'
)
RANGE = {
    "dagster/asset_partition_range_start": "2026-01-24",
    "dagster/asset_partition_range_end": "2026-01-26",
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@asset(
    partitions_def=DAILY, backfill_policy=BackfillPolicy.single_run(), io_manager_key="daily_files"
)
def paid_orders(context: AssetExecutionContext):
    """Test stand-in: the rows of each day in the run, and the watermark."""
    return DayFilesBatch(
        days={day: ROWS[day] for day in context.partition_keys if day in ROWS},
        watermark=WATERMARK,
        spec=ORDERS,
    )


@asset(partitions_def=DAILY, backfill_policy=BackfillPolicy.single_run())
def daily_revenue(paid_orders):
    """Test stand-in: orders and exact revenue per day, from committed days only."""
    return {
        day: (len(rows), str(sum((Decimal(r["amount"]) for r in rows), Decimal("0.00"))))
        for day, rows in paid_orders.items()
    }


@asset(
    partitions_def=DAILY,
    backfill_policy=BackfillPolicy.single_run(),
    io_manager_key="daily_files",
    name="paid_orders",
)
def paid_orders_plain(context: AssetExecutionContext):
    """Test stand-in returning a plain dict with a day outside the run."""
    return {"2026-01-25": [], "2026-02-01": []}


@asset(
    partitions_def=DAILY,
    backfill_policy=BackfillPolicy.single_run(),
    io_manager_key="daily_files",
    name="paid_orders",
)
def paid_orders_dict(context: AssetExecutionContext):
    """Test stand-in returning a plain dict: no watermark."""
    return {day: ROWS[day] for day in context.partition_keys if day in ROWS}


def run(folder, instance, assets, **kwargs):
    """Materialize ``assets`` with the day files in ``folder`` (PAID_ORDERS_URL)."""
    return materialize(
        assets,
        instance=instance,
        resources={
            "daily_files": DailyFilesIOManager(url=str(folder)),
            "io_manager": mem_io_manager,
        },
        **kwargs,
    )


def test_one_day(paid_folder, instance):
    result = run(paid_folder, instance, [paid_orders, daily_revenue], partition_key="2026-01-26")
    folder = paid_folder
    assert (folder / "2026-01-26.json").read_bytes() == FILE_26
    manifest = json.loads((folder / f"_manifest_{result.run_id}.json").read_bytes())
    assert manifest["days_written"] == ["2026-01-26"]
    assert manifest["files"] == {"2026-01-26": {"rows": 1, "sha256": sha(FILE_26)}}
    assert manifest["watermark"] == WATERMARK
    assert result.output_for_node("daily_revenue") == {"2026-01-26": (1, "22.00")}


def test_partition_range_is_one_run_with_one_manifest(paid_folder, instance):
    result = run(paid_folder, instance, [paid_orders, daily_revenue], tags=RANGE)
    folder = paid_folder
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
        "2026-01-24": (2, "45.25"),
        "2026-01-25": (0, "0.00"),
        "2026-01-26": (1, "22.00"),
    }

    materializations = result.asset_materializations_for_node("paid_orders")
    assert sorted(m.partition for m in materializations) == [
        "2026-01-24",
        "2026-01-25",
        "2026-01-26",
    ]
    metadata = materializations[0].metadata
    assert metadata["days_in_run"].value == 3
    assert (metadata["first_day"].value, metadata["last_day"].value) == ("2026-01-24", "2026-01-26")
    assert metadata["rows_in_run"].value == 3
    assert metadata["manifest"].value == str(manifests[0])
    assert temp_files(folder) == []


def test_a_plain_dict_is_written_without_a_watermark(paid_folder, instance):
    result = run(paid_folder, instance, [paid_orders_dict], tags=RANGE)
    folder = paid_folder
    manifest = json.loads((folder / f"_manifest_{result.run_id}.json").read_bytes())
    assert manifest["watermark"] is None
    assert manifest["days_written"] == ["2026-01-24", "2026-01-25", "2026-01-26"]
    assert (folder / "2026-01-24.json").read_bytes() == FILE_24


def test_rerun_rewrites_identical_files_with_a_newer_manifest(paid_folder, instance):
    first = run(paid_folder, instance, [paid_orders], tags=RANGE)
    second = run(paid_folder, instance, [paid_orders], partition_key="2026-01-24")
    folder = paid_folder
    assert (folder / "2026-01-24.json").read_bytes() == FILE_24
    assert day_status(folder, "2026-01-24").manifest == f"_manifest_{second.run_id}.json"
    assert day_status(folder, "2026-01-25").manifest == f"_manifest_{first.run_id}.json"


def test_load_input_fails_naming_an_uncommitted_day(paid_folder, instance):
    run(paid_folder, instance, [paid_orders], tags=RANGE)
    (paid_folder / "2026-01-25.json").write_bytes(b'[{"order_id": 1}]\n')
    result = run(
        paid_folder,
        instance,
        [paid_orders, daily_revenue],
        selection=[daily_revenue],
        tags=RANGE,
        raise_on_error=False,
    )
    assert not result.success
    [failure] = result.get_step_failure_events()
    message = failure.step_failure_data.error.cause.message
    assert "UncommittedDayError: paid_orders day 2026-01-25 is not committed" in message
    assert (
        "Rebuild it: dagster asset materialize -m pipeline_assets.definitions "
        "--select paid_orders,daily_revenue --partition 2026-01-25"
    ) in message
    assert "2026-01-24" not in message


def test_load_input_fails_for_a_day_never_built(paid_folder, instance):
    run(paid_folder, instance, [paid_orders], partition_key="2026-01-24")
    result = run(
        paid_folder,
        instance,
        [paid_orders, daily_revenue],
        selection=[daily_revenue],
        partition_key="2026-01-25",
        raise_on_error=False,
    )
    assert not result.success
    message = result.get_step_failure_events()[0].step_failure_data.error.cause.message
    assert "paid_orders day 2026-01-25 is not committed: it was never built" in message


def test_a_day_outside_the_run_is_an_error_and_writes_nothing(paid_folder, instance):
    result = run(
        paid_folder, instance, [paid_orders_plain], partition_key="2026-01-25", raise_on_error=False
    )
    assert not result.success
    message = result.get_step_failure_events()[0].step_failure_data.error.cause.message
    assert "returned days ['2026-02-01'] outside this run's partitions" in message
    assert all_files(paid_folder) == {}


def test_base_dir_puts_the_files_under_the_asset_key(tmp_path, instance):
    """Without url, the folder is <base_dir>/<asset key path>, as before PAID_ORDERS_URL."""
    materialize(
        [paid_orders],
        instance=instance,
        partition_key="2026-01-26",
        resources={"daily_files": DailyFilesIOManager(base_dir=str(tmp_path))},
    )
    assert (tmp_path / "paid_orders" / "2026-01-26.json").read_bytes() == FILE_26


def test_the_store_secret_never_reaches_events_logs_or_errors(bucket, instance, capfd):
    """Credentials come from the environment; no event, log line, metadata value or error
    of a run on the bucket shows the secret, even when the run fails on the store."""
    ok = run(bucket, instance, [paid_orders, daily_revenue], tags=RANGE)
    missing = run(
        "s3://pa-no-such-bucket/paid_orders",
        instance,
        [paid_orders],
        partition_key="2026-01-24",
        raise_on_error=False,
    )
    assert ok.success and not missing.success
    message = missing.get_step_failure_events()[0].step_failure_data.error.cause.message
    assert "could not write" in message and "pa-no-such-bucket" in message
    text = "".join(repr(record) for record in instance.all_logs(ok.run_id))
    text += "".join(repr(record) for record in instance.all_logs(missing.run_id))
    captured = capfd.readouterr()
    for where in (text, message, captured.out, captured.err):
        assert SECRET not in where
