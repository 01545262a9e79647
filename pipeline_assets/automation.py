"""Schedules and sensors of one declared table: when the pipeline runs by itself.

For a table ``N``: ``new_N_sensor`` (loads ``N`` when the source changed), per daily file
set ``F`` the ``F_refresh_sensor`` (rebuilds the days each load touched), and
``N_daily_schedule``; ``orders`` keeps ``new_orders_sensor``,
``paid_orders_refresh_sensor`` and ``daily_schedule`` (``spec.names``).

No `from __future__ import annotations` here: Dagster reads the sensors' resource
annotations at runtime.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from zoneinfo import ZoneInfo

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

from pipeline_assets.core.daily_files import Shape, open_store, shape_of, stale_days
from pipeline_assets.core.table import ORDERS as ORDERS_SPEC
from pipeline_assets.core.table.spec import DailyFiles, TableSpec

from .core import sensing
from .core.days import yesterday
from .core.errors import PipelineError
from .core.times import utc_now
from .pools import pool_name, unstick_pool
from .sensor_runs import key_seed, runs_with_keys
from .settings import Settings, files_location

REASON_TAG = "pipeline_assets/reason"
# A run tagged so makes the N_match_source check's full comparison (as the daily schedule's).
COMPARISON_TAG = "pipeline_assets/comparison"
ORDERS_BATCH_TAG = "pipeline_assets/orders_batch_id"  # pipeline_assets/<N>_batch_id
ATTEMPT_TAG = "pipeline_assets/attempt"
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
        description=(
            f"Asks the source for the highest {spec.cursor} (one index lookup)"
            if spec.counts_ids
            else f"Asks the source one question about the whole table, which has no change "
            f"stamp (rows, {key_sum}, newest {spec.stamp}, a hash of every column's value)"
            if spec.compares_whole
            else f"Asks the source one indexed question about the lookback window "
            f"(rows, {key_sum}, newest {spec.stamp}, fingerprint)"
        )
        + f" and loads {spec.name} when "
        "the answer differs from the last one, late rows included; requests the load "
        "again when its run failed or was canceled, and waits while it is queued or "
        "running.",
    )
    def new_rows_sensor(context: SensorEvaluationContext):
        def runs_for(key: str) -> list[sensing.RunView]:
            return runs_with_keys(context.instance, name, [key]).get(key, [])

        result, note = _new_rows_tick(
            getattr(context.resources, source_key),
            getattr(context.resources, watermark_key),
            context.cursor,
            now=clock().timestamp(),
            runs_for=runs_for,
            seed=lambda: key_seed(context.instance, name),
            name=name,
            tz=tz,
            spec=spec,
        )
        if note:
            context.log.info(note)
        return result

    return new_rows_sensor


def _new_rows_tick(
    source,
    watermark,
    cursor: str | None,
    *,
    now: float,
    runs_for: Callable[[str], list[sensing.RunView]],
    seed: Callable[[], str],
    name: str,
    tz: ZoneInfo,
    spec: TableSpec,
) -> tuple[SensorResult | SkipReason, str | None]:
    """One tick of ``new_N_sensor`` and the line it logs (None: nothing to log).

    ``runs_for`` finds the runs of a request's key, ``seed`` where a fresh cursor starts
    its run keys (:func:`.sensor_runs.key_seed`): both ask the instance, only when the
    tick needs them."""
    fresh = sensing.LoadCursor.from_cursor(cursor).last_key is None
    try:
        tick = sensing.check_source(
            source.engine(),
            watermark.warehouse.engine(),
            tz=tz,
            lookback_days=watermark.lookback_days,
            cursor=cursor,
            runs_for=runs_for,
            now=now,
            seed=seed() if fresh else "",
            spec=spec,
        )
    except PipelineError as exc:
        # The cursor stays: the next tick asks again once the database is back.
        return SkipReason(f"could not look at the source: {exc}"), None
    if not tick.run:
        return SensorResult(skip_reason=tick.reason, cursor=tick.cursor.to_cursor()), None
    seen = tick.observation
    request = RunRequest(
        run_key=tick.run_key,
        tags={
            REASON_TAG: name,
            ATTEMPT_TAG: str(tick.cursor.pending.attempt),
            "pipeline_assets/window_start": seen.window_start or "everything",
            "pipeline_assets/window_rows": "n/a" if seen.rows is None else str(seen.rows),
        },
    )
    return SensorResult(run_requests=[request], cursor=tick.cursor.to_cursor()), tick.reason


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
    files = files or spec.daily_files[0]
    of = _RefreshOf(
        name=spec.names.files[files.name].refresh_sensor,
        spec=spec,
        files=files,
        table_key=AssetKey(spec.names.asset),
        tag=batch_tag(spec),
        shape=shape_of(spec, files),
        location=files_location(settings, spec, files),
        tz=settings.tz,
        first_day=settings.partitions_start,
    )
    built = " and ".join(n for n in (files.name, files.totals.name if files.totals else None) if n)

    @sensor(
        name=of.name,
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
        unstuck = unstick_pool(context.instance, pool_name(files.name))
        if unstuck:
            context.log.warning(unstuck)
        result, notes = _refresh_tick(context.instance, context.cursor, now, of)
        for note in notes:
            context.log.info(note)
        return result

    return refresh_sensor


@dataclass(frozen=True)
class _RefreshOf:
    """What a refresh sensor's ticks read of its file set, fixed when it is built."""

    name: str  # the sensor's name
    spec: TableSpec
    files: DailyFiles
    table_key: AssetKey
    tag: str  # the batch tag of its runs (batch_tag)
    shape: Shape  # the file set's declared shape (shape_of)
    location: str  # where its day files are (files_location)
    tz: ZoneInfo  # PIPELINE_TIMEZONE
    first_day: date  # PARTITIONS_START_DATE


