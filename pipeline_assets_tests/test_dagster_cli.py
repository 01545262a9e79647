"""The real ``dagster`` command line, as a user types it, in a subprocess.

Includes a run killed with SIGKILL right after its commit (the lost acknowledgement,
for real): the rerun must store nothing twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from upath import UPath

from pipeline_assets import demo
from pipeline_assets.core.crash import POINTS
from pipeline_assets.core.daily_files import (
    UncommittedDayError,
    describe_days,
    read_committed_day,
    write_day_files,
)
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, to_instant
from pipeline_assets.core.verify import verify
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets_tests.orders import load_orders, paid_orders_by_day

from .conftest import NOW
from .killed import run as killed_run
from .stores import all_files, temp_files
from .support import RUNS_IN_PROCESS, database_urls

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent


def _workdir(tmp_path: Path, db_urls: dict, paid_orders_url: str | None = None):
    (tmp_path / "home").mkdir()
    (tmp_path / "data").mkdir()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "PIPELINE_DATA_DIR": str(tmp_path / "data"),
        "SOURCE_DATABASE_URL": db_urls["source"],
        "WAREHOUSE_DATABASE_URL": db_urls["warehouse"],
        **RUNS_IN_PROCESS,
    }
    for key in (
        "PIPELINE_CRASH_AT",
        "PIPELINE_CRASH_MODE",
        "PIPELINE_CRASH_ONCE_FILE",
        "PAID_ORDERS_URL",
    ):
        env.pop(key, None)
    if paid_orders_url:
        env["PAID_ORDERS_URL"] = paid_orders_url
    source = make_engine(db_urls["source"], role="app")
    warehouse = make_engine(db_urls["warehouse"], role="warehouse")
    demo.init(source)
    yield tmp_path, env, source, warehouse
    source.dispose()
    warehouse.dispose()


@pytest.fixture
def workdir(tmp_path: Path, db_urls):
    yield from _workdir(tmp_path, db_urls)


@pytest.fixture(
    params=[
        "local-sqlite",
        pytest.param("local-postgresql", marks=pytest.mark.postgres),
        pytest.param("s3-sqlite", marks=pytest.mark.s3),
    ]
)
def files_workdir(request, tmp_path: Path):
    """``workdir`` plus the folder of the day files: local (SQLite or PostgreSQL databases)
    or a bucket on the test S3 server (PAID_ORDERS_URL)."""
    yield from _files_workdir(request, tmp_path, request.param)


@pytest.fixture(params=["local-sqlite", pytest.param("s3-sqlite", marks=pytest.mark.s3)])
def file_store_workdir(request, tmp_path: Path):
    """``files_workdir`` on each store of the day files. The warehouse is only read while
    the files are written, so its backend adds nothing to a kill of the file writer: the
    PostgreSQL warehouse is covered by the range run above and by the load's kills."""
    yield from _files_workdir(request, tmp_path, request.param)


def _files_workdir(request, tmp_path: Path, param: str):
    store, backend = param.split("-")
    urls = database_urls(backend, tmp_path, request)
    url = request.getfixturevalue("bucket") + "/paid_orders" if store == "s3" else None
    for tmp_path_, env, source, warehouse in _workdir(tmp_path, urls, url):
        folder = UPath(url) if url else built(tmp_path_)
        yield tmp_path_, env, source, warehouse, folder


