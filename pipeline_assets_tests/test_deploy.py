"""Beyond one machine, for real, on this machine.

1. A real ``dagster dev`` (webserver + daemon) with the instance of ``deploy/dagster.yaml``
   as shipped: run, event-log and schedule storage on PostgreSQL (a throw-away
   database, ``DAGSTER_POSTGRES_URL``), the run queue, the pool limit, run monitoring and
   retries. The source and the warehouse are PostgreSQL databases too, and the day files
   live in a bucket on the S3-compatible server the tests start (``PAID_ORDERS_URL``).
   The sensors load the source and rebuild the days it touched; a range backfill is
   launched over GraphQL; then files, manifests and the warehouse are checked against
   the source, computed here from the source rows (not by the code under test).
2. The multiprocess executor (each step its own process, what runs launched by the
   daemon use) gives the same day files and warehouse as in-process execution, for the
   daily job and a range backfill: nothing lives in process memory between steps.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import defaultdict
from datetime import date, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from pipeline_assets import demo
from pipeline_assets.core.daily_files import (
    MANIFEST_RE,
    DayFilesError,
    UncommittedDayError,
    describe_days,
    open_store,
    read_committed_day,
)
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.sensing import read_watermark
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, to_instant
from pipeline_assets.core.verify import verify

from .brokers import WORKER_SCRIPT
from .devserver import (
    CALLERS_SETTINGS,
    LAUNCH_BACKFILL,
    ROOT,
    DevServer,
    backfill_runs_done,
    idle,
    location_loaded,
    running,
    runs,
    start_dagster_dev,
)
from .plain import source_rows
from .stores import SECRET, all_files
from .worlds import (
    BACKFILL,
    CALLERS,
    DAILY,
    demo_world,
    execute_job,
    in_process,
    psycopg2_url,
    warehouse_tables,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.postgres,
    pytest.mark.s3,
    pytest.mark.xdist_group("stack-1"),
]
JANUARY = [(date(2026, 1, 1) + timedelta(days=n)).isoformat() for n in range(31)]
# the source: orders 105 (paid on the 20th) and 106 (paid on the 21st), so the first load
# touches two consecutive days and the refresh sensor rebuilds them in one run (runs
# wait for the pool one after the other; each starts its step processes: keep them few)
TOUCHED = ["2026-01-20", "2026-01-21"]


def paid_by_day(rows: list[tuple]) -> dict[str, list[tuple[int, str]]]:
    """The oracle: per UTC day, the paid orders' (id, amount), from the source rows (the
    demo's timestamps are UTC dates or timestamps, so the day is their first ten chars)."""
    out = defaultdict(list)
    for order_id, status, amount, updated_at in rows:
        if status == "paid":
            out[updated_at[:10]].append((order_id, amount))
    return {day: sorted(ids) for day, ids in out.items()}


def committed(url: str, day: str) -> list[dict] | None:
    try:
        return read_committed_day(url, day, wait_for_writer=False)
    except (UncommittedDayError, DayFilesError):
        return None


@pytest.fixture
def deployed(tmp_path: Path, postgres, bucket):
    urls = {
        "source": postgres.url("source"),
        "warehouse": postgres.url("warehouse"),
        "instance": postgres.url("instance"),
    }
    source = make_engine(urls["source"], role="app")
    demo.init(source)
    with source.begin() as conn:
        conn.execute(sa.text("DELETE FROM orders WHERE order_id NOT IN (105, 106)"))
    demo.set_order(source, 105, status="paid", amount="22.00", updated_at="2026-01-20", tz=UTC)
    source.dispose()
    server = start_dagster_dev(
        tmp_path,
        instance=(ROOT / "deploy" / "dagster.yaml").read_text(),  # as shipped
        drop=CALLERS_SETTINGS + ("PAID_ORDERS", "DAGSTER_"),
        settings={
            "SOURCE_DATABASE_URL": urls["source"],
            "WAREHOUSE_DATABASE_URL": urls["warehouse"],
            "PAID_ORDERS_URL": f"{bucket}/paid_orders",
            "DAGSTER_POSTGRES_URL": psycopg2_url(urls["instance"]),
        },
    )
    server.urls = urls
    with running(server):
        yield server


