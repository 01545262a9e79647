"""The IO manager of the day files of every declared file set (``paid_orders`` for
``orders``): a thin Dagster shell over :mod:`pipeline_assets.core.daily_files`.

No `from __future__ import annotations` here: Dagster reads the annotations at runtime.
"""

import os
from collections.abc import Callable, Mapping

from dagster import ConfigurableIOManager, InputContext, MetadataValue, OutputContext
from pydantic import Field

from pipeline_assets.core.daily_files import (
    DayFilesBatch,
    DayFilesError,
    Shape,
    Store,
    open_store,
    read_committed_days,
    write_day_files,
)
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.table.spec import about

from .core.commands import materialize
from .step_failure import failing_step

REBUILD_METADATA = "pipeline_assets/rebuild"  # on a daily files asset: how to rebuild a day
SHAPE_METADATA = "pipeline_assets/shape"  # and the shape its days must have been written in
DECLARED_IN = "pipeline_assets/declared_in"  # the defs.yaml a table is declared in
FILES_NAME = "pipeline_assets/files"  # beside it on a file set's assets: the set's name


def _declared(metadata) -> Callable[[str], str] | None:
    """How a failure names a file set declared in a ``defs.yaml`` (its asset's metadata
    ``pipeline_assets/declared_in``): ``captured_payments (shop/defs/…/defs.yaml): …``."""
    entry = (metadata or {}).get(DECLARED_IN)
    where = getattr(entry, "value", entry)
    name = (metadata or {}).get(FILES_NAME)
    name = getattr(name, "value", name)
    if not where or not name:
        return None
    return lambda message: about(name, where, message)


