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
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)

from .core import sensing
from .core.days import yesterday
from .core.db import DatabaseError
from .core.times import TimeValueError, utc_now
from .resources import SourceDatabase, WatermarkStore
from .settings import Settings

REASON_TAG = "pipeline_assets/reason"
ORDERS_BATCH_TAG = "pipeline_assets/orders_batch_id"
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


def build_new_orders_sensor(settings: Settings, orders_job):
    tz = settings.tz

    @sensor(
        name="new_orders_sensor",
        job=orders_job,
        minimum_interval_seconds=NEW_ORDERS_INTERVAL_SECONDS,
        default_status=_default_status(settings, DefaultSensorStatus),
        description="Asks the source one indexed question about the lookback window "
        "(rows, order_id sum, newest updated_at, fingerprint) and loads orders when the "
        "answer differs from the last one, late rows included.",
    )
    def new_orders_sensor(context: SensorEvaluationContext, source: SourceDatabase,
                          watermark: WatermarkStore):
        try:
            decision = sensing.check_source(
                source.engine(), watermark.warehouse.engine(), tz=tz,
                lookback_days=watermark.lookback_days, cursor=context.cursor,
            )
        except (DatabaseError, TimeValueError) as exc:
            # The cursor stays: the next tick asks again once the database is back.
            return SkipReason(f"could not look at the source: {exc}")
        if not decision.run:
            return SensorResult(skip_reason=decision.reason, cursor=decision.cursor.to_cursor())
        seen = decision.cursor
        context.log.info(decision.reason)
        return SensorResult(
            run_requests=[RunRequest(run_key=decision.run_key, tags={
                REASON_TAG: "new_orders_sensor",
                "pipeline_assets/window_start": seen.window_start or "everything",
                "pipeline_assets/window_rows": "n/a" if seen.rows is None else str(seen.rows),
            })],
            cursor=seen.to_cursor(),
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
        "consecutive days.",
    )
    def paid_orders_refresh_sensor(context: SensorEvaluationContext):
        after = int(context.cursor) if context.cursor else None
        found = context.instance.fetch_materializations(
            AssetRecordsFilter(asset_key=ORDERS, after_storage_id=after),
            limit=REFRESH_BATCH, ascending=True,
        )
        if not found.records:
            return SkipReason("no new materialization of orders")
        last_day = yesterday(clock(), tz)
        requests, notes = [], []
        for record in found.records:
            meta = record.asset_materialization.metadata
            touched = meta["days_touched"].value if "days_touched" in meta else []
            days, left_out = sensing.partition_days(
                touched, first_day=settings.partitions_start, last_day=last_day)
            batch = meta["batch_id"].value if "batch_id" in meta else "unknown"
            if left_out:
                notes.append(f"batch {batch}: left out {left_out} (before "
                             f"PARTITIONS_START_DATE or not over yet: the daily schedule "
                             f"builds a day once it is)")
            if not days:
                notes.append(f"batch {batch} (run {record.run_id}) touched no day to rebuild")
                continue
            for block in sensing.day_blocks(days):
                requests.append(_refresh_request(record, block, batch))
        cursor = str(found.records[-1].storage_id)
        for note in notes:
            context.log.info(note)
        if not requests:
            return SensorResult(skip_reason="; ".join(notes), cursor=cursor)
        return SensorResult(run_requests=requests, cursor=cursor)

    return paid_orders_refresh_sensor


def _refresh_request(record, block: sensing.DayBlock, batch: str) -> RunRequest:
    tags = {REASON_TAG: "paid_orders_refresh_sensor", ORDERS_BATCH_TAG: batch,
            "pipeline_assets/orders_run_id": record.run_id}
    key = sensing.refresh_run_key(record.storage_id, block)
    if block.first == block.last:
        return RunRequest(run_key=key, partition_key=block.first, tags=tags)
    return RunRequest(run_key=key, tags={
        **tags,
        "dagster/asset_partition_range_start": block.first,
        "dagster/asset_partition_range_end": block.last,
    })