def dagster(env, cwd, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "dagster"), "asset", "materialize", "-m", "pipeline_assets.definitions", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def count(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM orders")).scalar()


def test_materialize_orders_from_the_command_line(workdir):
    tmp_path, env, source, warehouse = workdir
    done = dagster(env, tmp_path, "--select", "orders")
    assert done.returncode == 0, done.stderr[-2000:]
    assert count(warehouse) == 6
    assert wm.current(warehouse, table=ORDERS.name) == to_instant("2026-01-21", UTC)


def test_a_run_killed_after_its_commit_is_rerun_without_doubles(workdir):
    tmp_path, env, source, warehouse = workdir
    assert dagster(env, tmp_path, "--select", "orders").returncode == 0
    demo.set_order(source, 105, status="paid", amount="22.00", updated_at="2026-01-25", tz=UTC)
    demo.set_order(source, 186, status="paid", amount="30.00", updated_at="2026-01-24", tz=UTC)

    # the default executor: the step in a process of its own, which the kill takes
    crash_env = {**env, "PIPELINE_CRASH_AT": "load_after_commit", "PIPELINE_EXECUTOR": "default"}
    killed = subprocess.run(
        [
            str(BIN / "dagster"),
            "asset",
            "materialize",
            "-m",
            "pipeline_assets.definitions",
            "--select",
            "orders",
        ],
        cwd=tmp_path,
        env=crash_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # the step's process was killed (SIGKILL): the run fails, as after a lost pod
    assert killed.returncode != 0 and "Materialization failed" in killed.stderr
    assert count(warehouse) == 7  # the commit had landed before the kill
    assert wm.current(warehouse, table=ORDERS.name) == to_instant("2026-01-25", UTC)

    rerun = dagster(env, tmp_path, "--select", "orders")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    with warehouse.connect() as conn:
        rows = conn.execute(sa.text("SELECT order_id FROM orders")).scalars().all()
    assert sorted(rows) == [101, 102, 103, 104, 105, 106, 186]
    assert wm.current(warehouse, table=ORDERS.name) == to_instant("2026-01-25", UTC)


def built(tmp_path: Path) -> Path:
    return tmp_path / "data" / "paid_orders"


RANGE_ARGS = (
    "--select",
    "paid_orders,daily_revenue",
    "--partition-range",
    "2026-01-20...2026-01-25",
)
DAYS = ["2026-01-20", "2026-01-21", "2026-01-22", "2026-01-23", "2026-01-24", "2026-01-25"]


def test_a_partition_range_from_the_command_line_is_one_run(files_workdir):
    tmp_path, env, source, warehouse, folder = files_workdir
    demo.set_order(source, 186, status="paid", amount="30.00", updated_at="2026-01-24", tz=UTC)
    assert dagster(env, tmp_path, "--select", "orders").returncode == 0
    mark = wm.current(warehouse, table=ORDERS.name)

    done = dagster(env, tmp_path, *RANGE_ARGS)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.stem for p in folder.glob("2026-*.json")) == DAYS
    (manifest,) = [json.loads(p.read_text()) for p in folder.glob("_manifest_*.json")]
    assert manifest["days_written"] == DAYS
    assert manifest["files"]["2026-01-24"]["rows"] == 1
    assert read_committed_day(folder, "2026-01-24")[0]["order_id"] == 186
    assert wm.current(warehouse, table=ORDERS.name) == mark


def load_and_build(source, warehouse, folder: Path, run_id: str) -> None:
    """What `orders` then `paid_orders` over DAYS do, through the core (fast set-up)."""
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    write_day_files(
        folder,
        paid_orders_by_day(warehouse, DAYS, UTC),
        run_id=run_id,
        written_at=NOW,
        watermark=wm.current(warehouse, table=ORDERS.name),
        spec=ORDERS,
    )


# What a SIGKILL at each file point leaves (core/daily_files/'s docstring, the reader
# protocol's "What a crash leaves behind"), for the two days the range changes: the 21st
# gets a new amount, the 23rd a new order. "old": still committed at the previous version;
# "uncommitted": new bytes that no manifest vouches for; "new": committed at the new
# version. And whether the killed writer's temp file is left for the next write to clear
# (on local disk; an object store never has one).
KILLED_AT = {
    "day_file_before_rename": ("old", True),  # the first day file's temp, not yet renamed
    "files_between_days": ("old", False),  # only the 20th (identical bytes) replaced
    "files_before_manifest": ("uncommitted", False),
    "manifest_before_rename": ("uncommitted", True),
    "files_after_manifest": ("new", False),  # the unfinished run's head vouches for them
    "files_after_pointers": ("new", False),
}
CHANGED = {
    "2026-01-21": {"old": [("18.20", 106)], "new": [("99.00", 106)]},
    "2026-01-23": {"old": [], "new": [("1.00", 187)]},
}


def test_every_file_crash_point_is_killed_for_real():
    """Each file crash point of core/crash.py has its SIGKILL case below."""
    assert set(KILLED_AT) == {p for p in POINTS if not p.startswith("load_")}


# The point killed in a real `dagster asset materialize` run (the IO manager's own write);
# every point, that one too, is killed in a process that runs the writer alone (.killed)
THROUGH_DAGSTER = "files_before_manifest"


def write_range(env: dict, folder, point: str | None, via_dagster: bool, run_id: str):
    """The range's write of DAYS: a Dagster run of paid_orders, or the writer alone in a
    process of its own; killed at ``point`` (None: runs through)."""
    if point is not None:
        env = {**env, "PIPELINE_CRASH_AT": point}
    if via_dagster:
        return dagster(env, env["PIPELINE_DATA_DIR"], *RANGE_ARGS)
    return killed_run(
        "files", env["WAREHOUSE_DATABASE_URL"], str(folder), DAYS[0], DAYS[-1], run_id, env=env
    )


@pytest.mark.parametrize(
    "point, via_dagster",
    [(point, False) for point in sorted(KILLED_AT)] + [(THROUGH_DAGSTER, True)],
    ids=[*sorted(KILLED_AT), f"{THROUGH_DAGSTER}-through-dagster"],
)
def test_a_range_killed_midway_leaves_no_half_file_and_a_rerun_repairs(
    file_store_workdir, point, via_dagster
):
    """SIGKILL at each crash point of the file write, on local disk and on the bucket."""
    tmp_path, env, source, warehouse, folder = file_store_workdir
    load_and_build(source, warehouse, folder, "setup")  # committed once
    demo.set_order(source, 106, status="paid", amount="99.00", updated_at="2026-01-21", tz=UTC)
    demo.set_order(source, 187, status="paid", amount="1.00", updated_at="2026-01-23", tz=UTC)
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)

    killed = write_range(env, folder, point, via_dagster, "killed")
    assert killed.returncode != 0
    for path in folder.glob("2026-*.json"):
        json.loads(path.read_bytes())  # every day file parses: old or new, never half
    statuses = {s.day: s for s in describe_days(str(folder), DAYS)}
    version, temp_left = KILLED_AT[point]
    on_bucket = isinstance(folder, UPath)
    for day, versions in CHANGED.items():  # never both new and committed before the manifest
        if version == "uncommitted":
            assert not statuses[day].committed, day
            with pytest.raises(UncommittedDayError, match=day):
                # a killed writer's head says "writing": on the bucket, do not wait for it
                read_committed_day(folder, day, wait_for_writer=0.5)
        else:
            assert [
                (r["amount"], r["order_id"]) for r in read_committed_day(folder, day)
            ] == versions[version], day
    changed = statuses["2026-01-21"]
    if point.startswith("files_after"):  # the manifest landed: the new version is committed
        assert read_committed_day(folder, "2026-01-21")[0]["amount"] == "99.00"
    elif changed.committed:
        assert read_committed_day(folder, "2026-01-21")[0]["amount"] == "18.20"  # old version
    assert statuses["2026-01-22"].committed  # unchanged bytes stay committed
    leftovers = temp_files(folder)
    assert bool(leftovers) == (temp_left and not on_bucket), leftovers
    report = verify(source, warehouse, folder, tz=UTC, spec=ORDERS)
    if not changed.committed:  # verify reports the uncommitted day, with its repair
        assert report.exit_code == 1 and "2026-01-21" in report.failing_days
        assert any("--partition" in c for c in report.to_json()["repair"])
    if version == "new":
        assert report.exit_code == 0, report.lines()
    else:  # the old version differs from the warehouse; new bytes are uncommitted
        assert report.exit_code == 1
        assert report.failing_days == ["2026-01-21", "2026-01-23"]

    rerun = write_range(env, folder, None, via_dagster, "rerun")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert temp_files(folder) == []  # ...and the rerun cleared it
    assert all(s.committed for s in describe_days(str(folder), DAYS))
    assert read_committed_day(folder, "2026-01-21")[0]["amount"] == "99.00"
    assert [r["order_id"] for r in read_committed_day(folder, "2026-01-23")] == [187]
    assert verify(source, warehouse, folder, tz=UTC, spec=ORDERS).exit_code == 0


