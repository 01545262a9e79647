"""Dagster assets of one declared table: unpack the context, call the core, return values
and metadata.

For a table ``N`` (a :class:`~.core.spec.TableSpec`): the asset ``N`` (the incremental
load, with its two checks, :mod:`.table_checks`), and what every asset of the table
shares (its settings, its resource keys, the run failure of a core error). The assets of
its daily file sets (per set ``F`` the daily-partitioned ``F`` and, when it has totals,
``T``) are built in :mod:`.files_assets`. Names come from ``spec.names``; ``orders``
keeps every name and metadata key it had before declarations existed.

No `from __future__ import annotations` here: Dagster reads the annotations at runtime.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Optional

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    Config,
    MaterializeResult,
    MetadataValue,
    RetryPolicy,
    asset,
)
from pydantic import Field

from pipeline_assets.core.table.spec import TableSpec

from .automation import COMPARISON_TAG, REASON_TAG
from .core.commands import DEFINITIONS_MODULE
from .core.secrets import redact
from .core.times import to_instant, utc_now
from .core.warehouse import watermark as wm
from .location import declaration_metadata
from .settings import Settings
from .step_failure import failing_step, step_failure
from .table_checks import key_value, lateness_check, reconcile_check

if TYPE_CHECKING:
    from pipeline_assets.core.load.result import LoadResult

# The load (pyarrow, the ADBC drivers) and the reconciliation are imported where they
# run, in the step's process: the process that only plans a run does not pay for them.

OWNER = "team:data-engineering"  # shown in the UI; change to your team

Clock = Callable[[], datetime]  # the Dagster layer's one clock; tests pass a fixed one


@dataclass(frozen=True)
class TableResources:
    """The resource keys one table's assets use: shared keys where every table of the
    location has the same resource, the table's (or file set's) own where it has its own
    (definitions.py decides)."""

    source: str = "source"
    warehouse: str = "warehouse"
    watermark: str = "watermark"
    files: dict = field(default_factory=dict)  # daily file name -> IO manager key


@dataclass(frozen=True)
class TableSettings:
    """What the assets of one table read: the environment's settings with the
    declaration's own ``lookback_days``, ``reconcile_days`` and ``max_delete_share``."""

    settings: Settings
    spec: TableSpec
    module: str = DEFINITIONS_MODULE  # the code location its printed commands name

    @property
    def reconcile_days(self) -> int:
        own = self.spec.reconcile_days
        return self.settings.reconcile_days if own is None else own

    @property
    def max_delete_share(self) -> float:
        own = self.spec.max_delete_share
        return self.settings.max_delete_share if own is None else own


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
        description="A range load deletes the rows of its range that the source no longer "
        "holds, and refuses when that is more than MAX_DELETE_SHARE of them; true lets "
        "this run delete them all (after checking the source is the right one).",
    )


TableLoadConfig = OrdersLoadConfig  # the same run config for every table


def _keys(values) -> MetadataValue:
    return MetadataValue.json([key_value(v) for v in values])


def load_metadata(result: "LoadResult", lookback_days: int, spec: TableSpec) -> dict:
    """Materialization metadata of a table asset: the story of one batch (``orders``
    names its keys ``future_order_ids`` and ``deleted_order_ids``, any other table
    ``future_keys`` and ``deleted_keys``)."""

    def when(value):  # an instant, or an integer cursor's id
        return wm.text(value) or "none"

    future, deleted = spec.key_name("future_keys"), spec.key_name("deleted_keys")
    return {
        "kind": result.kind,
        "batch_id": result.batch_id,
        "skipped": result.skipped,
        "window_start": when(result.window_start) if result.window_start else "everything",
        "window_end": when(result.window_end) if result.window_end else "open",
        **_lookback(result, lookback_days, spec),
        "watermark_before": when(result.watermark_before),
        "watermark_after": when(result.watermark_after),
        "rows_read": result.rows_read,
        "inserted": result.inserted,
        "updated": result.updated,
        "unchanged": result.unchanged,
        "days_touched": MetadataValue.json(list(result.days_touched)),
        "days_touched_count": len(result.days_touched),
        # a table with a day_column: the days rows moved between, which the refresh
        # sensor rebuilds in one run
        **(
            {"days_moved": MetadataValue.json([list(m) for m in result.days_moved])}
            if spec.day_column is not None
            else {}
        ),
        # an id cursor: the ids it remembers missing below what it read, and found again
        **(
            {"holes_remembered": result.holes_remembered, "holes_filled": result.holes_filled}
            if spec.counts_ids
            else {}
        ),
        "late_rows": result.late_rows,
        "future_rows": result.future_rows,
        future: _keys(result.future_keys),
        # the declaration (core/warehouse/evolve.py): what the source has that nobody declared
        # (never read), the fingerprint the batch was written with, and what it changed
        "undeclared_columns": MetadataValue.json(list(result.undeclared_columns)),
        "declaration": result.declaration or "none",
        **_schema_change(result),
        # only a range load can see a deletion: an incremental one says nothing of them
        **(
            {}
            if result.rows_deleted is None
            else {
                "rows_deleted": result.rows_deleted,
                deleted: _keys(result.deleted_keys),
                "deleted_digest": result.deleted_digest or "none",
                "mass_delete_allowed": result.mass_delete_allowed,
            }
        ),
    }


