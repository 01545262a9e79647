"""The code location: ``defs``, built from the environment when Dagster loads this module.

:func:`build_definitions` builds everything Dagster needs for one declared table (a
:class:`~.core.spec.TableSpec`); ``orders`` is the declaration this module serves, built
in Python. A user's project gets the same from each ``pipeline_assets.IncrementalTable``
of its defs folder, and Dagster merges them: the resources every table shares (the
warehouse, the default source, the watermark store, the IO manager of the default
folders) and the executor are one object per process, so two declarations load together;
a table's own source or a file set's own folder has a key of its own
(``source_<name>``, ``day_files_<file>``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dagster import AssetSelection, Definitions, EnvVar, define_asset_job, in_process_executor

from pipeline_assets.core.errors import SettingsError
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.table.spec import TableSpec
from pipeline_assets.settings import Settings, files_location

from . import settings as settings_module
from .assets import Clock, TableResources, TableSettings, build_table_asset
from .automation import build_daily_schedule, build_new_rows_sensor, build_refresh_sensor
from .core.commands import DEFINITIONS_MODULE
from .core.times import utc_now
from .files_assets import build_files_assets
from .io_manager import DailyFilesIOManager
from .location import source_resource_key
from .resources import SourceDatabase, Warehouse, WatermarkStore


def build_definitions(
    settings: Settings,
    clock: Clock = utc_now,
    *,
    spec: TableSpec = ORDERS,
    module: str = DEFINITIONS_MODULE,
) -> Definitions:
    """Everything Dagster needs for one declared table, from plain settings (tests build
    their own) and the one clock every asset, check and sensor reads (tests pass a fixed
    one). ``module`` is the code location the printed repair commands name."""
    names = spec.names
    table = TableSettings(settings, spec, module)
    resources, keys = _resources(settings, spec)
    table_asset = build_table_asset(table, keys, clock)
    files_assets = {
        f.name: build_files_assets(table, f, table_asset, keys, clock) for f in spec.daily_files
    }

    load_job = define_asset_job(
        names.load_job,
        selection=AssetSelection.assets(names.asset),
        description=f"The incremental load of {spec.name} (give start/end config for a range).",
    )
    files_jobs = _files_jobs(spec, files_assets)
    every_file = [a for built in files_assets.values() for a in built]
    jobs = [load_job, *files_jobs.values()]
    schedules = []
    if every_file:  # nothing to build daily without day files: new_N_sensor loads
        daily_job = define_asset_job(
            names.daily_job,
            selection=AssetSelection.assets(table_asset.key, *(a.key for a in every_file)),
            description=f"Load {spec.name}, then build the day files and totals of one day.",
        )
        jobs.append(daily_job)
        schedules.append(build_daily_schedule(settings, daily_job, spec))
    return Definitions(
        # every job, the implicit one of a UI backfill included; None: Dagster's default
        executor=_executor(settings),
        assets=[table_asset, *every_file],
        jobs=jobs,
        schedules=schedules,
        sensors=_sensors(settings, load_job, files_jobs, clock, spec=spec, keys=keys),
        resources=resources,
    )


def _files_jobs(spec: TableSpec, files_assets: dict[str, list]) -> dict[str, Any]:
    """The job rebuilding each daily file set (and its totals), by file set name."""
    names = spec.names
    return {
        f.name: define_asset_job(
            names.files[f.name].job,
            selection=AssetSelection.assets(*(a.key for a in files_assets[f.name])),
            description="Rebuild the day files and totals of a day or a range of days."
            + ("" if len(spec.daily_files) == 1 else f" ({f.name})"),
        )
        for f in spec.daily_files
    }


def _sensors(
    settings: Settings,
    load_job,
    files_jobs: dict[str, Any],
    clock: Clock,
    *,
    spec: TableSpec,
    keys: TableResources,
) -> list:
    """``new_N_sensor`` and each file set's ``F_refresh_sensor``."""
    return [
        build_new_rows_sensor(
            settings,
            load_job,
            clock,
            spec=spec,
            source_key=keys.source,
            watermark_key=keys.watermark,
        ),
        *(
            build_refresh_sensor(settings, files_jobs[f.name], clock, spec=spec, files=f)
            for f in spec.daily_files
        ),
    ]


def _resources(settings: Settings, spec: TableSpec) -> tuple[dict[str, Any], TableResources]:
    """The resources of one table, by key, and the keys its assets use.

    Dagster merges the Definitions of several declarations only when a key shared by two
    of them holds the same object, so each is built once per process (:func:`_shared`)
    from its configuration; what a table has of its own gets a key of its own."""
    source_url = (
        EnvVar("SOURCE_DATABASE_URL") if settings.source_url_from_env else settings.source_url
    )
    if spec.source_url is not None:
        source_url = spec.source_url
    warehouse_url = (
        EnvVar("WAREHOUSE_DATABASE_URL")
        if settings.warehouse_url_from_env
        else settings.warehouse_url
    )
    warehouse = _shared(Warehouse(url=warehouse_url))
    lookback = settings.lookback_days if spec.lookback_days is None else spec.lookback_days
    own_lookback = spec.lookback_days is not None and spec.lookback_days != settings.lookback_days
    keys = TableResources(
        source=source_resource_key(spec),
        watermark=f"watermark_{spec.name}" if own_lookback else "watermark",
        files={f.name: _files_key(settings, spec, f) for f in spec.daily_files},
    )
    resources: dict[str, Any] = {
        keys.source: _shared(SourceDatabase(url=source_url)),
        keys.warehouse: warehouse,
        keys.watermark: _shared(WatermarkStore(warehouse=warehouse, lookback_days=lookback)),
    }
    for f in spec.daily_files:
        key = keys.files[f.name]
        resources[key] = _shared(
            DailyFilesIOManager(base_dir=str(settings.data_dir))
            if key == "day_files"
            else DailyFilesIOManager(url=files_location(settings, spec, f))
        )
    return resources, keys


def _files_key(settings: Settings, spec: TableSpec, files) -> str:
    """``day_files`` (``<PIPELINE_DATA_DIR>/<F>``, shared) or ``day_files_<F>``."""
    default = str(settings.data_dir / files.name)
    return (
        "day_files"
        if files_location(settings, spec, files) == default
        else f"day_files_{files.name}"
    )


_BUILT: dict[tuple[str, str, str], Any] = {}


def _shared(resource):
    """The one object of this configuration in this process (Dagster's merge compares
    resources by identity). A URL read from a variable (EnvVar) is not the same
    configuration as that text given as the URL itself."""
    url_kind = type(getattr(resource, "url", None)).__name__
    return _BUILT.setdefault((type(resource).__qualname__, repr(resource), url_kind), resource)


_EXECUTORS: dict[tuple[str, str], Callable] = {}


def _executor(settings: Settings):
    """None (Dagster's default: a process per step), Dagster's in-process executor (every
    step in the run's own process), or the Celery executor: one object per broker and
    backend in this process, so the Definitions of several declarations merge."""
    if settings.executor == "in_process":
        return in_process_executor
    if settings.executor != "celery":
        return None
    try:
        from .celery_executor import build_celery_executor
    except ImportError as exc:
        raise SettingsError(
            f"PIPELINE_EXECUTOR=celery needs the celery extra ({exc.name} is missing): "
            "pip install 'pipeline_assets[celery]'"
        ) from None
    key = (settings.celery_broker_url, settings.celery_backend_url)
    if key not in _EXECUTORS:
        _EXECUTORS[key] = build_celery_executor(settings)
    return _EXECUTORS[key]


defs = build_definitions(settings_module.from_env())