@pytest.mark.s3
def test_a_range_backfill_to_the_bucket_reads_back_byte_for_byte(tmp_path, bucket):
    """The real ``dagster asset materialize --partition-range`` with PAID_ORDERS_URL on the
    bucket: one run, one manifest, and every object equal, byte for byte, to the file the
    same backfill writes to a local folder; the rows are the warehouse's paid orders."""
    urls = {
        "source": f"sqlite:///{tmp_path / 'app.db'}",
        "warehouse": f"sqlite:///{tmp_path / 'warehouse.db'}",
    }
    url = f"{bucket}/paid_orders"
    for _, env, source, warehouse in _workdir(tmp_path, urls, url):
        demo.set_order(source, 186, status="paid", amount="30.00", updated_at="2026-01-24", tz=UTC)
        assert dagster(env, tmp_path, "--select", "orders").returncode == 0
        done = dagster(env, tmp_path, *RANGE_ARGS)
        assert done.returncode == 0, done.stderr[-2000:]
        local = {k: v for k, v in env.items() if k != "PAID_ORDERS_URL"}
        assert dagster(local, tmp_path, *RANGE_ARGS).returncode == 0

        on_bucket, on_disk = all_files(UPath(url)), all_files(built(tmp_path))
        days = [f"{day}.json" for day in DAYS]
        assert sorted(n for n in on_bucket if n.startswith("2026-")) == days
        assert {n: on_bucket[n] for n in days} == {n: on_disk[n] for n in days}
        [manifest] = [json.loads(v) for n, v in on_bucket.items() if n.startswith("_manifest_")]
        assert manifest["days_written"] == DAYS
        with warehouse.connect() as conn:
            paid = conn.execute(
                sa.text("SELECT order_id, updated_at FROM orders WHERE status = 'paid'")
            ).all()
        for day in DAYS:
            want = sorted(oid for oid, at in paid if str(at).startswith(day))
            assert [r["order_id"] for r in json.loads(on_bucket[f"{day}.json"])] == want
            assert read_committed_day(url, day) == json.loads(on_bucket[f"{day}.json"])
