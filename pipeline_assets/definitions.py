"""The code location: ``defs``, built from the environment when Dagster loads this module."""

from __future__ import annotations

from dagster import AssetSelection, Definitions, EnvVar, define_asset_job

from . import settings as settings_module
from .assets import build_orders_asset
from .resources import SourceDatabase, Warehouse, WatermarkStore
from .settings import Settings


def build_definitions(settings: Settings) -> Definitions:
    """Everything Dagster needs, from plain settings (tests build their own)."""
    source_url = EnvVar("SOURCE_DATABASE_URL") if settings.source_url_from_env \
        else settings.source_url
    warehouse_url = EnvVar("WAREHOUSE_DATABASE_URL") if settings.warehouse_url_from_env \
        else settings.warehouse_url
    warehouse = Warehouse(url=warehouse_url)
    orders_job = define_asset_job(
        "orders_job", selection=AssetSelection.assets("orders"),
        description="The incremental load of orders (give start/end config for a range).",
    )
    return Definitions(
        assets=[build_orders_asset(settings)],
        jobs=[orders_job],
        resources={
            "source": SourceDatabase(url=source_url),
            "warehouse": warehouse,
            "watermark": WatermarkStore(warehouse=warehouse, lookback_days=settings.lookback_days),
        },
    )


defs = build_definitions(settings_module.from_env())