def _lookback(result: "LoadResult", lookback_days: int, spec: TableSpec) -> dict:
    """How far a batch looks back and how late its rows were: in days and hours, or for
    an integer cursor in ids."""
    if spec.counts_ids:
        return {"lookback_ids": spec.lookback_ids, "max_lateness_ids": result.max_lateness or 0}
    worst = result.max_lateness
    return {
        "lookback_days": lookback_days,
        "max_lateness_hours": round(worst.total_seconds() / 3600, 3) if worst else 0.0,
    }


def _schema_change(result: "LoadResult") -> dict:
    """What a batch changed in the warehouse table, when it changed something."""
    out = {}
    if result.columns_added:
        out["columns_added"] = MetadataValue.json(list(result.columns_added))
        out["days_to_fill"] = MetadataValue.json(list(result.days_to_fill))
    if result.columns_removed:
        out["columns_removed"] = MetadataValue.json(list(result.columns_removed))
    if result.columns_widened:
        out["columns_widened"] = MetadataValue.json(list(result.columns_widened))
    return out


def last_announced_batch(
    context: AssetExecutionContext,
    name: str,
) -> Optional[str]:  # noqa: UP045
    """The batch id of the last recorded materialization of the table asset ``name``
    (None before any).

    Batches the ledger committed after it belong to runs that died before Dagster heard
    of them; the load adds their days to ``days_touched`` so their files get rebuilt.
    """
    event = context.instance.get_latest_materialization_event(AssetKey(name))
    if event is None or event.asset_materialization is None:
        return None
    batch = event.asset_materialization.metadata.get("batch_id")
    return batch.value if batch is not None else None


def build_table_asset(
    table: TableSettings, keys: TableResources = TableResources(), clock: Clock = utc_now
):
    """The asset ``N``: the incremental (or explicit-range) load of the declared table,
    with its lateness and match-source checks run in the load's own step."""
    spec = table.spec
    names = spec.names
    tz = table.settings.tz
    horizon_days = table.reconcile_days
    what = spec.say("Source_rows")

    @asset(
        name=names.asset,
        group_name="warehouse",
        code_version="1",
        owners=[OWNER],
        kinds={"sql", "python"},
        retry_policy=RetryPolicy(max_retries=2, delay=5),
        required_resource_keys={keys.source, keys.watermark},
        # Both checks run in the load's own step: a separate @asset_check would be a
        # second step process per run, about half of a small run's cost again
        # (docs/benchmarks.md); `pipeline-assets verify` checks without loading.
        check_specs=[
            AssetCheckSpec(
                names.lateness_check,
                asset=names.asset,
                description="Warns when rows arrive late by half the lookback window or more.",
            ),
            AssetCheckSpec(
                names.match_check,
                asset=names.asset,
                description="Source and warehouse agree, day by day (count and row "
                "checksum). After each load: the days it read whole, compared with what it "
                "read. The daily schedule's run (the full comparison) also compares the "
                f"{horizon_days} days (RECONCILE_DAYS) ending at the watermark, which "
                "catches rows that arrived later than the lookback window, and every day "
                "touched since its last comparison. Comparing no day while the warehouse "
                "holds rows is a failure.",
            ),
        ],
        description=f"{what} upserted by key from the app database: the rows changed since "
        "the watermark plus the lookback window, committed with their batch id.",
        metadata=declaration_metadata(spec),
    )
    def table_asset(context: AssetExecutionContext, config: OrdersLoadConfig) -> MaterializeResult:
        """Rows upserted by key from the app database, incrementally."""
        source = getattr(context.resources, keys.source)
        watermark = getattr(context.resources, keys.watermark)
        with failing_step(spec):
            return _load(context, config, source, watermark, table, tz=tz, clock=clock)

    return table_asset


