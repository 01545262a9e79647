"""Dagster resources: thin handles on the databases and the watermark store."""

from __future__ import annotations

from functools import lru_cache

from dagster import ConfigurableResource
from pydantic import Field
from sqlalchemy.engine import Engine

from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.warehouse import watermark as wm


@lru_cache(maxsize=16)
def _engine(url: str, role: str) -> Engine:
    # One engine (and pool) per URL per process, however many times a resource is built.
    return make_engine(url, role=role)


class SourceDatabase(ConfigurableResource):
    """The app database holding a declared table (``orders``). The pipeline only ever
    reads it."""

    url: str = Field(description="SQLAlchemy URL (SOURCE_DATABASE_URL)")

    def engine(self) -> Engine:
        return _engine(self.url, "source")


class Warehouse(ConfigurableResource):
    """The target database: the declared tables, the batch ledger and the watermarks."""

    url: str = Field(description="SQLAlchemy URL (WAREHOUSE_DATABASE_URL)")

    def engine(self) -> Engine:
        return _engine(self.url, "warehouse")


class WatermarkStore(ConfigurableResource):
    """Where the incremental load of each table resumes: its watermark, kept in the
    warehouse database (one per declared table, by its name).

    It moves forward only with a committed load, never with a backfill; ``lookback_days``
    is how far before it each incremental read starts again.
    """

    warehouse: Warehouse
    lookback_days: int = Field(default=2, ge=0, description="LOOKBACK_DAYS")

    def current(self, table: str):
        """The watermark of the declared table ``table`` (its ``name``)."""
        return wm.current(self.warehouse.engine(), table=table)
