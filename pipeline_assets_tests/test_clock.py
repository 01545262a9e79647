"""The Dagster layer reads one clock, given to ``build_definitions`` like the core's ``now``.

With a fixed clock every time the pipeline records comes from it: the watermark history
and the batch ledger of a load, and the ``written_at`` of a manifest.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import sqlalchemy as sa
from dagster import AssetKey, DagsterInstance

from pipeline_assets import demo
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.times import canonical
from pipeline_assets.definitions import build_definitions
from pipeline_assets.settings import from_env

FIXED = datetime(2026, 1, 27, 6, 30, 15, tzinfo=timezone.utc)


def test_every_recorded_time_comes_from_the_given_clock(tmp_path):
    (tmp_path / "data").mkdir()
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    source = make_engine(settings.source_url, role="app")
    warehouse = make_engine(settings.warehouse_url, role="warehouse")
    demo.init(source)
    defs = build_definitions(settings, clock=lambda: FIXED)
    try:
        with DagsterInstance.ephemeral() as instance:
            loaded = defs.resolve_job_def("orders_job").execute_in_process(instance=instance)
            assert loaded.success

            built = defs.resolve_job_def("daily_files_job").execute_in_process(
                instance=instance,
                partition_key="2026-01-21",
                asset_selection=[AssetKey("paid_orders")],
            )
            assert built.success
        with warehouse.connect() as conn:
            assert conn.execute(
                sa.text("SELECT changed_at FROM pipeline_watermark_history")
            ).scalars().all() == [canonical(FIXED)]
            assert conn.execute(
                sa.text("SELECT committed_at FROM pipeline_batches")
            ).scalars().all() == [canonical(FIXED)]
        [manifest] = settings.paid_orders_dir.glob("_manifest_*.json")
        assert json.loads(manifest.read_text())["written_at"] == "2026-01-27T06:30:15+00:00"
    finally:
        source.dispose()
        warehouse.dispose()
