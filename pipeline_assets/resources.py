"""Dagster resources: thin handles on the databases and the watermark store."""

from __future__ import annotations

from functools import lru_cache

from dagster import ConfigurableResource
from pydantic import Field
from sqlalchemy.engine import Engine

from .core import watermark as wm
from .core.db import make_engine


@lru_cache(maxsize=16)
def _engine(url: str, role: str) -> Engine:
    # One engine (and pool) per URL per process, however many times a resource is built.
    return make_engine(url, role=role)


class SourceDatabase(ConfigurableResource):
    """The app database holding ``orders``. The pipeline only ever reads it."""

    url: str = Field(description="SQLAlchemy URL (SOURCE_DATABASE_URL)")

    def engine(self) -> Engine:
        return _engine(self.url, "source")


class Warehouse(ConfigurableResource):
    """The target database: the ``orders`` table, the batch ledger and the watermark."""

    url: str = Field(description="SQLAlchemy URL (WAREHOUSE_DATABASE_URL)")

    def engine(self) -> Engine:
        return _engine(self.url, "warehouse")


class WatermarkStore(ConfigurableResource):
    """Where the incremental load resumes: the watermark, kept in the warehouse database.

    It moves forward only with a committed load, never with a backfill; ``lookback_days``
    is how far before it each incremental read starts again.
    """

    warehouse: Warehouse
    lookback_days: int = Field(default=2, ge=0, description="LOOKBACK_DAYS")

    def current(self):
        return wm.current(self.warehouse.engine())
