"""Schedules and sensors: when the pipeline runs by itself.

No `from __future__ import annotations` here: Dagster reads the sensors' resource
annotations at runtime.
"""

from collections.abc import Callable
from datetime import datetime

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)

from .core import sensing
from .core.days import yesterday
from .core.errors import PipelineError
from .core.times import utc_now
from .resources import SourceDatabase, WatermarkStore
from .settings import Settings

REASON_TAG = "pipeline_assets/reason"
ORDERS_BATCH_TAG = "pipeline_assets/orders_batch_id"
ATTEMPT_TAG = "pipeline_assets/attempt"
# Dagster's own tags, read to find the runs of a request and whether a retry is coming.
SENSOR_TAG, RUN_KEY_TAG = "dagster/sensor_name", "dagster/run_key"
WILL_RETRY_TAG = "dagster/will_retry"
# Often enough that the demo reacts within a minute; each tick is one indexed query.
NEW_ORDERS_INTERVAL_SECONDS = 15
REFRESH_INTERVAL_SECONDS = 10
# Materializations of orders handled per tick; the rest wait for the next tick.
REFRESH_BATCH = 50

ORDERS = AssetKey("orders")


def _default_status(settings: Settings, kind):
    # PIPELINE_AUTOMATION=off starts everything stopped; the UI toggle works either way.
    return kind.RUNNING if settings.automation else kind.STOPPED


def build_daily_schedule(settings: Settings, daily_job):
    tz = settings.tz

    @schedule(
        name="daily_schedule",
        job=daily_job,
        cron_schedule="30 0 * * *",
        execution_timezone=settings.timezone,
        default_status=_default_status(settings, DefaultScheduleStatus),
        description="At 00:30 in PIPELINE_TIMEZONE: load orders, then build yesterday's "
        "paid_orders and daily_revenue.",
    )
    def daily_schedule(context: ScheduleEvaluationContext):
        day = yesterday(context.scheduled_execution_time, tz).isoformat()
        if day < settings.partitions_start.isoformat():
            return SkipReason(f"{day} is before PARTITIONS_START_DATE "
                              f"{settings.partitions_start.isoformat()}")
        return RunRequest(run_key=f"daily-{day}", partition_key=day,
                          tags={REASON_TAG: "daily_schedule"})

    return daily_schedule


def _run_views(records) -> dict[str, list[sensing.RunView]]:
    """Run records as the plain values the decisions take, by run key.

    A retry Dagster launches for a failed run keeps its tags, run key included, so it is
    found under the key of the request it retries.
    """
    found: dict[str, list[sensing.RunView]] = {}
    for record in records:
        run = record.dagster_run
        found.setdefault(run.tags.get(RUN_KEY_TAG, ""), []).append(sensing.RunView(
            run_id=run.run_id, status=run.status.value,
            created_at=record.create_timestamp.timestamp(), ended_at=record.end_time,
            will_retry=run.tags.get(WILL_RETRY_TAG) == "true",
        ))
    return found


def _runs_with_keys(instance, sensor_name: str, keys) -> dict[str, list[sensing.RunView]]:
    """The runs of the sensor's requests ``keys``, by key: one query for them all."""
    keys = sorted(set(keys))
    if not keys:
        return {}
    return _run_views(instance.get_run_records(filters=RunsFilter(
        tags={SENSOR_TAG: sensor_name, RUN_KEY_TAG: keys})))


def _seed(instance, sensor_name: str) -> str:
    """Where a fresh cursor starts its run keys: the number of runs the sensor launched so
    far, so a reset cursor never reuses the keys of the one before it."""
    return str(instance.get_runs_count(filters=RunsFilter(tags={SENSOR_TAG: sensor_name})))


