"""Schedules and sensors of one declared table: when the pipeline runs by itself.

For a table ``N``: ``new_N_sensor`` (loads ``N`` when the source changed), per daily file
set ``F`` the ``F_refresh_sensor`` (rebuilds the days each load touched), and
``N_daily_schedule``; ``orders`` keeps ``new_orders_sensor``,
``paid_orders_refresh_sensor`` and ``daily_schedule`` (``spec.names``).

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

from pipeline_assets.core.daily_files import open_store, shape_of, stale_days
from pipeline_assets.core.table import ORDERS as ORDERS_SPEC
from pipeline_assets.core.table.spec import DailyFiles, TableSpec

from .core import sensing
from .core.days import yesterday
from .core.errors import PipelineError
from .core.times import utc_now
from .settings import Settings, files_location

REASON_TAG = "pipeline_assets/reason"
ORDERS_BATCH_TAG = "pipeline_assets/orders_batch_id"  # pipeline_assets/<N>_batch_id
ATTEMPT_TAG = "pipeline_assets/attempt"
# Dagster's own tags, read to find the runs of a request and whether a retry is coming.
SENSOR_TAG, RUN_KEY_TAG = "dagster/sensor_name", "dagster/run_key"
WILL_RETRY_TAG = "dagster/will_retry"
# Often enough that the demo reacts within a minute; each tick is one indexed query.
NEW_ORDERS_INTERVAL_SECONDS = 15
REFRESH_INTERVAL_SECONDS = 10
# Materializations of the table handled per tick; the rest wait for the next tick.
REFRESH_BATCH = 50


def batch_tag(spec: TableSpec) -> str:
    """The tag naming the batch a refresh run rebuilds: ``pipeline_assets/<N>_batch_id``."""
    return f"pipeline_assets/{spec.name}_batch_id"


def _default_status(settings: Settings, kind):
    # PIPELINE_AUTOMATION=off starts everything stopped; the UI toggle works either way.
    return kind.RUNNING if settings.automation else kind.STOPPED


def build_daily_schedule(settings: Settings, daily_job, spec: TableSpec = ORDERS_SPEC):
    tz = settings.tz
    name = spec.names.schedule
    built = ", ".join(
        n for f in spec.daily_files for n in (f.name, f.totals.name if f.totals else None) if n
    )

    @schedule(
        name=name,
        job=daily_job,
        cron_schedule="30 0 * * *",
        execution_timezone=settings.timezone,
        default_status=_default_status(settings, DefaultScheduleStatus),
        description=f"At 00:30 in PIPELINE_TIMEZONE: load {spec.name}, then build "
        f"yesterday's {' and '.join(built.rsplit(', ', 1))}.",
    )
    def daily_schedule(context: ScheduleEvaluationContext):
        day = yesterday(context.scheduled_execution_time, tz).isoformat()
        if day < settings.partitions_start.isoformat():
            return SkipReason(
                f"{day} is before PARTITIONS_START_DATE {settings.partitions_start.isoformat()}"
            )
        return RunRequest(run_key=f"daily-{day}", partition_key=day, tags={REASON_TAG: name})

    return daily_schedule


def _run_views(records) -> dict[str, list[sensing.RunView]]:
    """Run records as the plain values the decisions take, by run key.

    A retry Dagster launches for a failed run keeps its tags, run key included, so it is
    found under the key of the request it retries.
    """
    found: dict[str, list[sensing.RunView]] = {}
    for record in records:
        run = record.dagster_run
        found.setdefault(run.tags.get(RUN_KEY_TAG, ""), []).append(
            sensing.RunView(
                run_id=run.run_id,
                status=run.status.value,
                created_at=record.create_timestamp.timestamp(),
                ended_at=record.end_time,
                will_retry=run.tags.get(WILL_RETRY_TAG) == "true",
            )
        )
    return found


def _runs_with_keys(instance, sensor_name: str, keys) -> dict[str, list[sensing.RunView]]:
    """The runs of the sensor's requests ``keys``, by key: one query for them all.

    Filtered by the run key alone (its index finds the few runs of those keys) and then by
    the sensor's name here: with the sensor's tag in the query too, the database began with
    every run the sensor ever launched, a tick costing more each month (a year of runs:
    2.3x a fresh instance's tick, benchmarks/bench_history.py)."""
    keys = sorted(set(keys))
    if not keys:
        return {}
    return _run_views(
        record
        for record in instance.get_run_records(filters=RunsFilter(tags={RUN_KEY_TAG: keys}))
        if record.dagster_run.tags.get(SENSOR_TAG) == sensor_name
    )


def _seed(instance, sensor_name: str) -> str:
    """Where a fresh cursor starts its run keys: the number of runs the sensor launched so
    far, so a reset cursor never reuses the keys of the one before it."""
    return str(instance.get_runs_count(filters=RunsFilter(tags={SENSOR_TAG: sensor_name})))


def build_new_rows_sensor(
    settings: Settings,
    load_job,
    clock: Callable[[], datetime] = utc_now,
    *,
    spec: TableSpec = ORDERS_SPEC,
    source_key: str = "source",
    watermark_key: str = "watermark",
):
    """``new_N_sensor``: loads ``N`` when the source's answer about the lookback window
    changed."""
    tz = settings.tz
    name = spec.names.new_sensor
    key_sum = f"{spec.primary_key[0]} sum" if len(spec.primary_key) == 1 else "key sums"

    @sensor(
        name=name,
        job=load_job,
        minimum_interval_seconds=NEW_ORDERS_INTERVAL_SECONDS,
        default_status=_default_status(settings, DefaultSensorStatus),
        required_resource_keys={source_key, watermark_key},
        description=f"Asks the source one indexed question about the lookback window "
        f"(rows, {key_sum}, newest {spec.cursor}, fingerprint) and loads {spec.name} when "
        "the answer differs from the last one, late rows included; requests the load "
        "again when its run failed or was canceled, and waits while it is queued or "
        "running.",
    )
    def new_rows_sensor(context: SensorEvaluationContext):
        source = getattr(context.resources, source_key)
        watermark = getattr(context.resources, watermark_key)
        now = clock().timestamp()
        fresh = sensing.LoadCursor.from_cursor(context.cursor).last_key is None

        def runs_for(key: str) -> list[sensing.RunView]:
            return _runs_with_keys(context.instance, name, [key]).get(key, [])

        try:
            tick = sensing.check_source(
                source.engine(),
                watermark.warehouse.engine(),
                tz=tz,
                lookback_days=watermark.lookback_days,
                cursor=context.cursor,
                runs_for=runs_for,
                now=now,
                seed=_seed(context.instance, name) if fresh else "",
                spec=spec,
            )
        except PipelineError as exc:
            # The cursor stays: the next tick asks again once the database is back.
            return SkipReason(f"could not look at the source: {exc}")
        if not tick.run:
            return SensorResult(skip_reason=tick.reason, cursor=tick.cursor.to_cursor())
        seen = tick.observation
        context.log.info(tick.reason)
        return SensorResult(
            run_requests=[
                RunRequest(
                    run_key=tick.run_key,
                    tags={
                        REASON_TAG: name,
                        ATTEMPT_TAG: str(tick.cursor.pending.attempt),
                        "pipeline_assets/window_start": seen.window_start or "everything",
                        "pipeline_assets/window_rows": "n/a"
                        if seen.rows is None
                        else str(seen.rows),
                    },
                )
            ],
            cursor=tick.cursor.to_cursor(),
        )

    return new_rows_sensor


def build_new_orders_sensor(
    settings: Settings, orders_job, clock: Callable[[], datetime] = utc_now
):
    """``new_orders_sensor``: :func:`build_new_rows_sensor` of ``orders``."""
    return build_new_rows_sensor(settings, orders_job, clock)


def build_refresh_sensor(
    settings: Settings,
    files_job,
    clock: Callable[[], datetime] = utc_now,
    *,
    spec: TableSpec = ORDERS_SPEC,
    files: DailyFiles | None = None,
):
    """``F_refresh_sensor``: after each materialization of ``N``, rebuilds ``F`` (and its
    totals) for exactly the days it touched."""
    tz = settings.tz
    files = files or spec.daily_files[0]
    name = spec.names.files[files.name].refresh_sensor
    table_key = AssetKey(spec.names.asset)
    built = " and ".join(n for n in (files.name, files.totals.name if files.totals else None) if n)
    tag = batch_tag(spec)
    shape = shape_of(spec, files)
    location = files_location(settings, spec, files)

    @sensor(
        name=name,
        job=files_job,
        minimum_interval_seconds=REFRESH_INTERVAL_SECONDS,
        default_status=_default_status(settings, DefaultSensorStatus),
        description=f"After each materialization of {spec.name}, rebuilds {built} for "
        "exactly the days in its days_touched: one run per block of consecutive days; "
        "keeps owing a day until a run rebuilt it successfully. When the declaration "
        f"of {files.name} changes, rebuilds once every committed day written before.",
    )
    def refresh_sensor(context: SensorEvaluationContext):
        now = clock()
        state = sensing.RefreshCursor.from_cursor(context.cursor)
        found = context.instance.fetch_materializations(
            AssetRecordsFilter(asset_key=table_key, after_storage_id=state.after),
            limit=REFRESH_BATCH,
            ascending=True,
        )
        last_day = yesterday(now, tz)
        touched, notes = [], []
        for record in found.records:
            meta = record.asset_materialization.metadata
            days, left_out = sensing.partition_days(
                meta["days_touched"].value if "days_touched" in meta else [],
                first_day=settings.partitions_start,
                last_day=last_day,
            )
            batch = meta["batch_id"].value if "batch_id" in meta else "unknown"
            if left_out:
                notes.append(
                    f"batch {batch}: left out {left_out} (before "
                    f"PARTITIONS_START_DATE or not over yet: the daily schedule "
                    f"builds a day once it is)"
                )
            if not days:
                notes.append(f"batch {batch} (run {record.run_id}) touched no day to rebuild")
            touched.append(sensing.Touched(record.storage_id, tuple(days), batch))
        stale: list[str] = []
        if state.declaration != shape.current:  # once per declared shape
            try:
                found_stale = [s.day for s in stale_days(open_store(location), shape)]
            except PipelineError as exc:  # the cursor stays: the next tick looks again
                return SkipReason(f"could not look at the day files of {files.name}: {exc}")
            stale, left_out = sensing.partition_days(
                found_stale, first_day=settings.partitions_start, last_day=last_day
            )
            if stale:
                notes.append(
                    f"{len(stale)} committed day(s) of {files.name} were written with another "
                    f"declaration: rebuilding them in the declared one ({shape.current})"
                )
        runs = _runs_with_keys(context.instance, name, [r.key for r in state.pending])
        outcomes = {
            r.key: sensing.request_outcome(
                runs.get(r.key, []), requested_at=r.requested_at, now=now.timestamp()
            )
            for r in state.pending
        }
        tick = sensing.refresh_tick(
            state,
            touched,
            outcomes,
            now.timestamp(),
            seed=state.epoch or _seed(context.instance, name),
            files=files.name,
            declaration=shape.current,
            stale=stale,
        )
        for note in notes + tick.notes:
            context.log.info(note)
        cursor = tick.cursor.to_cursor()
        if tick.requests:
            return SensorResult(
                run_requests=[_refresh_request(r, name, tag) for r in tick.requests], cursor=cursor
            )
        if tick.cursor.pending:
            waiting = ", ".join(
                f"{r.key} ({outcomes[r.key].detail})"
                for r in tick.cursor.pending
                if r.key in outcomes
            )
            notes.append(
                f"waiting for {waiting}"
                if waiting
                else f"waiting for {len(tick.cursor.pending)} requested rebuild(s)"
            )
        if not notes:
            notes.append(f"no new materialization of {spec.name}")
        return SensorResult(skip_reason="; ".join(notes + tick.notes), cursor=cursor)

    return refresh_sensor


def build_paid_orders_refresh_sensor(
    settings: Settings, daily_files_job, clock: Callable[[], datetime] = utc_now
):
    """``paid_orders_refresh_sensor``: :func:`build_refresh_sensor` of ``orders``."""
    return build_refresh_sensor(settings, daily_files_job, clock)


def _refresh_request(request: sensing.RefreshRequest, reason: str, tag: str) -> RunRequest:
    tags = {REASON_TAG: reason, tag: request.batch}
    if request.first == request.last:
        return RunRequest(run_key=request.key, partition_key=request.first, tags=tags)
    return RunRequest(
        run_key=request.key,
        tags={
            **tags,
            "dagster/asset_partition_range_start": request.first,
            "dagster/asset_partition_range_end": request.last,
        },
    )
