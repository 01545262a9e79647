"""Sensors and the schedule through Dagster's own evaluation, on real SQLite databases.

The sensors are evaluated with ``build_sensor_context`` + ``evaluate_tick`` against the
definitions the code location builds; the materializations the refresh sensor reacts to
come from real in-process runs of ``orders`` on the same instance.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from dagster import (
    AssetMaterialization,
    DagsterInstance,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    MetadataValue,
    build_schedule_context,
    build_sensor_context,
)

from pipeline_assets import demo
from pipeline_assets.automation import ATTEMPT_TAG, REASON_TAG, build_paid_orders_refresh_sensor
from pipeline_assets.core.daily_files import read_committed_day
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, to_instant, zone
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets.definitions import build_definitions
from pipeline_assets.sensor_runs import RUN_KEY_TAG, SENSOR_TAG, WILL_RETRY_TAG
from pipeline_assets.settings import from_env

from .tables import PAYMENTS

RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


@pytest.fixture
def setup(tmp_path: Path):
    """Settings, definitions and the demo source, all under tmp_path (plain URLs, no EnvVar)."""
    (tmp_path / "data").mkdir()
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    source = make_engine(settings.source_url, role="app")
    warehouse = make_engine(settings.warehouse_url, role="warehouse")
    demo.init(source)
    yield settings, build_definitions(settings), source, warehouse
    source.dispose()
    warehouse.dispose()


def tick(defs, name, instance, cursor=None, sensor_def=None):
    sensor_def = sensor_def or defs.resolve_sensor_def(name)
    # the sensor's resources are the code location's own (as the daemon passes them)
    with build_sensor_context(
        instance=instance,
        cursor=cursor,
        definitions=defs,
        resources=defs.resources,
        sensor_name=sensor_def.name,
    ) as context:
        return sensor_def.evaluate_tick(context)


def load(defs, instance):
    result = defs.resolve_job_def("orders_job").execute_in_process(instance=instance)
    assert result.success
    return result


def app(source, order_id, status, amount, updated_at):
    demo.set_order(source, order_id, status=status, amount=amount, updated_at=updated_at, tz=UTC)


# --- new_orders_sensor --------------------------------------------------------------------


def run_of(defs, instance, result, sensor: str, status: str | None = None, **tags):
    """The run Dagster would create for the sensor's request ``result``: executed for real
    (``status`` None), or recorded with ``status`` as the daemon would leave it."""
    [request] = result.run_requests
    return run_for(defs, instance, request, sensor, status, **tags)


def run_for(defs, instance, request, sensor: str, status: str | None = None, **tags):
    """Dagster's run for one ``request`` of ``sensor``: executed, or recorded."""
    all_tags = {**request.tags, SENSOR_TAG: sensor, RUN_KEY_TAG: request.run_key, **tags}
    job = defs.resolve_job_def("orders_job" if sensor == "new_orders_sensor" else "daily_files_job")
    if status is None:
        ran = job.execute_in_process(
            instance=instance, tags=all_tags, partition_key=request.partition_key
        )
        assert ran.success
        return ran.dagster_run
    return instance.create_run_for_job(job, status=DagsterRunStatus(status), tags=all_tags)


