"""Schedules and sensors: when the pipeline runs by itself."""

from __future__ import annotations

from dagster import (
    DefaultScheduleStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)

from .core.paid import previous_day
from .settings import Settings

REASON_TAG = "pipeline_assets/reason"


def build_daily_schedule(settings: Settings, daily_job):
    tz = settings.tz

    @schedule(
        name="daily_schedule",
        job=daily_job,
        cron_schedule="30 0 * * *",
        execution_timezone=settings.timezone,
        default_status=DefaultScheduleStatus.RUNNING if settings.automation
        else DefaultScheduleStatus.STOPPED,
        description="At 00:30 in PIPELINE_TIMEZONE: load orders, then build yesterday's "
        "paid_orders and daily_revenue.",
    )
    def daily_schedule(context: ScheduleEvaluationContext):
        day = previous_day(context.scheduled_execution_time, tz)
        if day < settings.partitions_start.isoformat():
            return SkipReason(f"{day} is before PARTITIONS_START_DATE "
                              f"{settings.partitions_start.isoformat()}")
        return RunRequest(run_key=f"daily-{day}", partition_key=day,
                          tags={REASON_TAG: "daily_schedule"})

    return daily_schedule