def build_new_orders_sensor(settings: Settings, orders_job,
                            clock: Callable[[], datetime] = utc_now):
    tz = settings.tz

    @sensor(
        name="new_orders_sensor",
        job=orders_job,
        minimum_interval_seconds=NEW_ORDERS_INTERVAL_SECONDS,
        default_status=_default_status(settings, DefaultSensorStatus),
        description="Asks the source one indexed question about the lookback window "
        "(rows, order_id sum, newest updated_at, fingerprint) and loads orders when the "
        "answer differs from the last one, late rows included; requests the load again "
        "when its run failed or was canceled, and waits while it is queued or running.",
    )
    def new_orders_sensor(context: SensorEvaluationContext, source: SourceDatabase,
                          watermark: WatermarkStore):
        now = clock().timestamp()
        name = "new_orders_sensor"
        fresh = sensing.LoadCursor.from_cursor(context.cursor).last_key is None

        def runs_for(key: str) -> list[sensing.RunView]:
            return _runs_with_keys(context.instance, name, [key]).get(key, [])

        try:
            tick = sensing.check_source(
                source.engine(), watermark.warehouse.engine(), tz=tz,
                lookback_days=watermark.lookback_days, cursor=context.cursor,
                runs_for=runs_for, now=now,
                seed=_seed(context.instance, name) if fresh else "",
            )
        except PipelineError as exc:
            # The cursor stays: the next tick asks again once the database is back.
            return SkipReason(f"could not look at the source: {exc}")
        if not tick.run:
            return SensorResult(skip_reason=tick.reason, cursor=tick.cursor.to_cursor())
        seen = tick.observation
        context.log.info(tick.reason)
        return SensorResult(
            run_requests=[RunRequest(run_key=tick.run_key, tags={
                REASON_TAG: "new_orders_sensor",
                ATTEMPT_TAG: str(tick.cursor.pending.attempt),
                "pipeline_assets/window_start": seen.window_start or "everything",
                "pipeline_assets/window_rows": "n/a" if seen.rows is None else str(seen.rows),
            })],
            cursor=tick.cursor.to_cursor(),
        )

    return new_orders_sensor


def build_paid_orders_refresh_sensor(settings: Settings, daily_files_job,
                                     clock: Callable[[], datetime] = utc_now):
    tz = settings.tz

    @sensor(
        name="paid_orders_refresh_sensor",
        job=daily_files_job,
        minimum_interval_seconds=REFRESH_INTERVAL_SECONDS,
        default_status=_default_status(settings, DefaultSensorStatus),
        description="After each materialization of orders, rebuilds paid_orders and "
        "daily_revenue for exactly the days in its days_touched: one run per block of "
        "consecutive days; keeps owing a day until a run rebuilt it successfully.",
    )
    def paid_orders_refresh_sensor(context: SensorEvaluationContext):
        now = clock()
        state = sensing.RefreshCursor.from_cursor(context.cursor)
        found = context.instance.fetch_materializations(
            AssetRecordsFilter(asset_key=ORDERS, after_storage_id=state.after),
            limit=REFRESH_BATCH, ascending=True,
        )
        last_day = yesterday(now, tz)
        touched, notes = [], []
        for record in found.records:
            meta = record.asset_materialization.metadata
            days, left_out = sensing.partition_days(
                meta["days_touched"].value if "days_touched" in meta else [],
                first_day=settings.partitions_start, last_day=last_day)
            batch = meta["batch_id"].value if "batch_id" in meta else "unknown"
            if left_out:
                notes.append(f"batch {batch}: left out {left_out} (before "
                             f"PARTITIONS_START_DATE or not over yet: the daily schedule "
                             f"builds a day once it is)")
            if not days:
                notes.append(f"batch {batch} (run {record.run_id}) touched no day to rebuild")
            touched.append(sensing.Touched(record.storage_id, tuple(days), batch))
        name = "paid_orders_refresh_sensor"
        runs = _runs_with_keys(context.instance, name, [r.key for r in state.pending])
        outcomes = {r.key: sensing.request_outcome(runs.get(r.key, []),
                                                   requested_at=r.requested_at,
                                                   now=now.timestamp())
                    for r in state.pending}
        tick = sensing.refresh_tick(state, touched, outcomes, now.timestamp(),
                                    seed=state.epoch or _seed(context.instance, name))
        for note in notes + tick.notes:
            context.log.info(note)
        cursor = tick.cursor.to_cursor()
        if tick.requests:
            return SensorResult(run_requests=[_refresh_request(r) for r in tick.requests],
                                cursor=cursor)
        if tick.cursor.pending:
            waiting = ", ".join(f"{r.key} ({outcomes[r.key].detail})"
                                for r in tick.cursor.pending if r.key in outcomes)
            notes.append(f"waiting for {waiting}" if waiting else
                         f"waiting for {len(tick.cursor.pending)} requested rebuild(s)")
        if not notes:
            notes.append("no new materialization of orders")
        return SensorResult(skip_reason="; ".join(notes + tick.notes), cursor=cursor)

    return paid_orders_refresh_sensor


def _refresh_request(request: sensing.RefreshRequest) -> RunRequest:
    tags = {REASON_TAG: "paid_orders_refresh_sensor", ORDERS_BATCH_TAG: request.batch}
    if request.first == request.last:
        return RunRequest(run_key=request.key, partition_key=request.first, tags=tags)
    return RunRequest(run_key=request.key, tags={
        **tags,
        "dagster/asset_partition_range_start": request.first,
        "dagster/asset_partition_range_end": request.last,
    })