def test_new_orders_sensor_requests_on_change_and_skips_otherwise(setup, instance):
    settings, defs, source, warehouse = setup
    name = "new_orders_sensor"

    first = tick(defs, name, instance)
    [request] = first.run_requests
    assert request.tags[REASON_TAG] == "new_orders_sensor"
    assert request.run_key.startswith("new-orders-")
    assert json.loads(first.cursor)["seen"]["window_start"] is None  # no watermark yet

    again = tick(defs, name, instance, first.cursor)  # its run is not created yet: wait
    assert again.run_requests == [] and "waiting for the load" in again.skip_message
    assert again.cursor == first.cursor

    run_of(defs, instance, first, name)  # the requested run, executed: it succeeds
    followed = tick(defs, name, instance, again.cursor)
    assert followed.run_requests == []
    assert "succeeded" in followed.skip_message
    assert "watermark moved on" in followed.skip_message  # the load itself is no news
    assert json.loads(followed.cursor)["seen"]["window_start"].startswith("2026-01-19T00:00")
    assert json.loads(followed.cursor)["pending"] is None
    steady = tick(defs, name, instance, followed.cursor)
    assert steady.run_requests == [] and "2 row(s)" in steady.skip_message

    app(source, 186, "paid", "30.00", "2026-01-20")  # late: older than the newest (01-21)
    late = tick(defs, name, instance, steady.cursor)
    [late_request] = late.run_requests
    assert late_request.run_key != request.run_key

    # the same tick repeated from the same cursor gives the same key (Dagster launches it once)
    assert tick(defs, name, instance, steady.cursor).run_requests[0].run_key == late_request.run_key

    app(source, 187, "paid", "12.00", "2026-01-22")  # another change, while the load waits
    assert tick(defs, name, instance, late.cursor).run_requests == []  # never two loads
    run_of(defs, instance, late, name)
    # the window it saw changed since it asked (187): it loads again, under a new key —
    # a load with nothing left to do, as this one read 187 already
    newer = tick(defs, name, instance, late.cursor)
    assert newer.run_requests[0].run_key not in (request.run_key, late_request.run_key)
    assert wm.current(warehouse, table=ORDERS.name) == to_instant("2026-01-22", UTC)


@pytest.mark.parametrize("status", ["FAILURE", "CANCELED"])
def test_new_orders_sensor_loads_again_when_its_run_died(setup, instance, status):
    """The trap: the cursor says "seen", the run that was to load it died, the source is
    quiet. The sensor must request the load again, under a new key, and only once."""
    settings, defs, source, warehouse = setup
    name = "new_orders_sensor"
    first = tick(defs, name, instance)
    run_of(defs, instance, first, name, status)  # killed: nothing loaded

    healed = tick(defs, name, instance, first.cursor)
    [retry] = healed.run_requests
    assert retry.run_key != first.run_requests[0].run_key
    assert retry.tags[ATTEMPT_TAG] == "2"
    # a tick repeated from the same cursor asks for the same key (launched once)
    assert tick(defs, name, instance, first.cursor).run_requests[0].run_key == retry.run_key

    queued = run_of(defs, instance, healed, name, "STARTED")
    waiting = tick(defs, name, instance, healed.cursor)
    assert waiting.run_requests == [] and queued.run_id in waiting.skip_message

    instance.delete_run(queued.run_id)
    run_of(defs, instance, healed, name)  # this time the load lands
    done = tick(defs, name, instance, healed.cursor)
    assert done.run_requests == [] and "succeeded" in done.skip_message
    assert wm.current(warehouse, table=ORDERS.name) == to_instant("2026-01-21", UTC)


def test_new_orders_sensor_waits_for_dagsters_retry(setup, instance):
    """A failed run Dagster will retry: wait for the retry, which carries the same key."""
    settings, defs, source, warehouse = setup
    name = "new_orders_sensor"
    first = tick(defs, name, instance)
    run_of(defs, instance, first, name, "FAILURE", **{WILL_RETRY_TAG: "true"})
    assert tick(defs, name, instance, first.cursor).run_requests == []
    run_of(defs, instance, first, name)  # the retry: parent's tags, run key included
    done = tick(defs, name, instance, first.cursor)
    assert done.run_requests == [] and "succeeded" in done.skip_message


def test_new_orders_sensor_waits_while_dagster_has_not_yet_decided_a_retry(setup):
    """With run retries on, Dagster marks a run failed, then tags whether it will retry it
    (``dagster/will_retry``): a tick between the two writes waits rather than load again
    beside Dagster's retry (two loads at once, seen under kills); a run Dagster decided
    not to retry is asked for again."""
    settings, defs, source, warehouse = setup
    name = "new_orders_sensor"
    with DagsterInstance.ephemeral(settings={"run_retries": {"enabled": True}}) as instance:
        first = tick(defs, name, instance)
        failed = run_of(defs, instance, first, name, "FAILURE")  # failed, no tag yet
        assert tick(defs, name, instance, first.cursor).run_requests == []
        instance.add_run_tags(failed.run_id, {WILL_RETRY_TAG: "false"})  # decided: no retry
        [again] = tick(defs, name, instance, first.cursor).run_requests
        assert again.run_key != first.run_requests[0].run_key