class DailyFilesIOManager(ConfigurableIOManager):
    """One file per day partition (JSON, or Parquet for a file set declared so), replaced
    atomically, plus one manifest per run.

    Contract (docs/contract.md): ``handle_output`` writes exactly the run's partition keys
    (a day missing from the output is written empty), then the manifest
    ``_manifest_<run id>.json``; ``load_input`` returns only committed days (a JSON day as
    a list of rows, a Parquet day as a ``pyarrow.Table``) and fails naming any other day.
    Files live in ``url`` (a file set's own folder, PAID_ORDERS_URL for ``paid_orders``: a
    local path or an fsspec URL such as ``s3://bucket/prefix``) or, without it, in
    ``<base_dir>/<asset key path>`` (one such manager serves every file set in its default
    folder). Writers on one machine are serialized by a file lock; across
    machines and on object stores, by the concurrency pool ``<F>_files``
    (``paid_orders_files``). Object-store credentials come from the store's own
    environment variables, never from this configuration.
    """

    base_dir: str | None = Field(
        default=None,
        description="Root folder (PIPELINE_DATA_DIR); without url, files go in "
        "<base_dir>/<asset key path>/<YYYY-MM-DD>.json",
    )
    url: str | None = Field(
        default=None,
        description="The folder of the files (PAID_ORDERS_URL): a local path "
        "or an fsspec URL such as s3://bucket/prefix",
    )

    def store_for(self, context: OutputContext | InputContext) -> Store:
        """The folder of the asset's day files: local disk or an object store."""
        if self.url:
            return open_store(self.url)
        if not self.base_dir:
            raise DayFilesError(
                "the daily files IO manager needs url (PAID_ORDERS_URL) or "
                "base_dir (PIPELINE_DATA_DIR)"
            )
        return open_store(os.path.join(self.base_dir, *context.asset_key.path))

    def _partition_keys(self, context: OutputContext | InputContext, verb: str) -> list:
        if not context.has_asset_partitions:
            raise DayFilesError(
                f"{context.asset_key.to_user_string()} is not partitioned: the daily files IO "
                f"manager can only {verb} assets with daily partitions "
                "(DailyPartitionsDefinition)."
            )
        return sorted(context.asset_partition_keys)

    def handle_output(self, context: OutputContext, obj) -> None:
        """Write the run's day files, then its manifest; record what was written."""
        with failing_step(_declared(context.definition_metadata)):
            self._handle_output(context, obj)

    def _handle_output(self, context: OutputContext, obj) -> None:
        keys = self._partition_keys(context, "store")
        spec, files = ORDERS, None
        if isinstance(obj, DayFilesBatch):
            days, watermark, written_at = obj.days, obj.watermark, obj.written_at
            spec, files = obj.spec, obj.files
        elif isinstance(obj, Mapping):
            days, watermark, written_at = obj, None, None
        else:
            raise DayFilesError(
                f"{context.asset_key.to_user_string()} returned {type(obj).__name__}; return a "
                "DayFilesBatch or a dict mapping each day (YYYY-MM-DD) to its rows."
            )
        extra = sorted(set(days) - set(keys), key=str)
        if extra:
            raise DayFilesError(
                f"{context.asset_key.to_user_string()} returned days {extra} outside this run's "
                f"partitions {keys[0]}...{keys[-1]}; return rows only for the partitions "
                "being materialized."
            )
        written = write_day_files(
            self.store_for(context),
            {key: days.get(key, []) for key in keys},
            run_id=context.run_id,
            # When the batch was built (the asset's clock), else when Dagster created the
            # run: metadata only, never part of a key or a name.
            written_at=written_at or _run_created(context),
            watermark=watermark,
            spec=spec,
            files=files,
        )
        context.add_output_metadata(
            {
                "manifest": MetadataValue.path(str(written.manifest_path)),
                "manifest_sequence": written.sequence,
                # Shared by every partition of the run, so kept small: a year-long range must
                # not copy 365 entries onto each of its 365 materializations.
                "days_in_run": len(written.days_written),
                "first_day": written.days_written[0] if written.days_written else "none",
                "last_day": written.days_written[-1] if written.days_written else "none",
                "rows_in_run": written.total_rows,
                "watermark": watermark if watermark is not None else "none",
            }
        )
        context.log.info(
            f"wrote {len(written.days_written)} day file(s), {written.total_rows} row(s), "
            f"manifest {written.manifest_path.name} (sequence {written.sequence})"
        )

    def load_input(self, context: InputContext) -> dict:
        """Rows of each upstream day partition, from committed days only."""
        upstream = context.upstream_output
        with failing_step(_declared(upstream.definition_metadata if upstream else None)):
            keys = self._partition_keys(context, "load")
            name = context.asset_key.to_user_string()
            return read_committed_days(
                self.store_for(context),
                keys,
                name=name,
                rebuild=_rebuild(context),
                shape=_shape(context),
            )


def _rebuild(context: InputContext):
    """The command that rebuilds a day of the upstream file set, as its asset declares it
    (metadata ``pipeline_assets/rebuild``: the assets a rebuild selects and the code
    location); None: ``paid_orders``' own."""
    upstream = context.upstream_output
    meta = upstream.definition_metadata if upstream is not None else None
    entry = (meta or {}).get(REBUILD_METADATA)
    if entry is None:
        return None
    value = getattr(entry, "value", entry)
    return lambda day: materialize(value["select"], first=day, module=value["module"])


def _shape(context: InputContext) -> Shape | None:
    """The shape the upstream file set is declared with (metadata
    ``pipeline_assets/shape``); None: any committed day will do."""
    upstream = context.upstream_output
    entry = (upstream.definition_metadata or {}).get(SHAPE_METADATA) if upstream else None
    if entry is None:
        return None
    return Shape(**getattr(entry, "value", entry))


def _run_created(context: OutputContext) -> str:
    """When Dagster created this run, as recorded in its instance (a plain-dict output
    carries no time of its own)."""
    record = context.step_context.instance.get_run_record_by_id(context.run_id)
    return record.create_timestamp.isoformat(timespec="seconds")
