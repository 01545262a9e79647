"""Dagster assets: unpack the context, call the core, return values and metadata.

No `from __future__ import annotations` here: Dagster reads the annotations at runtime.
"""


import warnings
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Optional

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    BackfillPolicy,
    BetaWarning,
    Config,
    DailyPartitionsDefinition,
    Failure,
    MaterializeResult,
    MetadataValue,
    RetryPolicy,
    asset,
)
from pydantic import Field

from .core.daily_files import DayFilesBatch, manifest_path
from .core.db import redact
from .core.errors import PipelineError
from .core.paid import day_totals, paid_orders_by_day, store_daily_revenue
from .core.spec import ORDERS
from .core.times import to_instant, utc_now
from .location import DECLARATION, shown_attributes
from .resources import SourceDatabase, Warehouse, WatermarkStore
from .settings import Settings

if TYPE_CHECKING:
    from .core.load import LoadResult

# The load (pyarrow, the ADBC drivers) and the reconciliation are imported where they
# run, in the step's process: the process that only plans a run does not pay for them.

LATENESS_CHECK = "lateness_within_lookback"
OWNER = "team:data-engineering"  # shown in the UI; change to your team

RECONCILE_CHECK = "orders_match_source"

Clock = Callable[[], datetime]  # the Dagster layer's one clock; tests pass a fixed one



def _failure(exc: PipelineError) -> Failure:
    """A run failure with the error's one line; retried only when a retry can pass (an
    unreachable database may come back, bad input does not fix itself)."""
    return Failure(description=str(exc), allow_retries=exc.retryable)


class OrdersLoadConfig(Config):
    """Leave both empty for the incremental load; give both to reload an exact range."""

    start: Optional[str] = Field(  # noqa: UP045 - Dagster's config schema needs Optional
        default=None,
        description="Inclusive start of an explicit range: a date (midnight in "
        "PIPELINE_TIMEZONE) or an ISO-8601 timestamp. The watermark is left alone.",
    )
    end: Optional[str] = Field(  # noqa: UP045
        default=None, description="Exclusive end of the explicit range (same forms as start)."
    )
    allow_deletes: bool = Field(
        default=False,
        description="A range load deletes the orders of its range that the source no longer "
        "holds, and refuses when that is more than MAX_DELETE_SHARE of them; true lets "
        "this run delete them all (after checking the source is the right one).",
    )


def load_metadata(result: "LoadResult", lookback_days: int) -> dict:
    """Materialization metadata of the ``orders`` asset: the story of one batch."""
    def when(value):
        return value.isoformat() if value else "none"

    return {
        "kind": result.kind,
        "batch_id": result.batch_id,
        "skipped": result.skipped,
        "window_start": when(result.window_start) if result.window_start else "everything",
        "window_end": when(result.window_end) if result.window_end else "open",
        "lookback_days": lookback_days,
        "watermark_before": when(result.watermark_before),
        "watermark_after": when(result.watermark_after),
        "rows_read": result.rows_read,
        "inserted": result.inserted,
        "updated": result.updated,
        "unchanged": result.unchanged,
        "days_touched": MetadataValue.json(list(result.days_touched)),
        "days_touched_count": len(result.days_touched),
        "late_rows": result.late_rows,
        "max_lateness_hours": round(result.max_lateness.total_seconds() / 3600, 3)
        if result.max_lateness else 0.0,
        "future_rows": result.future_rows,
        "future_order_ids": MetadataValue.json(list(result.future_order_ids)),
        # only a range load can see a deletion: an incremental one says nothing of them
        **({} if result.rows_deleted is None else {
            "rows_deleted": result.rows_deleted,
            "deleted_order_ids": MetadataValue.json(list(result.deleted_order_ids)),
            "deleted_digest": result.deleted_digest or "none",
            "mass_delete_allowed": result.mass_delete_allowed,
        }),
    }


def lateness_check(result: "LoadResult", lookback_days: int) -> AssetCheckResult:
    """Warn when rows arrive late by half the lookback window or more: widen it in time."""
    window = timedelta(days=lookback_days)
    worst = result.max_lateness
    passed = worst is None or worst < window / 2
    hours = worst.total_seconds() / 3600 if worst else 0.0
    return AssetCheckResult(
        check_name=LATENESS_CHECK,
        passed=passed,
        severity=AssetCheckSeverity.WARN,
        description=None if passed else (
            f"{result.late_rows} row(s) arrived up to {hours:.1f} h behind the watermark, "
            f"at least half the lookback window of {lookback_days} day(s): rows later than "
            "the window are missed by incremental loads. Widen LOOKBACK_DAYS."),
        metadata={"max_lateness_hours": round(hours, 3), "late_rows": result.late_rows,
                  "lookback_days": lookback_days},
    )