def test_new_orders_sensor_skips_with_the_reason_when_there_is_no_source(tmp_path, instance):
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    result = tick(build_definitions(settings), "new_orders_sensor", instance, "keep")
    assert result.run_requests == []
    assert "pipeline-assets demo init" in result.skip_message
    assert result.cursor == "keep"  # untouched
    assert not (tmp_path / "data").exists()  # a sensor creates nothing


# --- paid_orders_refresh_sensor -----------------------------------------------------------


def requested_days(result) -> list[tuple[str, str]]:
    out = []
    for req in result.run_requests:
        if req.partition_key:
            out.append((req.partition_key, req.partition_key))
        else:
            out.append((req.tags[RANGE_START], req.tags[RANGE_END]))
    return out


def refresh_run(defs, instance, request, status: str | None = None, **tags):
    """Dagster's run for one refresh request: executed for real, or recorded with ``status``."""
    return run_for(defs, instance, request, "paid_orders_refresh_sensor", status, **tags)


def test_refresh_requests_exactly_the_touched_days(setup, instance):
    settings, defs, source, warehouse = setup
    name = "paid_orders_refresh_sensor"
    assert tick(defs, name, instance).skip_message == "no new materialization of orders"

    load(defs, instance)  # first load: 101–106, one day each
    app(source, 105, "paid", "22.00", "2026-01-25")
    app(source, 186, "paid", "30.00", "2026-01-24")
    load(defs, instance)  # two loads between two ticks: both are handled

    result = tick(defs, name, instance)
    assert requested_days(result) == [
        ("2026-01-03", "2026-01-03"),
        ("2026-01-08", "2026-01-08"),
        ("2026-01-12", "2026-01-12"),
        ("2026-01-15", "2026-01-15"),
        ("2026-01-19", "2026-01-19"),
        ("2026-01-21", "2026-01-21"),
        ("2026-01-24", "2026-01-25"),  # consecutive: one run over the range
    ]
    keys = [r.run_key for r in result.run_requests]
    assert len(set(keys)) == len(keys)
    assert all(r.tags[REASON_TAG] == "paid_orders_refresh_sensor" for r in result.run_requests)
    assert all(
        r.tags["pipeline_assets/orders_batch_id"].startswith("orders-") for r in result.run_requests
    )

    # a repeated tick from the same cursor asks for the same keys: Dagster skips them
    assert [r.run_key for r in tick(defs, name, instance).run_requests] == keys
    # from the new cursor nothing is asked again while the runs are not created yet
    waiting = tick(defs, name, instance, result.cursor)
    assert waiting.run_requests == [] and "waiting for" in waiting.skip_message

    # the runs happen (the range request is a valid single run: it builds both days)
    for request in result.run_requests:
        refresh_run(defs, instance, request)
    assert [r["order_id"] for r in read_committed_day(settings.paid_orders_dir, "2026-01-24")] == [
        186
    ]
    assert [r["order_id"] for r in read_committed_day(settings.paid_orders_dir, "2026-01-25")] == [
        105
    ]
    done = tick(defs, name, instance, result.cursor)
    assert done.run_requests == [] and done.skip_message == "no new materialization of orders"
    assert json.loads(done.cursor)["owed"] == {} and json.loads(done.cursor)["pending"] == []

    # a load that changed nothing touched no day: nothing to rebuild
    load(defs, instance)
    idle = tick(defs, name, instance, done.cursor)
    assert idle.run_requests == [] and "touched no day" in idle.skip_message
    assert json.loads(idle.cursor)["after"] > json.loads(done.cursor)["after"]


