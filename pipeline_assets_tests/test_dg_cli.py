"""The ``dg`` CLI on the same code location: ``dg check defs`` and a ``dg launch`` of a range.

``pyproject.toml``'s ``[tool.dg]`` makes the checkout a dg project whose code location is
``pipeline_assets.definitions`` (the one ``dagster`` loads). dg reads that file from the
working directory, so the commands run in the checkout; everything they write goes to
``DAGSTER_HOME`` and ``PIPELINE_DATA_DIR`` under tmp_path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline_assets import demo
from pipeline_assets.core.daily_files import read_committed_day
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.times import UTC
from pipeline_assets_tests.orders import load_orders

from .conftest import NOW
from .support import RUNS_IN_PROCESS

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent


def dg(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PIPELINE_", "SOURCE_DATABASE", "WAREHOUSE_DATABASE"))
    }
    env |= {
        "DAGSTER_HOME": str(tmp_path / "home"),
        "PIPELINE_DATA_DIR": str(tmp_path / "data"),
        "VIRTUAL_ENV": str(BIN.parent),
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        **RUNS_IN_PROCESS,
    }
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return subprocess.run(
        [str(BIN / "dg"), *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def test_dg_check_defs_loads_the_code_location(tmp_path):
    done = dg(tmp_path, "check", "defs")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "All definitions loaded successfully" in done.stdout + done.stderr


def test_dg_launch_builds_a_partition_range_in_one_run(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    source = make_engine(f"sqlite:///{data / 'app.db'}", role="app")
    warehouse = make_engine(f"sqlite:///{data / 'warehouse.db'}", role="warehouse")
    demo.init(source)  # orders 101-106 on the chapter's calendar
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    source.dispose()
    warehouse.dispose()

    done = dg(
        tmp_path,
        "launch",
        "--assets",
        "paid_orders,daily_revenue",
        "--partition-range",
        "2026-01-14...2026-01-16",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    folder = data / "paid_orders"
    manifests = [json.loads(p.read_text()) for p in folder.glob("_manifest_*.json")]
    assert [m["days_written"] for m in manifests] == [
        ["2026-01-14", "2026-01-15", "2026-01-16"]
    ]  # one run
    assert [r["order_id"] for r in read_committed_day(folder, "2026-01-15")] == [104]
    assert read_committed_day(folder, "2026-01-14") == []