def last_announced_batch(context: AssetExecutionContext) -> Optional[str]:  # noqa: UP045
    """The batch id of the last recorded materialization of ``orders`` (None before any).

    Batches the ledger committed after it belong to runs that died before Dagster heard
    of them; the load adds their days to ``days_touched`` so their files get rebuilt.
    """
    event = context.instance.get_latest_materialization_event(AssetKey("orders"))
    if event is None or event.asset_materialization is None:
        return None
    batch = event.asset_materialization.metadata.get("batch_id")
    return batch.value if batch is not None else None


def build_orders_asset(settings: Settings, clock: Clock = utc_now):
    tz = settings.tz
    horizon_days = settings.reconcile_days

    @asset(
        name="orders",
        group_name="warehouse",
        code_version="1",
        owners=[OWNER],
        kinds={"sql", "python"},
        retry_policy=RetryPolicy(max_retries=2, delay=5),
        # Both checks run in the load's own step: a separate @asset_check would be a
        # second step process per run, about half of a small run's cost again
        # (docs/benchmarks.md); `pipeline-assets verify` checks without loading.
        check_specs=[
            AssetCheckSpec(
                LATENESS_CHECK, asset="orders",
                description="Warns when rows arrive late by half the lookback window or "
                "more."),
            AssetCheckSpec(
                RECONCILE_CHECK, asset="orders",
                description=f"Source and warehouse agree, day by day (count and row "
                f"checksum), over the {horizon_days} days (RECONCILE_DAYS) ending at the "
                "watermark, plus the days the batch touched: catches rows that arrived "
                "later than the lookback window. Comparing no day while the warehouse "
                "holds rows is a failure."),
        ],
        description="Orders upserted by key from the app database: the rows changed since "
        "the watermark plus the lookback window, committed with their batch id.",
        metadata={DECLARATION: MetadataValue.json(shown_attributes(ORDERS))},
    )
    def orders(context: AssetExecutionContext, config: OrdersLoadConfig,
               source: SourceDatabase, watermark: WatermarkStore) -> MaterializeResult:
        """Orders upserted by key from the app database, incrementally."""
        from .core.load import FUTURE_TOLERANCE, DeletePolicy, DeleteRefused, load_orders

        try:
            start = to_instant(config.start, tz) if config.start else None
            end = to_instant(config.end, tz) if config.end else None
            result = load_orders(
                source.engine(), watermark.warehouse.engine(), tz=tz,
                lookback_days=watermark.lookback_days, now=clock(),
                start=start, end=end, announced_batch=last_announced_batch(context),
                deletes=DeletePolicy(settings.max_delete_share, config.allow_deletes),
            )
        except DeleteRefused as exc:  # the run's failure shows what it would have deleted
            context.log.error(str(exc))
            raise Failure(description=str(exc), allow_retries=False,
                          metadata=exc.metadata) from None
        except PipelineError as exc:
            raise _failure(exc) from None
        if result.mass_delete_allowed:
            context.log.warning(
                f"allow_deletes: deleted {result.rows_deleted} order(s) the source no longer "
                f"holds, more than MAX_DELETE_SHARE={settings.max_delete_share:g} of the "
                f"range's; their keys' digest {result.deleted_digest} is in the ledger")
        context.log.info(
            f"batch {result.batch_id}: read {result.rows_read}, inserted {result.inserted}, "
            f"updated {result.updated}, unchanged {result.unchanged}"
            f"{' (already committed: skipped)' if result.skipped else ''}; watermark "
            f"{result.watermark_before} -> {result.watermark_after}; warehouse "
            f"{redact(watermark.warehouse.url)}"
        )
        if result.future_rows:
            context.log.warning(
                f"{result.future_rows} row(s) are stamped after the run's time plus "
                f"{FUTURE_TOLERANCE}: loaded, but the watermark did not follow them "
                f"(orders {list(result.future_order_ids)}); check the app's clock."
            )
        return MaterializeResult(
            metadata=load_metadata(result, watermark.lookback_days),
            check_results=[
                lateness_check(result, watermark.lookback_days),
                reconcile_check(source, watermark.warehouse, tz, horizon_days,
                                list(result.days_touched), result.read_whole,
                                settings.max_delete_share),
            ],
        )

    return orders