def _refresh_tick(
    instance, cursor: str | None, now: datetime, of: _RefreshOf
) -> tuple[SensorResult | SkipReason, list[str]]:
    """One tick of ``F_refresh_sensor`` and the lines it logs."""
    state = sensing.RefreshCursor.from_cursor(cursor)
    found = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=of.table_key, after_storage_id=state.after),
        limit=REFRESH_BATCH,
        ascending=True,
    )
    last_day = yesterday(now, of.tz)
    touched, notes = _touched(found.records, of.first_day, last_day)
    stale: list[str] = []
    if state.declaration != of.shape.current:  # once per declared shape
        try:
            found_stale = [s.day for s in stale_days(open_store(of.location), of.shape)]
        except PipelineError as exc:  # the cursor stays: the next tick looks again
            return SkipReason(f"could not look at the day files of {of.files.name}: {exc}"), []
        stale, _ = sensing.partition_days(found_stale, first_day=of.first_day, last_day=last_day)
        if stale:
            notes.append(
                f"{len(stale)} committed day(s) of {of.files.name} were written with another "
                f"declaration: rebuilding them in the declared one ({of.shape.current})"
            )
    runs = runs_with_keys(instance, of.name, [r.key for r in state.pending])
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
        seed=state.epoch or key_seed(instance, of.name),
        files=of.files.name,
        declaration=of.shape.current,
        stale=stale,
    )
    return _refresh_result(tick, outcomes, notes, of), notes + tick.notes


def _touched(records, first_day: date, last_day: date) -> tuple[list[sensing.Touched], list[str]]:
    """The table's new materializations as the refresh tick reads them, and notes on the
    days each left out."""
    touched, notes = [], []
    for record in records:
        meta = record.asset_materialization.metadata
        days, left_out = sensing.partition_days(
            meta["days_touched"].value if "days_touched" in meta else [],
            first_day=first_day,
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
        moves = meta["days_moved"].value if "days_moved" in meta else []
        touched.append(
            sensing.Touched(record.storage_id, tuple(days), batch, tuple(map(tuple, moves)))
        )
    return touched, notes


def _refresh_result(
    tick: sensing.RefreshTick, outcomes: dict, notes: list[str], of: _RefreshOf
) -> SensorResult:
    """The tick's requests, or why it asked for none (its skip reason)."""
    cursor = tick.cursor.to_cursor()
    if tick.requests:
        return SensorResult(
            run_requests=[_refresh_request(r, of.name, of.tag) for r in tick.requests],
            cursor=cursor,
        )
    notes = list(notes)
    if tick.cursor.pending:
        waiting = ", ".join(
            f"{r.key} ({outcomes[r.key].detail})" for r in tick.cursor.pending if r.key in outcomes
        )
        notes.append(
            f"waiting for {waiting}"
            if waiting
            else f"waiting for {len(tick.cursor.pending)} requested rebuild(s)"
        )
    if not notes:
        notes.append(f"no new materialization of {of.spec.name}")
    return SensorResult(skip_reason="; ".join(notes + tick.notes), cursor=cursor)


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
