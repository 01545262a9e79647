"""Dagster assets: unpack the context, call the core, return values and metadata.

No `from __future__ import annotations` here: Dagster reads the annotations at runtime.
"""


from datetime import datetime, timezone
from typing import Optional

from dagster import (
    AssetExecutionContext,
    Config,
    Failure,
    MaterializeResult,
    MetadataValue,
    RetryPolicy,
    asset,
)
from pydantic import Field

from .core.db import redact
from .core.load import LoadError, LoadResult, load_orders
from .core.rows import InvalidRowError
from .core.times import TimeValueError, to_instant
from .resources import SourceDatabase, WatermarkStore
from .settings import Settings

# Bad input does not fix itself on a retry; an unreachable database may.
_NOT_RETRYABLE = (InvalidRowError, LoadError, TimeValueError)


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


def load_metadata(result: LoadResult, lookback_days: int) -> dict:
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
    }


def build_orders_asset(settings: Settings):
    tz = settings.tz

    @asset(
        name="orders",
        group_name="warehouse",
        code_version="1",
        kinds={"sql", "python"},
        retry_policy=RetryPolicy(max_retries=2, delay=5),
        description="Orders upserted by key from the app database: the rows changed since "
        "the watermark plus the lookback window, committed with their batch id.",
    )
    def orders(context: AssetExecutionContext, config: OrdersLoadConfig,
               source: SourceDatabase, watermark: WatermarkStore) -> MaterializeResult:
        """Orders upserted by key from the app database, incrementally."""
        try:
            start = to_instant(config.start, tz) if config.start else None
            end = to_instant(config.end, tz) if config.end else None
            result = load_orders(
                source.engine(), watermark.warehouse.engine(), tz=tz,
                lookback_days=watermark.lookback_days, now=datetime.now(timezone.utc),
                start=start, end=end,
            )
        except _NOT_RETRYABLE as exc:
            raise Failure(description=str(exc), allow_retries=False) from None
        context.log.info(
            f"batch {result.batch_id}: read {result.rows_read}, inserted {result.inserted}, "
            f"updated {result.updated}, unchanged {result.unchanged}"
            f"{' (already committed: skipped)' if result.skipped else ''}; watermark "
            f"{result.watermark_before} -> {result.watermark_after}; warehouse "
            f"{redact(watermark.warehouse.url)}"
        )
        return MaterializeResult(metadata=load_metadata(result, watermark.lookback_days))

    return orders