def reconcile_check(source: SourceDatabase, warehouse: Warehouse, tz, horizon_days: int,
                    days_touched: list[str], read_whole=None,
                    max_delete_share: float = 0.5) -> AssetCheckResult:
    """Source and warehouse agree day by day over the days ending at the watermark (no
    clock: the window is anchored on the data, core/horizon.py), plus ``days_touched``;
    the days the load just read whole are compared with what it read (``read_whole``)."""
    from .core.horizon import reconcile_horizon
    from .core.verify import VerifyError

    try:
        h, days, verdict = reconcile_horizon(
            source.engine(), warehouse.engine(), tz, reconcile_days=horizon_days,
            days_touched=days_touched, read_whole=read_whole,
            max_delete_share=max_delete_share)
    except VerifyError as exc:
        return AssetCheckResult(check_name=RECONCILE_CHECK, passed=False,
                                description=str(exc))
    return AssetCheckResult(
        check_name=RECONCILE_CHECK,
        passed=verdict.passed,
        description=verdict.description,
        metadata={
            "anchored_on": h.anchored_on,
            "anchor": h.anchor.isoformat() if h.anchor else "none",
            "window": f"{h.first}...{h.last}" if h.first else "none",
            "touched_outside_window": MetadataValue.json([str(d) for d in h.touched]),
            "days_compared": verdict.days_compared,
            "differing_days": MetadataValue.json(verdict.differing),
            "deleted_from_source": MetadataValue.json(
                {d: days[d].only_in_warehouse for d in verdict.differing
                 if days[d].only_in_warehouse}),
            "repair": MetadataValue.json(verdict.repair),
        },
    )


def daily_partitions(settings: Settings) -> DailyPartitionsDefinition:
    """One partition per day in PIPELINE_TIMEZONE, from PARTITIONS_START_DATE; a day's
    partition exists once the day is over."""
    return DailyPartitionsDefinition(start_date=settings.partitions_start.isoformat(),
                                     timezone=settings.timezone)


def build_daily_assets(settings: Settings, orders_asset, clock: Clock = utc_now):
    # backfill_policy is beta in Dagster 1.13: pinned to 1.13, and the single-run range
    # behaviour is covered by our tests, so its warning is silenced here only.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)
        return _build_daily_assets(settings, orders_asset, clock)


def _build_daily_assets(settings: Settings, orders_asset, clock: Clock):
    tz = settings.tz
    partitions = daily_partitions(settings)

    @asset(
        name="paid_orders",
        partitions_def=partitions,
        backfill_policy=BackfillPolicy.single_run(),
        deps=[orders_asset],
        io_manager_key="day_files",
        pool="paid_orders_files",
        group_name="daily_files",
        code_version="1",
        owners=[OWNER],
        kinds={"json"},
        retry_policy=RetryPolicy(max_retries=2, delay=5),
        description="The paid orders of each day, one JSON file per day, replaced "
        "atomically; a manifest per run says which files are committed.",
    )
    def paid_orders(context: AssetExecutionContext, watermark: WatermarkStore) -> DayFilesBatch:
        """The paid orders of each day, one JSON file per day."""
        days = list(context.partition_keys)
        try:
            by_day = paid_orders_by_day(watermark.warehouse.engine(), days, tz)
            current = watermark.current()
        except PipelineError as exc:
            raise _failure(exc) from None
        manifest = manifest_path(settings.paid_orders_location, context.run.run_id)
        for day in days:
            context.add_asset_metadata(
                {"rows": len(by_day[day]), "manifest": MetadataValue.path(str(manifest))},
                partition_key=day,
            )
        context.log.info(f"built {len(days)} day(s) {days[0]}...{days[-1]}, "
                         f"{sum(map(len, by_day.values()))} paid orders")
        return DayFilesBatch(days=by_day, watermark=current.isoformat() if current else None,
                             written_at=clock().isoformat(timespec="seconds"))

    @asset(
        name="daily_revenue",
        partitions_def=partitions,
        backfill_policy=BackfillPolicy.single_run(),
        group_name="daily_files",
        code_version="1",
        owners=[OWNER],
        kinds={"sql"},
        description="Per day: the number of paid orders and their exact total, computed "
        "from the committed paid_orders files.",
    )
    def daily_revenue(context: AssetExecutionContext, paid_orders: dict,
                      warehouse: Warehouse) -> MaterializeResult:
        """Per day: the number of paid orders and their exact total."""
        try:
            totals = {day: day_totals(rows) for day, rows in paid_orders.items()}
            store_daily_revenue(warehouse.engine(), totals)
        except PipelineError as exc:
            raise _failure(exc) from None
        for day, (count, total) in sorted(totals.items()):
            context.add_asset_metadata(
                {"orders": count,
                 # float only so the UI can plot it; the exact total is revenue_exact
                 "revenue": float(total),
                 "revenue_exact": str(total)},
                partition_key=day,
            )
        return MaterializeResult()

    return paid_orders, daily_revenue
