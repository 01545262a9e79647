"""A real ``dagster dev`` (webserver + daemon), driven over its GraphQL endpoint.

The server runs in its own process group, on 127.0.0.1 and a free port, with its
``DAGSTER_HOME`` and data under tmp_path, and is stopped by killing that group; the
test then checks that no process of it is left. With the sensors running by default:

1. the first load happens by itself, and its days are rebuilt by themselves;
2. meanwhile a partition-range backfill of paid_orders + daily_revenue, launched over
   GraphQL, writes its days and exactly one new manifest, and leaves the watermark alone;
3. once nothing runs, a late order added with the real CLI reaches its day file by
   itself; the time from ``demo set`` to the committed file is printed (``pytest -s``
   shows it) and recorded as the test property ``demo_set_to_day_file_seconds``.

Every wait polls with a deadline; none sleeps blindly.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from pipeline_assets import demo
from pipeline_assets.core.days import days_between
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.sensing import read_watermark
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, parse_day, to_instant

from .devserver import (
    BACKFILL_STATUS,
    BIN,
    LAUNCH_BACKFILL,
    DevServer,
    backfill_runs_done,
    committed_ids,
    idle,
    location_loaded,
    manifests,
    running,
    runs,
    start_dagster_dev,
)

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("stack-1")]
FIRST_LOAD_DAYS = [
    "2026-01-03",
    "2026-01-08",
    "2026-01-12",
    "2026-01-15",
    "2026-01-19",
    "2026-01-21",
]


@pytest.fixture
def dev_server(tmp_path: Path):
    (tmp_path / "data").mkdir()
    source = make_engine(f"sqlite:///{tmp_path / 'data' / 'app.db'}", role="app")
    demo.init(source)
    source.dispose()
    with running(start_dagster_dev(tmp_path)) as server:
        yield server


def test_dagster_dev_backfill_and_sensors(dev_server: DevServer, record_property):
    server = dev_server
    started = time.monotonic()
    warehouse = make_engine(f"sqlite:///{server.data / 'warehouse.db'}", role="warehouse")
    try:
        server.wait(
            "code location loaded over GraphQL",
            lambda: location_loaded(server),
            90,
            no_failed_runs=False,
        )

        # 1. the first load happens by itself (the sensor's first tick)
        server.wait(
            "first automatic load (watermark 2026-01-21)",
            lambda: read_watermark(warehouse, spec=ORDERS) == to_instant("2026-01-21", UTC),
            90,
        )

        # 2. meanwhile, a partition-range backfill over GraphQL, of days the first load's
        # refresh does not touch (after the 21st: empty days so far, the 24th included)
        watermark = read_watermark(warehouse, spec=ORDERS)
        before = manifests(server.data)
        days = days_between(parse_day("2026-01-22"), parse_day("2026-01-31"))
        launched = server.graphql(
            LAUNCH_BACKFILL,
            {
                "params": {
                    "assetSelection": [{"path": ["paid_orders"]}, {"path": ["daily_revenue"]}],
                    "partitionNames": days,
                }
            },
        )["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched

        def backfill_status() -> str:
            status = server.graphql(BACKFILL_STATUS, {"id": launched["backfillId"]})
            status = status["partitionBackfillOrError"]["status"]
            assert status not in ("FAILED", "COMPLETED_FAILED", "CANCELED"), status
            return status

        server.wait(
            "the first load's days rebuilt by the refresh sensor",
            lambda: all(committed_ids(server.data, d) is not None for d in FIRST_LOAD_DAYS),
            300,
        )
        server.wait(
            "the backfill's run done",
            lambda: backfill_runs_done(server, launched["backfillId"]),
            120,
            every=1,
        )
        server.wait("no run in progress", lambda: idle(server), 60)

        assert {day: committed_ids(server.data, day) for day in days} == {day: [] for day in days}
        new = {name: m for name, m in manifests(server.data).items() if name not in before}
        listing = [m for m in new.values() if set(m["days_written"]) & set(days)]
        assert len(listing) == 1 and listing[0]["days_written"] == days  # one run
        assert read_watermark(warehouse, spec=ORDERS) == watermark  # a backfill never moves it
        assert committed_ids(server.data, "2026-01-21") == [106]
        reasons = {
            tag["value"]
            for run in runs(server)
            for tag in run["tags"]
            if tag["key"] == "pipeline_assets/reason"
        }
        assert reasons == {"new_orders_sensor", "paid_orders_refresh_sensor"}
        # the load itself was no news to the sensor: one load, not two
        assert sum(run["jobName"] == "orders_job" for run in runs(server)) == 1

        # 3. a late order, added as the app would, reaches its day file by itself
        assert committed_ids(server.data, "2026-01-24") == []  # built empty by the backfill
        set_at = time.monotonic()
        done = subprocess.run(
            [
                str(BIN / "pipeline-assets"),
                "demo",
                "set",
                "186",
                "--status",
                "paid",
                "--amount",
                "30.00",
                "--updated-at",
                "2026-01-24",
            ],
            env=server.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        server.wait(
            "order 186 in the committed paid_orders/2026-01-24.json",
            lambda: committed_ids(server.data, "2026-01-24") == [186],
            180,
        )
        elapsed = time.monotonic() - set_at
        message = (
            f"demo set 186 -> committed paid_orders/2026-01-24.json: {elapsed:.1f} s "
            f"(whole test so far {time.monotonic() - started:.0f} s)"
        )
        print(message)
        print(
            "phases (s since start): "
            + ", ".join(f"{what} {at:.0f}" for what, at in server.phases.items())
        )
        record_property("demo_set_to_day_file_seconds", round(elapsed, 1))
        assert read_watermark(warehouse, spec=ORDERS) == to_instant(
            "2026-01-24", UTC
        )  # a load moved it
        server.wait(
            "backfill completed",
            lambda: backfill_status() in ("COMPLETED", "COMPLETED_SUCCESS"),
            60,
            every=1,
        )
        # the day file is committed before the run's daily_revenue step ends: let it end
        server.wait("no run in progress at the end", lambda: idle(server), 60)
        assert sum(run["jobName"] == "orders_job" for run in runs(server)) == 2
    finally:
        warehouse.dispose()
