"""Dagster assets of a declared table's daily file sets: unpack the context, call the
core, return values and metadata.

Per daily file set ``F`` of a table (a :class:`~.core.spec.DailyFiles` of its
:class:`~.core.spec.TableSpec`): the daily-partitioned ``F`` (its day files, written by
the IO manager) and, when it has totals, ``T`` (per-day row counts and exact sums, from
the committed files). :func:`build_files_assets` builds them from the table's
:class:`~.assets.TableSettings` and :class:`~.assets.TableResources` and its table asset
(:mod:`.assets`), which they depend on. Names come from ``spec.names``; ``orders`` keeps
every name and metadata key it had before declarations existed.

No `from __future__ import annotations` here: Dagster reads the annotations at runtime.
"""

import warnings
from dataclasses import asdict

from dagster import (
    AssetExecutionContext,
    AssetIn,
    AssetKey,
    BackfillPolicy,
    BetaWarning,
    DailyPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    RetryPolicy,
    asset,
)

from pipeline_assets.core.daily_files import DayFilesBatch, manifest_path, shape_of
from pipeline_assets.core.daily_files.views import day_rows, day_totals, store_totals
from pipeline_assets.core.table.spec import DailyFiles
from pipeline_assets.core.verify.files import day_tables

from .assets import OWNER, Clock, TableResources, TableSettings
from .core.commands import daily_assets
from .core.times import utc_now
from .core.warehouse import watermark as wm
from .io_manager import DECLARED_IN, FILES_NAME, REBUILD_METADATA, SHAPE_METADATA
from .pools import pool_name
from .settings import Settings, files_location
from .step_failure import failing_step


def daily_partitions(settings: Settings) -> DailyPartitionsDefinition:
    """One partition per day in PIPELINE_TIMEZONE, from PARTITIONS_START_DATE; a day's
    partition exists once the day is over."""
    return DailyPartitionsDefinition(
        start_date=settings.partitions_start.isoformat(), timezone=settings.timezone
    )


def build_files_assets(
    table: TableSettings,
    files: DailyFiles,
    table_asset,
    keys: TableResources = TableResources(),  # noqa: B008 - frozen, as in assets.py
    clock: Clock = utc_now,
):
    """The daily-partitioned assets of one file set: ``F`` and, with totals, ``T``."""
    # backfill_policy is beta in Dagster 1.13: pinned to 1.13, and the single-run range
    # behaviour is covered by our tests, so its warning is silenced here only.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)
        built = [_build_files_asset(table, files, table_asset, keys, clock)]
        if files.totals is not None:
            built.append(_build_totals_asset(table, files, keys))
        return built


def _build_files_asset(
    table: TableSettings, files: DailyFiles, table_asset, keys: TableResources, clock: Clock
):
    settings, spec = table.settings, table.spec
    tz = settings.tz
    location = files_location(settings, spec, files)
    rows_word = spec.say("file_rows")

    @asset(
        name=files.name,
        partitions_def=daily_partitions(settings),
        backfill_policy=BackfillPolicy.single_run(),
        deps=[table_asset],
        io_manager_key=keys.files[files.name],
        pool=pool_name(files.name),
        group_name="daily_files",
        code_version="1",
        owners=[OWNER],
        kinds={files.format},
        retry_policy=RetryPolicy(max_retries=2, delay=5),
        required_resource_keys={keys.watermark},
        metadata=_files_metadata(table, files),
        description=f"{spec.say('Files_rows', file=files.name)} of each day, one "
        f"{_FORMAT_WORDS[files.format]} file per day, replaced atomically; a manifest per run "
        "says which files are committed.",
    )
    def files_asset(context: AssetExecutionContext) -> DayFilesBatch:
        """The rows of each day, one file per day."""
        watermark = getattr(context.resources, keys.watermark)
        days = list(context.partition_keys)
        # a Parquet day is built from Arrow tables of the stored rows, a JSON day from rows
        read = day_tables if files.format == "parquet" else day_rows
        with failing_step(spec):
            by_day = read(watermark.warehouse.engine(), days, tz, spec=spec, files=files)
            current = watermark.current(spec.name)
        manifest = manifest_path(location, context.run.run_id)
        for day in days:
            context.add_asset_metadata(
                {"rows": len(by_day[day]), "manifest": MetadataValue.path(str(manifest))},
                partition_key=day,
            )
        context.log.info(
            f"built {len(days)} day(s) {days[0]}...{days[-1]}, "
            f"{sum(map(len, by_day.values()))} {rows_word} ({files.format})"
        )
        return DayFilesBatch(
            days=by_day,
            watermark=wm.text(current),  # an integer cursor's: its id, as text
            written_at=clock().isoformat(timespec="seconds"),
            spec=spec,
            files=files,
        )

    return files_asset


_FORMAT_WORDS = {"json": "JSON", "parquet": "Parquet"}


def _files_metadata(table: TableSettings, files: DailyFiles) -> dict:
    """What the IO manager names when a reader finds a day not committed, and the shape
    the files are declared with (a reader refuses a day of another)."""
    spec = table.spec
    return {
        REBUILD_METADATA: MetadataValue.json(
            {"select": daily_assets(spec, files.name), "module": table.module}
        ),
        SHAPE_METADATA: MetadataValue.json(asdict(shape_of(spec, files))),
        **_declared_in(spec, files),
    }


def _declared_in(spec, files: DailyFiles) -> dict:
    """Where a file set declared in a ``defs.yaml`` is declared: what the IO manager's
    failures name (none for ``orders``, declared in code)."""
    if not spec.declared_in:
        return {}
    return {DECLARED_IN: spec.declared_in, FILES_NAME: files.name}


def _build_totals_asset(table: TableSettings, files: DailyFiles, keys: TableResources):
    settings, spec = table.settings, table.spec
    totals = files.totals

    @asset(
        name=totals.name,
        partitions_def=daily_partitions(settings),
        backfill_policy=BackfillPolicy.single_run(),
        ins={"day_files": AssetIn(key=AssetKey(files.name))},
        group_name="daily_files",
        code_version="1",
        owners=[OWNER],
        kinds={"sql"},
        required_resource_keys={keys.warehouse},
        description=spec.say(
            "totals_description", file=files.name, sums=", ".join(totals.sum) or "no column"
        ),
    )
    def totals_asset(context: AssetExecutionContext, day_files: dict) -> MaterializeResult:
        """Per day: the number of rows and their exact totals."""
        warehouse = getattr(context.resources, keys.warehouse)
        with failing_step(spec):
            per_day = {day: day_totals(rows, totals, spec) for day, rows in day_files.items()}
            store_totals(warehouse.engine(), spec=spec, totals=totals, per_day=per_day)
        for day, (count, sums) in sorted(per_day.items()):
            context.add_asset_metadata(
                _totals_metadata(spec, totals.sum, count, sums), partition_key=day
            )
        return MaterializeResult()

    return totals_asset


def _totals_metadata(spec, summed, count: int, sums) -> dict:
    """``rows`` and, per summed column ``C``, ``C`` (a float, only so the UI can plot it)
    and ``C_exact`` (the exact total as text); ``orders`` names its three as it always
    did (``orders``, ``revenue``, ``revenue_exact``: its spec's ``legacy``)."""
    from pipeline_assets.core.daily_files.views import total_text

    if spec.legacy is not None:
        rows, total, exact = spec.legacy.totals_metadata
        value = sums[summed[0]]
        return {rows: count, total: float(value), exact: total_text(value)}
    out: dict = {"rows": count}
    for name in summed:
        out[name] = float(sums[name])
        out[f"{name}_exact"] = total_text(sums[name])
    return out
