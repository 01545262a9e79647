"""``paid_orders`` and ``daily_revenue`` through Dagster: one day, a range, reruns, zones.

What a user relies on: the exact bytes of each day file, one manifest per run that
lists the days with their row counts and sha256, a watermark that backfills never
move, and readers that never see a half-written or missing day during a rerun.
"""

from __future__ import annotations

import hashlib
import json
import threading

import pytest
import sqlalchemy as sa
from dagster import AssetKey

from pipeline_assets import demo
from pipeline_assets.core.daily_files import read_committed_day
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.warehouse import watermark as wm

from .worlds import Pipeline

RANGE = {
    "dagster/asset_partition_range_start": "2026-01-20",
    "dagster/asset_partition_range_end": "2026-01-25",
}


@pytest.fixture
def pipe(tmp_path, instance):
    p = Pipeline(tmp_path / "data", instance=instance)
    demo.init(p.source)
    p.app_set(105, "paid", "22.00", "2026-01-25")
    p.app_set(186, "paid", "30.00", "2026-01-24")
    p.run_orders_job()
    yield p
    p.close()


def test_one_day_is_one_exact_file_and_one_manifest(pipe):
    pipe.run_daily_files_job("2026-01-25")
    assert pipe.file("2026-01-25") == (
        b'[{"amount":"22.00","order_id":105,"status":"paid",'
        b'"updated_at":"2026-01-25T00:00:00+00:00"}]\n'
    )
    (manifest,) = pipe.manifests()
    assert manifest["days_written"] == ["2026-01-25"]
    assert manifest["files"] == {
        "2026-01-25": {"rows": 1, "sha256": hashlib.sha256(pipe.file("2026-01-25")).hexdigest()}
    }
    assert manifest["watermark"] == "2026-01-25T00:00:00+00:00"
    assert read_committed_day(pipe.folder, "2026-01-25")[0]["order_id"] == 105


def test_a_range_is_one_run_with_n_files_and_one_manifest(pipe):
    before = wm.current(pipe.warehouse, table=ORDERS.name)
    result = pipe.run_daily_files_job(tags=RANGE)
    days = ["2026-01-20", "2026-01-21", "2026-01-22", "2026-01-23", "2026-01-24", "2026-01-25"]
    assert sorted(p.stem for p in pipe.folder.glob("2026-*.json")) == days
    (manifest,) = pipe.manifests()
    assert manifest["run_id"] == result.run_id and manifest["days_written"] == days
    assert {d: f["rows"] for d, f in manifest["files"].items()} == {
        "2026-01-20": 0,
        "2026-01-21": 1,
        "2026-01-22": 0,
        "2026-01-23": 0,
        "2026-01-24": 1,
        "2026-01-25": 1,
    }
    for day in days:
        assert manifest["files"][day]["sha256"] == hashlib.sha256(pipe.file(day)).hexdigest()
    assert pipe.file("2026-01-22") == b"[]\n"
    assert (
        wm.current(pipe.warehouse, table=ORDERS.name) == before
    )  # a backfill never moves the watermark

    revenue = {
        e.materialization.partition: e.materialization.metadata
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key.to_user_string() == "daily_revenue"
    }
    assert sorted(revenue) == days
    assert revenue["2026-01-24"]["orders"].value == 1
    assert revenue["2026-01-24"]["revenue"].value == 30.0
    assert revenue["2026-01-21"]["revenue_exact"].value == "18.20"
    with pipe.warehouse.connect() as conn:
        stored = dict(conn.execute(sa.text("SELECT day, revenue FROM daily_revenue")).all())
    assert stored["2026-01-25"] == "22.00" and stored["2026-01-22"] == "0"