LOGS = """
query ($runId: ID!) { logsForRun(runId: $runId) { __typename
    ... on EventConnection { events { __typename ... on MessageEvent { message } } } } }
"""


def test_postgres_instance_bucket_sensors_and_a_graphql_backfill(deployed: DevServer):
    server = deployed
    url = server.env["PAID_ORDERS_URL"]
    source = make_engine(server.urls["source"], role="app")
    warehouse = make_engine(server.urls["warehouse"], role="warehouse")
    instance_db = sa.create_engine(server.env["DAGSTER_POSTGRES_URL"])
    try:
        server.wait(
            "code location loaded over GraphQL",
            lambda: location_loaded(server),
            120,
            no_failed_runs=False,
        )
        # the sensors: the first load, then its days rebuilt in the bucket
        server.wait(
            "first automatic load (watermark 2026-01-21)",
            lambda: read_watermark(warehouse, spec=ORDERS) == to_instant("2026-01-21", UTC),
            600,
        )
        server.wait(
            "the first load's days rebuilt in the bucket by the refresh sensor",
            lambda: all(committed(url, d) is not None for d in TOUCHED),
            600,
        )

        # a range backfill of the whole of January, over GraphQL: one run
        launched = server.graphql(
            LAUNCH_BACKFILL,
            {
                "params": {
                    "assetSelection": [{"path": ["paid_orders"]}, {"path": ["daily_revenue"]}],
                    "partitionNames": JANUARY,
                }
            },
        )["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched

        server.wait(
            "the backfill's run done",
            lambda: backfill_runs_done(server, launched["backfillId"]),
            600,
            every=1,
        )
        server.wait("no run in progress", lambda: idle(server), 300)

        # files: every day of January committed in the bucket, equal to the source's
        expected = paid_by_day(source_rows(server.urls["source"]))
        for day in JANUARY:
            rows = committed(url, day)
            assert rows is not None, day
            assert [(r["order_id"], r["amount"]) for r in rows] == expected.get(day, []), day
        # manifests: the backfill wrote exactly one, listing every day; each pointer's
        # manifest records the sha256 of the object's bytes
        objects = all_files(open_store(url).path())
        manifests = {
            name: json.loads(data) for name, data in objects.items() if MANIFEST_RE.fullmatch(name)
        }
        listing_all = [m for m in manifests.values() if m["days_written"] == JANUARY]
        assert len(listing_all) == 1
        for status in describe_days(url, JANUARY):
            assert status.committed, status
            sha = hashlib.sha256(objects[f"{status.day}.json"]).hexdigest()
            assert manifests[status.manifest]["files"][status.day]["sha256"] == sha
        assert not any(name.endswith(".partial") for name in objects)
        # the warehouse equals the source, and verify agrees with the bucket
        with warehouse.connect() as conn:
            stored = conn.execute(sa.text("SELECT order_id, status, amount FROM orders"))
            assert sorted((r[0], r[1], str(r[2])) for r in stored) == [
                r[:3] for r in source_rows(server.urls["source"])
            ]
        assert verify(source, warehouse, url, tz=UTC, spec=ORDERS).ok

        # the instance: every run is in PostgreSQL, each step ran in its own process
        all_runs = runs(server)
        assert all_runs and {r["status"] for r in all_runs} == {"SUCCESS"}
        with instance_db.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM runs")).scalar() == len(all_runs)
            leaked = conn.execute(
                sa.text("SELECT count(*) FROM event_logs WHERE event LIKE :s"), {"s": f"%{SECRET}%"}
            ).scalar()
        assert leaked == 0  # the store's secret never reached an event
        for run in all_runs:
            events = server.graphql(LOGS, {"runId": run["runId"]})["logsForRun"]["events"]
            messages = [e.get("message") or "" for e in events]
            assert any("multiprocess executor" in m for m in messages), run["jobName"]
        assert SECRET not in server.log.read_text(errors="replace")
    finally:
        source.dispose()
        warehouse.dispose()
        instance_db.dispose()


# --- the multiprocess executor gives what in-process execution gives -----------------------


def test_the_multiprocess_executor_gives_the_same_files_and_warehouse(tmp_path, bucket):
    """The daily job (load, then the day's file and total) and a range backfill, run once
    in process and once with each step in its own process (the real ``dagster job
    execute``, files in the bucket): the same bytes in every day file, the same
    warehouse tables."""
    files, tables = in_process(tmp_path / "in_process")

    url = f"{bucket}/paid_orders"
    data = tmp_path / "separate" / "data"
    (tmp_path / "home").mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(CALLERS)}
    env |= demo_world(data, paid_orders_url=url) | {"DAGSTER_HOME": str(tmp_path / "home")}
    for job, tags in (DAILY, BACKFILL):
        done = execute_job(job, tags, env, tmp_path)
        assert "Executing steps using multiprocess executor" in done.stderr
        assert 'Launching subprocess for "paid_orders"' in done.stderr

    remote = all_files(open_store(url).path())
    assert len(files) == 26
    assert {name: data for name, data in remote.items() if name.startswith("2026-")} == files
    assert warehouse_tables(f"sqlite:///{data / 'warehouse.db'}") == tables