@pytest.mark.parametrize("status", ["FAILURE", "CANCELED"])
def test_refresh_requests_again_the_days_whose_rebuild_died(setup, instance, status):
    settings, defs, source, warehouse = setup
    name = "paid_orders_refresh_sensor"
    load(defs, instance)
    app(source, 105, "paid", "22.00", "2026-01-25")
    app(source, 186, "paid", "30.00", "2026-01-24")
    load(defs, instance)
    first = tick(
        defs, name, instance, str(json.loads(tick(defs, name, instance).cursor)["after"] - 1)
    )
    [request] = first.run_requests  # only the second load: the 24th and the 25th
    assert requested_days(first) == [("2026-01-24", "2026-01-25")]
    refresh_run(defs, instance, request, status)

    again = tick(defs, name, instance, first.cursor)
    [retry] = again.run_requests
    assert requested_days(again) == [("2026-01-24", "2026-01-25")]
    assert retry.run_key != request.run_key

    # a third load touches the 25th while the rebuild runs: no second run over it now...
    queued = refresh_run(defs, instance, retry, "STARTED")
    app(source, 105, "paid", "23.00", "2026-01-25T10:00:00")
    load(defs, instance)
    busy = tick(defs, name, instance, again.cursor)
    assert busy.run_requests == [] and queued.run_id in busy.skip_message
    # ...but once it succeeded, the 25th is still owed (touched after it was requested)
    instance.delete_run(queued.run_id)
    refresh_run(defs, instance, retry)
    after = tick(defs, name, instance, busy.cursor)
    assert requested_days(after) == [("2026-01-25", "2026-01-25")]
    assert list(json.loads(after.cursor)["owed"]) == ["2026-01-25"]


def test_a_requested_rebuild_whose_run_was_deleted_is_requested_again(setup, instance):
    """A run deleted from the instance (by hand, or by a retention job) leaves its request
    with no run at all: after the grace a run takes to appear the request is dropped, the
    tick says so, and the days are requested again, so the file set's rebuilds go on."""
    from pipeline_assets.core.sensing import GRACE_SECONDS

    settings, defs, source, warehouse = setup
    load(defs, instance)
    clock = [datetime.now(timezone.utc)]
    sensor_def = build_paid_orders_refresh_sensor(
        settings, defs.resolve_job_def("daily_files_job"), clock=lambda: clock[0]
    )
    first = tick(defs, None, instance, sensor_def=sensor_def)
    asked = requested_days(first)
    queued = [refresh_run(defs, instance, r, "NOT_STARTED") for r in first.run_requests]
    for run in queued:
        instance.delete_run(run.run_id)
    clock[0] += timedelta(seconds=GRACE_SECONDS / 2)
    waiting = tick(defs, None, instance, first.cursor, sensor_def=sensor_def)
    assert waiting.run_requests == [] and "its run is not created yet" in waiting.skip_message
    clock[0] += timedelta(seconds=GRACE_SECONDS)
    again = tick(defs, None, instance, waiting.cursor, sensor_def=sensor_def)
    assert requested_days(again) == asked
    assert not {r.run_key for r in again.run_requests} & {r.run_key for r in first.run_requests}
    for request in again.run_requests:
        refresh_run(defs, instance, request)
    clock[0] += timedelta(seconds=1)
    done = tick(defs, None, instance, again.cursor, sensor_def=sensor_def)
    assert done.run_requests == [] and json.loads(done.cursor)["owed"] == {}


def test_refresh_leaves_out_today_which_has_no_partition_yet(setup, instance):
    settings, defs, source, warehouse = setup
    load(defs, instance)
    app(source, 105, "paid", "22.00", "2026-01-25")
    app(source, 186, "paid", "30.00", "2026-01-24")
    load(defs, instance)
    first = tick(defs, "paid_orders_refresh_sensor", instance)

    noon_on_the_25th = datetime(2026, 1, 25, 12, 0, tzinfo=timezone.utc)
    sensor_def = build_paid_orders_refresh_sensor(
        settings, defs.resolve_job_def("daily_files_job"), clock=lambda: noon_on_the_25th
    )
    # only the second load's materialization: the one that touched the 24th and the 25th
    second = tick(
        defs, None, instance, str(json.loads(first.cursor)["after"] - 1), sensor_def=sensor_def
    )
    assert requested_days(second) == [("2026-01-24", "2026-01-24")]


# --- daily_schedule and default status ---------------------------------------------------