def _load(
    context: AssetExecutionContext,
    config: OrdersLoadConfig,
    source,
    watermark,
    table: TableSettings,
    *,
    tz,
    clock: Clock,
) -> MaterializeResult:
    """The step of the asset ``N``: the batch, told in the run's log, with its metadata and
    both checks."""
    result = _load_batch(context, config, source, watermark, table, tz=tz, clock=clock)
    _log_batch(context.log, result, table, warehouse_url=watermark.warehouse.url)
    return MaterializeResult(
        metadata=load_metadata(result, watermark.lookback_days, table.spec),
        check_results=[
            lateness_check(result, watermark.lookback_days, table.spec),
            reconcile_check(
                source,
                watermark.warehouse,
                tz,
                table.reconcile_days,
                list(result.days_touched),
                result.read_whole,
                table.max_delete_share,
                spec=table.spec,
                module=table.module,
                full_at=clock() if _full_comparison(context, table.spec) else None,
            ),
        ],
    )


def _full_comparison(context: AssetExecutionContext, spec: TableSpec) -> bool:
    """Whether this run's check makes the full comparison: the daily schedule's runs, or a
    run tagged ``pipeline_assets/comparison=full``."""
    tags = context.run.tags
    return tags.get(REASON_TAG) == spec.names.schedule or tags.get(COMPARISON_TAG) == "full"


def _load_batch(
    context: AssetExecutionContext,
    config: OrdersLoadConfig,
    source,
    watermark,
    table: TableSettings,
    *,
    tz,
    clock: Clock,
) -> "LoadResult":
    """The batch of one run: the incremental load, or the explicit range of ``config``. A
    range load refused for the rows it would delete fails the step, showing them."""
    from pipeline_assets.core.errors import DeleteRefused
    from pipeline_assets.core.load.batch import load_table
    from pipeline_assets.core.load.deletions import DeletePolicy

    spec = table.spec
    try:
        start = to_instant(config.start, tz) if config.start else None
        end = to_instant(config.end, tz) if config.end else None
        return load_table(
            source.engine(),
            watermark.warehouse.engine(),
            spec=spec,
            tz=tz,
            lookback_days=watermark.lookback_days,
            now=clock(),
            start=start,
            end=end,
            announced_batch=last_announced_batch(context, spec.names.asset),
            deletes=DeletePolicy(table.max_delete_share, config.allow_deletes),
        )
    except DeleteRefused as exc:  # the run's failure shows what it would have deleted
        context.log.error(spec.about(str(exc)))
        raise step_failure(exc, spec, metadata=exc.metadata) from None


def _log_batch(log, result: "LoadResult", table: TableSettings, *, warehouse_url) -> None:
    """The batch in the run's log: what it did, and a warning for a mass delete it was
    allowed and for rows stamped after the run's time."""
    from pipeline_assets.core.load.batch import FUTURE_TOLERANCE

    spec = table.spec
    row = spec.say("rows_counted")
    if result.mass_delete_allowed:
        log.warning(
            f"allow_deletes: deleted {result.rows_deleted} {row} the source no longer "
            f"holds, more than MAX_DELETE_SHARE={table.max_delete_share:g} of the "
            f"range's; their keys' digest {result.deleted_digest} is in the ledger"
        )
    deleted = "" if result.rows_deleted is None else f", deleted {result.rows_deleted}"
    log.info(
        f"batch {result.batch_id}: read {result.rows_read}, inserted {result.inserted}, "
        f"updated {result.updated}, unchanged {result.unchanged}{deleted}"
        f"{' (already committed: skipped)' if result.skipped else ''}; watermark "
        f"{result.watermark_before} -> {result.watermark_after}; warehouse "
        f"{redact(warehouse_url)}"
    )
    if result.future_rows:
        log.warning(
            f"{result.future_rows} row(s) are stamped after the run's time plus "
            f"{FUTURE_TOLERANCE}: loaded, but the watermark did not follow them "
            f"({spec.say('future_keys')} "
            f"{[key_value(k) for k in result.future_keys]}); check the app's "
            "clock."
        )