# --- the worker script serves a user's project too -------------------------------------------


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A user's project folder whose code location, ``shop.definitions``, says when it loads."""
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "definitions.py").write_text(
        'print("shop.definitions loaded", flush=True)\n'
    )
    return tmp_path


def _worker_script(folder: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    """``deploy/celery-worker.sh`` as shipped, from ``folder``, with this interpreter."""
    base = {k: v for k, v in os.environ.items() if k != "CELERY_WORKER_MODULE"}
    return subprocess.run(
        [str(WORKER_SCRIPT), *argv],
        cwd=folder,
        env=base | {"PYTHON": sys.executable} | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "argv, env",
    [
        (["-m", "shop.definitions"], {}),
        (["--module", "shop.definitions"], {}),
        ([], {"CELERY_WORKER_MODULE": "shop.definitions"}),
    ],
    ids=["-m", "--module", "variable"],
)
def test_the_worker_script_loads_the_code_location_it_is_named(shop, argv, env):
    """``celery worker --help`` loads the worker's app, and so the code location, without
    starting a worker: the user's module is the one loaded, from the folder the worker
    starts in, and the options after ``-m`` still reach ``celery worker``."""
    done = _worker_script(shop, *argv, "--help", **env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("shop.definitions loaded\n")
    assert "Usage: python -m celery worker" in done.stdout


def test_by_default_the_worker_loads_this_projects_code_location(shop):
    code = (
        "import sys, pipeline_assets.celery_worker as w; "
        "print(w.MODULE, 'pipeline_assets.definitions' in sys.modules, "
        "'shop.definitions' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "CELERY_WORKER_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=shop, env=env, capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout) == (0, "pipeline_assets.definitions True False\n"), (
        done.stderr[-3000:]
    )


@pytest.mark.parametrize(
    "argv, code, message",
    [
        (
            ["-m", "nosuch.definitions", "--help"],
            2,
            "ModuleNotFoundError: the code location nosuch.definitions (CELERY_WORKER_MODULE, or "
            "the worker script's -m) does not import: No module named 'nosuch'; start the worker "
            "in the project's root folder, or install the project in the worker's environment",
        ),
        (["-m"], 2, "celery-worker.sh: error: -m needs a module, such as -m shop.definitions"),
    ],
)
def test_a_code_location_that_does_not_import_stops_the_worker_at_start(shop, argv, code, message):
    done = _worker_script(shop, *argv)
    assert (done.returncode, done.stdout) == (code, "")
    assert done.stderr.rstrip().splitlines()[-1] == message