@pytest.mark.parametrize(
    "tz, when, partition",
    [
        ("UTC", datetime(2026, 3, 10, 0, 30, tzinfo=timezone.utc), "2026-03-09"),
        # 00:30 in New York is 04:30 UTC: still the 9th that is yesterday
        (
            "America/New_York",
            datetime(2026, 3, 10, 0, 30, tzinfo=zone("America/New_York")),
            "2026-03-09",
        ),
    ],
)
def test_daily_schedule_builds_yesterday(tmp_path, tz, when, partition):
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path), "PIPELINE_TIMEZONE": tz}, cwd=tmp_path)
    defs = build_definitions(settings)
    schedule = defs.resolve_schedule_def("daily_schedule")
    data = schedule.evaluate_tick(
        build_schedule_context(
            scheduled_execution_time=when, repository_def=defs.get_repository_def()
        )
    )
    [request] = data.run_requests
    assert request.partition_key == partition
    assert request.run_key == f"daily-{partition}"
    assert request.tags[REASON_TAG] == "daily_schedule"


def test_daily_schedule_skips_days_before_the_first_partition(tmp_path):
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path)}, cwd=tmp_path)
    defs = build_definitions(settings)
    schedule = defs.resolve_schedule_def("daily_schedule")
    data = schedule.evaluate_tick(
        build_schedule_context(
            scheduled_execution_time=datetime(2026, 1, 1, 0, 30, tzinfo=timezone.utc),
            repository_def=defs.get_repository_def(),
        )
    )
    assert data.run_requests == [] and "before PARTITIONS_START_DATE" in data.skip_message


@pytest.mark.parametrize("switch, running", [(None, True), ("on", True), ("off", False)])
def test_automation_starts_running_unless_switched_off(tmp_path, switch, running):
    env = {"PIPELINE_DATA_DIR": str(tmp_path)}
    if switch:
        env["PIPELINE_AUTOMATION"] = switch
    defs = build_definitions(from_env(env, cwd=tmp_path))
    sensors = [
        defs.resolve_sensor_def(n) for n in ("new_orders_sensor", "paid_orders_refresh_sensor")
    ]
    schedule = defs.resolve_schedule_def("daily_schedule")
    assert {s.default_status for s in sensors} == {
        DefaultSensorStatus.RUNNING if running else DefaultSensorStatus.STOPPED
    }
    assert schedule.default_status == (
        DefaultScheduleStatus.RUNNING if running else DefaultScheduleStatus.STOPPED
    )
    assert all(s.minimum_interval_seconds <= 15 for s in sensors)


# --- any declared table ----------------------------------------------------------------------


def test_a_declared_tables_refresh_sensor_rebuilds_the_days_its_loads_touched(tmp_path, instance):
    """``F_refresh_sensor`` follows ``N``'s materializations only: two tables of one
    location never rebuild each other's days."""
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path)}, cwd=tmp_path)
    now = datetime(2026, 1, 26, 12, tzinfo=timezone.utc)
    payments = build_definitions(settings, spec=PAYMENTS, clock=lambda: now)
    instance.report_runless_asset_event(
        AssetMaterialization(
            "payments",
            metadata={
                "batch_id": "payments-0123",
                "days_touched": MetadataValue.json(["2026-01-20", "2026-01-21", "2026-01-24"]),
            },
        )
    )
    result = tick(payments, "captured_payments_refresh_sensor", instance)
    assert [
        (r.partition_key, r.tags.get(RANGE_START), r.tags.get(RANGE_END))
        for r in result.run_requests
    ] == [(None, "2026-01-20", "2026-01-21"), ("2026-01-24", None, None)]
    for request in result.run_requests:
        assert request.tags[REASON_TAG] == "captured_payments_refresh_sensor"
        assert request.tags["pipeline_assets/payments_batch_id"] == "payments-0123"
        assert request.job_name in (None, "captured_payments_job")
    orders = build_definitions(settings, clock=lambda: now)
    assert tick(orders, "paid_orders_refresh_sensor", instance).run_requests == []


def test_a_declared_tables_schedule_builds_yesterday_of_its_files(tmp_path):
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path)}, cwd=tmp_path)
    defs = build_definitions(settings, spec=PAYMENTS)
    schedule = defs.resolve_schedule_def("payments_daily_schedule")
    data = schedule.evaluate_tick(
        build_schedule_context(
            scheduled_execution_time=datetime(2026, 1, 26, 0, 30, tzinfo=timezone.utc),
            repository_def=defs.get_repository_def(),
        )
    )
    [request] = data.run_requests
    assert (request.partition_key, request.tags[REASON_TAG]) == (
        "2026-01-25",
        "payments_daily_schedule",
    )
