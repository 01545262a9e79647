"""Dagster's own cost of a range backfill: the shape of ``paid_orders`` → ``daily_revenue``
with nothing inside.

Two daily-partitioned assets (UTC, from 2025-01-01, as ``bench_backfill.py`` uses), a
single-run backfill policy, the second depending on the first, each reporting one row
count per day as metadata, no IO manager and no files. ``bench_backfill.py`` runs the
same range through it, in process and through the same CLI, next to the pipeline's.
"""

from dagster import (
    AssetExecutionContext,
    BackfillPolicy,
    DailyPartitionsDefinition,
    Definitions,
    MaterializeResult,
    asset,
)

DAYS = DailyPartitionsDefinition(start_date="2025-01-01", timezone="UTC")


@asset(partitions_def=DAYS, backfill_policy=BackfillPolicy.single_run())
def trivial_days(context: AssetExecutionContext) -> MaterializeResult:
    for day in context.partition_keys:
        context.add_asset_metadata({"rows": 1}, partition_key=day)
    return MaterializeResult()


@asset(partitions_def=DAYS, backfill_policy=BackfillPolicy.single_run(), deps=[trivial_days])
def trivial_days_total(context: AssetExecutionContext) -> MaterializeResult:
    for day in context.partition_keys:
        context.add_asset_metadata({"orders": 1, "revenue": 1.0}, partition_key=day)
    return MaterializeResult()


defs = Definitions(assets=[trivial_days, trivial_days_total])