def test_a_rerun_gives_identical_bytes_and_readers_never_see_a_gap(pipe):
    pipe.run_daily_files_job(tags=RANGE)
    first = {day: pipe.file(day) for day in ("2026-01-21", "2026-01-24", "2026-01-25")}
    seen, problems, stop = [], [], threading.Event()

    def poll():  # a reader that polls the day file and the committed reader meanwhile
        while not stop.is_set():
            try:
                raw = pipe.file("2026-01-24")
                json.loads(raw)
                seen.append(raw)
                read_committed_day(pipe.folder, "2026-01-24")
            except Exception as exc:  # absent, partial or uncommitted: all failures
                problems.append(repr(exc))

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        for _ in range(3):
            pipe.run_daily_files_job(tags=RANGE)
    finally:
        stop.set()
        reader.join()
    assert problems == []
    assert len(seen) > 0 and set(seen) == {first["2026-01-24"]}
    assert {day: pipe.file(day) for day in first} == first
    assert len(pipe.manifests()) == 4  # a new manifest per run


def test_a_row_that_stopped_being_paid_leaves_its_old_day(pipe):
    pipe.run_daily_files_job(tags=RANGE)
    pipe.app_set(106, "refunded", "18.20", "2026-01-25T10:00:00Z")  # was paid on the 21st
    touched = pipe.run_orders_job()
    assert touched == ["2026-01-21", "2026-01-25"]
    for day in touched:  # what the refresh sensor does: rebuild exactly those days
        pipe.run_daily_files_job(day)
    assert read_committed_day(pipe.folder, "2026-01-21") == []
    assert [r["order_id"] for r in read_committed_day(pipe.folder, "2026-01-25")] == [105]


def test_the_time_zone_decides_which_file_a_row_is_in(tmp_path, instance):
    pipe = Pipeline(tmp_path / "data", instance=instance, PIPELINE_TIMEZONE="America/New_York")
    demo.init(pipe.source)
    pipe.app_set(300, "paid", "5.00", "2026-01-25T03:00:00+00:00")
    assert pipe.run_orders_job() == [
        "2026-01-03",
        "2026-01-08",
        "2026-01-12",
        "2026-01-15",
        "2026-01-19",
        "2026-01-21",
        "2026-01-24",
    ]
    pipe.run_daily_files_job(
        tags={
            "dagster/asset_partition_range_start": "2026-01-24",
            "dagster/asset_partition_range_end": "2026-01-25",
        }
    )
    assert [r["order_id"] for r in read_committed_day(pipe.folder, "2026-01-24")] == [300]
    assert (
        read_committed_day(pipe.folder, "2026-01-24")[0]["updated_at"]
        == "2026-01-24T22:00:00-05:00"
    )
    assert read_committed_day(pipe.folder, "2026-01-25") == []
    pipe.close()


def test_daily_revenue_refuses_a_day_edited_by_hand(pipe):
    pipe.run_daily_files_job("2026-01-24")
    path = pipe.folder / "2026-01-24.json"
    path.write_text(path.read_text().replace("30.00", "3000.00"))
    result = pipe.defs.resolve_job_def("daily_files_job").execute_in_process(
        instance=pipe.instance,
        partition_key="2026-01-24",
        raise_on_error=False,
        asset_selection=[AssetKey("daily_revenue")],
    )
    assert not result.success
    error = result.get_step_failure_events()[0].step_failure_data.error
    message = error.message + (error.cause.message if error.cause else "")
    assert "paid_orders day 2026-01-24 is not committed" in message
    assert "--partition 2026-01-24" in message


@pytest.mark.postgres
def test_the_same_range_on_postgresql(tmp_path, instance, postgres, monkeypatch):
    urls = {"source": postgres.url("source"), "warehouse": postgres.url("warehouse")}
    monkeypatch.setenv("SOURCE_DATABASE_URL", urls["source"])  # resolved as EnvVar at run time
    monkeypatch.setenv("WAREHOUSE_DATABASE_URL", urls["warehouse"])
    pipe = Pipeline(tmp_path / "data", urls["source"], urls["warehouse"], instance=instance)
    demo.init(pipe.source)
    pipe.app_set(186, "paid", "30.00", "2026-01-24")
    pipe.run_orders_job()
    pipe.run_daily_files_job(tags=RANGE)
    assert [r["order_id"] for r in read_committed_day(pipe.folder, "2026-01-24")] == [186]
    assert len(pipe.manifests()) == 1
    pipe.close()
