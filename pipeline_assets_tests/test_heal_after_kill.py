"""Runs killed for real under a real ``dagster dev``: the pipeline heals by itself.

An app process (``app_writer.py``) writes new, updated, day-moving and late orders while
the test SIGKILLs, at random, the run workers and step workers of the instance's runs —
what a preempted pod or an OOM kill does. After the app stops, every load is killed
(the whole run, or its step worker) until one that reads all the writes has died too.
Then, with nothing done by hand, the test polls until

- the warehouse ``orders`` equal the source's (plain SQL on both, compared as values),
- every day file holds exactly that day's paid orders of the source (computed here,
  from the rules, not by the pipeline's code), and every day is committed,
- ``pipeline-assets verify --require-all`` exits 0,

and prints how long that took after the last kill (``pytest -s`` shows it; recorded as
the test property ``converged_after_last_kill_seconds``). It runs on SQLite with the
instance ``make dev`` uses (run retries on) and on PostgreSQL with run retries off: the
sensors must heal on their own.

``PIPELINE_HEAL_SEED`` picks the app's writes and the kills (default 1);
``PIPELINE_HEAL_WRITE_SECONDS`` how long the app writes (default 40).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter

from pipeline_assets.core.daily_files import DayFilesError, UncommittedDayError, read_committed_day

from . import app_writer
from .devserver import BIN, ROOT, DevServer, location_loaded, start_dagster_dev, stop
from .processes import LIVE, kill, pick, workers
from .stores import all_files
from .support import database_urls

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("stack-2")]
UTC = timezone.utc
SEED = int(os.environ.get("PIPELINE_HEAL_SEED", "1"))
WRITE_SECONDS = float(os.environ.get("PIPELINE_HEAL_WRITE_SECONDS", "40"))
CONVERGE_DEADLINE = 240.0  # generous: the bound in docs/guarantees.md is far below
DAY_FILE = re.compile(r"\d{4}-\d{2}-\d{2}\.json")
# --- the oracle: what the files and the warehouse must hold, from the source ------------


def instant(value) -> datetime:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    else:
        moment = datetime.fromisoformat(str(value))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def table(engine: sa.Engine) -> dict[int, tuple[str, Decimal, datetime]]:
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("orders"):
            return {}
        found = conn.execute(sa.text("SELECT order_id, status, amount, updated_at FROM orders"))
        return {int(i): (s, Decimal(str(a)), instant(u)) for i, s, a, u in found}


def expected_days(source_rows: dict, first: date, last: date) -> dict[str, list]:
    days: dict[str, list] = {}
    for order_id, (status, amount, at) in sorted(source_rows.items()):
        if status == "paid" and first <= at.date() <= last:
            days.setdefault(at.date().isoformat(), []).append((order_id, amount))
    return days


def file_rows(data: bytes | None) -> list | None:
    try:
        rows = json.loads(data)
    except (TypeError, ValueError):
        return None
    return [(row["order_id"], Decimal(row["amount"])) for row in rows]


def differences(
    source: sa.Engine, warehouse: sa.Engine, folder, first: date, last: date
) -> list[str]:
    """What still differs; empty once the pipeline has converged. ``folder`` is the
    ``paid_orders`` folder: a local ``Path`` or a bucket's ``UPath``."""
    src = table(source)
    out = []
    wh = table(warehouse)
    if wh != src:
        missing = sorted(set(src) - set(wh))
        stale = sorted(i for i in set(src) & set(wh) if src[i] != wh[i])
        out.append(
            f"warehouse: {len(missing)} missing {missing[:5]}, {len(stale)} stale {stale[:5]}"
        )
    want = expected_days(src, first, last)
    stored = {
        name[:-5]: data for name, data in all_files(folder).items() if DAY_FILE.fullmatch(name)
    }
    for day in sorted(set(want) | set(stored)):
        got = file_rows(stored.get(day))
        if got != want.get(day, []):
            out.append(
                f"{day}.json: {'missing' if got is None else f'{len(got)} rows'}, "
                f"source has {len(want.get(day, []))} paid"
            )
            continue
        try:
            read_committed_day(str(folder), day)
        except (UncommittedDayError, DayFilesError) as exc:
            out.append(f"{day}: not committed ({str(exc).splitlines()[0][:80]})")
    return out


# --- the killer -------------------------------------------------------------------------


def load_killer(
    instance: DagsterInstance,
    sessions: set[int],
    rng: random.Random,
    kills: list,
    stopped_at: datetime,
    celery: Callable[[], set[int]] = frozenset,
) -> Callable[[], bool]:
    """A probe that kills every live load it sees, and is true once it has killed one
    created after ``stopped_at`` (the app's last write): that load reads every write, and
    no later change will show, the trap of a cursor that advances on request. Half the
    time the whole run dies (a preempted pod: run worker and step workers at once), half
    the time only its step worker (an OOM kill), once it has one (if it gets one within
    5 s). With the steps on Celery workers (``celery`` gives their sessions), the step
    worker is the worker's process running the step: its worker lives on and starts
    another, as Celery does after an OOM kill."""
    first_seen: dict[str, tuple[float, bool]] = {}  # run id -> (seen at, whole run)

    def kill_loads() -> bool:
        loads = instance.get_run_records(RunsFilter(job_name="orders_job", statuses=LIVE))
        for record in loads:
            found = workers(instance, sessions, [record], celery())
            if not found:
                continue
            run_id = record.dagster_run.run_id
            seen, whole = first_seen.setdefault(run_id, (time.monotonic(), rng.random() < 0.5))
            steps = [w for w in found if w[1] == "step worker"]
            if whole:
                for worker in found:
                    kill(worker, kills)
            elif steps or time.monotonic() - seen >= 5:
                kill(rng.choice(steps or found), kills)
            else:
                continue
            if record.create_timestamp >= stopped_at + timedelta(seconds=1):
                return True
        return False

    return kill_loads


# --- the scenario -----------------------------------------------------------------------


def instance_yaml(retries: bool) -> str:
    config = yaml.safe_load((ROOT / "deploy" / "dagster-dev.yaml").read_text())
    config["run_retries"]["enabled"] = retries
    return yaml.safe_dump(config)


@pytest.fixture(
    params=[
        pytest.param(("sqlite", True), id="sqlite-retries-on"),
        pytest.param(
            ("postgresql", False), id="postgresql-retries-off", marks=pytest.mark.postgres
        ),
    ]
)
def setting(request, tmp_path):
    backend, retries = request.param
    urls = database_urls(backend, tmp_path, request)
    return backend, retries, urls


def test_the_pipeline_heals_after_runs_are_killed(setting, tmp_path, record_property):
    backend, retries, urls = setting
    rng = random.Random(SEED)
    today = datetime.now(UTC).date()
    sim_start = datetime.combine(today - timedelta(days=11), datetime.min.time(), UTC)
    first_day, last_day = (sim_start - timedelta(days=3)).date(), today - timedelta(days=1)

    source = app_writer.engine_for(urls["source"])
    warehouse = sa.create_engine(urls["warehouse"])
    app_writer.create_table(source)
    app_writer.seed_orders(source, rng, sim_start - timedelta(days=2), 40)

    server = start_dagster_dev(
        tmp_path,
        instance=instance_yaml(retries),
        settings={
            "SOURCE_DATABASE_URL": urls["source"],
            "WAREHOUSE_DATABASE_URL": urls["warehouse"],
            "PARTITIONS_START_DATE": first_day.isoformat(),
        },
    )
    instance = None
    try:
        server.wait(
            "code location loaded", lambda: location_loaded(server), 120, no_failed_runs=False
        )
        instance = DagsterInstance.from_config(str(server.home))

        app = subprocess.Popen(
            [
                sys.executable,
                str(Path(app_writer.__file__)),
                urls["source"],
                "--seed",
                str(SEED),
                "--seconds",
                str(WRITE_SECONDS),
                "--sim-start",
                sim_start.isoformat(),
                "--sim-days",
                "9",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        kills: list[tuple] = []
        next_kill = time.monotonic() + rng.uniform(4, 8)
        while app.poll() is None:
            time.sleep(0.2)
            if time.monotonic() < next_kill:
                continue
            candidates = workers(
                instance, {server.proc.pid}, instance.get_run_records(RunsFilter(statuses=LIVE))
            )
            if candidates:
                kill(pick(rng, candidates), kills)
                next_kill = time.monotonic() + rng.uniform(3, 8)
        out, err = app.communicate(timeout=30)
        assert app.returncode == 0, err
        written = json.loads(out.strip().splitlines()[-1])
        app_stopped = time.monotonic()
        stopped_at = datetime.now(UTC)

        # every load from now on is killed, until one that was created after the app
        # stopped has died too (see load_killer)
        server.wait(
            "a load created after the app stopped, killed",
            load_killer(instance, {server.proc.pid}, rng, kills, stopped_at),
            180,
            every=0.1,
            no_failed_runs=False,
        )
        last_kill = kills[-1][0]

        healed = converge_and_verify(
            server,
            instance,
            source,
            warehouse,
            server.data / "paid_orders",
            first_day,
            last_day,
            last_kill,
        )
        records = instance.get_run_records()
        print(
            report(
                f"{backend} retries={'on' if retries else 'off'}",
                records,
                kills,
                written,
                healed,
                last_kill - app_stopped,
            )
        )
        record_property("converged_after_last_kill_seconds", round(healed, 1))
        assert_never_two_loads_at_once(records)
    finally:
        try:
            stop(server)
        finally:
            if instance is not None:
                instance.dispose()
            source.dispose()
            warehouse.dispose()


def converge_and_verify(
    server: DevServer,
    instance: DagsterInstance,
    source: sa.Engine,
    warehouse: sa.Engine,
    folder,
    first_day: date,
    last_day: date,
    last_kill: float,
) -> float:
    """Poll until the warehouse and every day file equal the source (``differences``),
    then require ``verify --require-all`` to agree; the seconds since ``last_kill``."""
    left: list[str] = []

    def converged() -> bool:
        nonlocal left
        left = differences(source, warehouse, folder, first_day, last_day)
        return not left

    try:
        server.wait(
            "the warehouse and every day file equal to the source",
            converged,
            CONVERGE_DEADLINE,
            every=1,
            no_failed_runs=False,
        )
    except AssertionError as exc:
        raise AssertionError(
            f"not converged: {left[:10]}\nruns:\n{timeline(instance.get_run_records())}\n{exc}"
        ) from None
    healed = time.monotonic() - last_kill
    verified = subprocess.run(
        [str(BIN / "pipeline-assets"), "verify", "--require-all"],
        env=server.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    return healed


def report(stack: str, records, kills: list, written: dict, healed: float, killing: float) -> str:
    """The line ``grep '^heal'`` picks (docs/guarantees.md quotes it), then the runs."""
    failed = sum(r.dagster_run.status != DagsterRunStatus.SUCCESS for r in records)
    retried = sum("dagster/retry_number" in r.dagster_run.tags for r in records)
    roles = sorted({k[2] for k in kills})
    killed = ", ".join(f"{role} x{sum(k[2] == role for k in kills)}" for role in roles)
    return (
        f"\nheal seed={SEED} {stack}: {len(kills)} kills ({killed}), {failed} of "
        f"{len(records)} runs not successful, {retried} Dagster retries; app wrote "
        f"{written}; converged {healed:.1f} s after the last kill ({killing:.1f} s "
        f"after the app stopped)\n{timeline(records)}"
    )


def timeline(records) -> str:
    """One line per run, oldest first: what happened, for a failure message."""
    records = sorted(records, key=lambda r: r.create_timestamp)
    if not records:
        return "(no runs)"
    t0 = records[0].create_timestamp
    lines = []
    for r in records:
        run, tags = r.dagster_run, r.dagster_run.tags
        span = tags.get("dagster/partition") or (
            f"{tags.get('dagster/asset_partition_range_start')}..."
            f"{tags.get('dagster/asset_partition_range_end')}"
            if "dagster/asset_partition_range_start" in tags
            else ""
        )
        lines.append(
            f"  +{(r.create_timestamp - t0).total_seconds():6.1f}s {run.job_name:16} "
            f"{run.status.value:9} {tags.get('dagster/run_key', '-')[-30:]:30} "
            f"retry={tags.get('dagster/retry_number', '-')} {span}"
        )
    return "\n".join(lines)


def assert_never_two_loads_at_once(records) -> None:
    """The sensor's loads, as Dagster saw them, never overlap in time."""
    loads = sorted(
        (r.start_time, r.end_time, r.dagster_run.run_id)
        for r in records
        if r.dagster_run.tags.get("dagster/sensor_name") == "new_orders_sensor"
        and r.start_time is not None
        and r.end_time is not None
    )
    for (_, end, first), (start, _, second) in zip(loads, loads[1:], strict=False):
        assert start >= end, f"loads {first} and {second} ran at the same time"


def assert_file_writers_never_overlap(instance: DagsterInstance, records) -> None:
    """The ``paid_orders`` steps of all runs, from their first start to their last end
    (or their run's end), never overlap in time, whichever worker ran them: the pool
    ``paid_orders_files`` (limit 1) holds on the instance, not in a worker."""
    spans = []
    for record in records:
        events = [
            (entry.timestamp, entry.dagster_event.event_type)
            for entry in instance.all_logs(
                record.dagster_run.run_id,
                of_type={
                    DagsterEventType.STEP_START,
                    DagsterEventType.STEP_SUCCESS,
                    DagsterEventType.STEP_FAILURE,
                },
            )
            if entry.dagster_event.step_key == "paid_orders"
        ]
        if not events:
            continue
        events.sort()
        last_time, last_kind = events[-1]
        ended = last_kind != DagsterEventType.STEP_START  # else it died: its run's end
        spans.append(
            (
                events[0][0],
                last_time if ended else record.end_time or last_time,
                record.dagster_run.run_id,
            )
        )
    spans.sort()
    for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
        assert start >= end, f"the file writers of {first} and {second} overlapped"


# --- the same scenario with every step on Celery workers ---------------------------------

# A worker dies whole (its pool with it, as a machine lost) in the middle of the first
# load's step, with the load's transaction open, and in the middle of the first file
# writer's step, with every day object of its run in the bucket and no manifest yet.
WORKER_CRASHES = ("load_after_merge", "files_before_manifest")


@pytest.mark.postgres
@pytest.mark.s3
@pytest.mark.celery
def test_the_pipeline_heals_on_the_celery_stack(
    tmp_path, postgres, bucket, rabbit, monkeypatch, record_property
):
    """The production stack of docs/deployment.md on one machine: a code server, the
    webserver and the daemon as processes of their own, the instance of
    ``deploy/dagster.yaml`` on PostgreSQL (run retries on), source and warehouse on
    PostgreSQL, the day files in the bucket, every step a task on RabbitMQ run by two
    workers of ``deploy/celery-worker.sh``. While the app writes, a worker dies in the
    middle of a load and another in the middle of a file writer (each started again
    two seconds later), and the daemon is SIGKILLed once and started again; then every
    load is killed until one that reads every write has died. With nothing done by hand
    the warehouse and every day file in the bucket converge to the source, ``verify``
    agrees, and a range backfill launched as the UI does runs on the workers too."""
    from upath import UPath

    from .brokers import CeleryWorker, WorkerKeeper
    from .devserver import (
        CALLERS_SETTINGS,
        LAUNCH_BACKFILL,
        backfill_runs_done,
        start_deployment,
        stop_deployment,
    )
    from .worlds import psycopg2_url

    rng = random.Random(SEED)
    today = datetime.now(UTC).date()
    sim_start = datetime.combine(today - timedelta(days=11), datetime.min.time(), UTC)
    first_day, last_day = (sim_start - timedelta(days=3)).date(), today - timedelta(days=1)
    urls = {
        "source": postgres.url("source"),
        "warehouse": postgres.url("warehouse"),
        "instance": psycopg2_url(postgres.url("instance")),
    }
    source = app_writer.engine_for(urls["source"])
    warehouse = sa.create_engine(urls["warehouse"])
    app_writer.create_table(source)
    app_writer.seed_orders(source, rng, sim_start - timedelta(days=2), 40)
    folder = f"{bucket}/paid_orders"
    production = (ROOT / "deploy" / "dagster.yaml").read_text()
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", urls["instance"])  # this test's instance

    deployment = start_deployment(
        tmp_path,
        instance=production,
        drop=CALLERS_SETTINGS + ("PAID_ORDERS", "DAGSTER_", "CELERY_"),
        settings={
            "SOURCE_DATABASE_URL": urls["source"],
            "WAREHOUSE_DATABASE_URL": urls["warehouse"],
            "PARTITIONS_START_DATE": first_day.isoformat(),
            "PAID_ORDERS_URL": folder,
            "DAGSTER_POSTGRES_URL": urls["instance"],
            "PIPELINE_EXECUTOR": "celery",
            "CELERY_BROKER_URL": rabbit.url,
        },
    )
    server = deployment.web
    pool = []
    for n in (1, 2):  # each worker: a home and a data folder of its own, no shared disk
        home = tmp_path / f"worker{n}" / "home"
        home.mkdir(parents=True)
        (home / "dagster.yaml").write_text(production)
        pool.append(
            CeleryWorker(
                f"w{n}",
                server.env
                | {
                    "DAGSTER_HOME": str(home),
                    "PIPELINE_DATA_DIR": str(home.parent / "data"),
                    "PIPELINE_CRASH_AT": ",".join(WORKER_CRASHES),
                    "PIPELINE_CRASH_MODE": "group",
                    "PIPELINE_CRASH_ONCE_FILE": str(tmp_path / "crashed"),
                },
                tmp_path / f"worker{n}.log",
            )
        )
    instance = None
    kills: list[tuple] = []
    keeper = WorkerKeeper(pool, kills)
    try:
        for worker in pool:
            worker.start()
        for worker in pool:
            worker.wait_ready()
        server.wait(
            "code location loaded", lambda: location_loaded(server), 120, no_failed_runs=False
        )
        instance = DagsterInstance.from_config(str(deployment.web.home))

        app = subprocess.Popen(
            [
                sys.executable,
                str(Path(app_writer.__file__)),
                urls["source"],
                "--seed",
                str(SEED),
                "--seconds",
                str(WRITE_SECONDS),
                "--sim-start",
                sim_start.isoformat(),
                "--sim-days",
                "9",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        keeper.start()  # a dead worker comes back two seconds later, whenever it dies
        started = time.monotonic()
        daemon_kill_at = started + rng.uniform(12, 24)
        daemon_back_at = None
        while app.poll() is None:
            time.sleep(0.2)
            now = time.monotonic()
            if daemon_kill_at and now >= daemon_kill_at:
                deployment.kill_daemon()
                kills.append((now, deployment.daemon.pid, "daemon", "-", "daemon"))
                daemon_kill_at, daemon_back_at = None, now + rng.uniform(3, 8)
            elif daemon_back_at and now >= daemon_back_at:
                deployment.start_daemon()
                daemon_back_at = None
        out, err = app.communicate(timeout=30)
        assert app.returncode == 0, err
        written = json.loads(out.strip().splitlines()[-1])
        app_stopped = time.monotonic()
        stopped_at = datetime.now(UTC)
        if daemon_back_at:  # what is still down comes back now, without waiting for it
            deployment.start_daemon()

        server.wait(
            "a load created after the app stopped, killed",
            load_killer(
                instance,
                deployment.sessions,
                rng,
                kills,
                stopped_at,
                lambda: {w.proc.pid for w in pool if w.alive},
            ),
            180,
            every=0.1,
            no_failed_runs=False,
        )
        # on a slow machine the first file writer may run only now: wait for a worker to
        # have died at each point (whenever) and to be back
        points = [f"crashed.{point}" for point in sorted(WORKER_CRASHES)]
        try:
            server.wait(
                "a worker dead at each crash point, and back",
                lambda: (
                    sorted(p.name for p in tmp_path.glob("crashed.*")) == points
                    and keeper.all_ready()
                ),
                180,
                every=0.5,
                no_failed_runs=False,
            )
        except AssertionError as exc:
            fired = sorted(p.name for p in tmp_path.glob("crashed.*"))
            raise AssertionError(
                f"no worker died at each point: {fired}\n"
                f"{timeline(instance.get_run_records())}\n{exc}"
            ) from None
        assert sum(k[2] == "celery worker" for k in kills) == 2, kills
        last_kill = max(k[0] for k in kills)

        store = UPath(folder, use_listings_cache=False)
        healed = converge_and_verify(
            server, instance, source, warehouse, store, first_day, last_day, last_kill
        )

        # a step lost with its worker went back to the broker and finished on a worker
        records = instance.get_run_records()
        assert any(redelivered(instance, r.dagster_run.run_id) for r in records)
        # a range backfill launched as the UI does: one run, its steps on the workers
        days = [
            (first_day + timedelta(days=n)).isoformat()
            for n in range((last_day - first_day).days + 1)
        ]
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
        server.wait(
            "the backfill's run done",
            lambda: backfill_runs_done(server, launched["backfillId"]),
            300,
            every=1,
            no_failed_runs=False,
        )
        backfill = [
            r
            for r in instance.get_run_records(
                RunsFilter(tags={"dagster/backfill": launched["backfillId"]})
            )
        ]
        assert len(backfill) == 1
        assert any(
            "Submitting celery task" in (e.user_message or "")
            for e in instance.all_logs(backfill[0].dagster_run.run_id)
        )
        assert differences(source, warehouse, store, first_day, last_day) == []

        records = instance.get_run_records()
        print(
            report(
                "celery (postgresql, bucket, retries on)",
                records,
                kills,
                written,
                healed,
                last_kill - app_stopped,
            )
        )
        record_property("converged_after_last_kill_seconds", round(healed, 1))
        assert_never_two_loads_at_once(records)
        assert_file_writers_never_overlap(instance, records)
    finally:
        try:
            keeper.halt()
            for worker in pool:
                worker.stop()
            stop_deployment(deployment)
        finally:
            if instance is not None:
                instance.dispose()
            source.dispose()
            warehouse.dispose()


def redelivered(instance: DagsterInstance, run_id: str) -> bool:
    """Whether a step of the run started in one worker process, was lost with it, and
    succeeded after starting again in another (the broker gave it back)."""
    started: dict[str, set[int]] = {}
    succeeded = set()
    for entry in instance.all_logs(
        run_id, of_type={DagsterEventType.STEP_START, DagsterEventType.STEP_SUCCESS}
    ):
        event = entry.dagster_event
        if event.event_type == DagsterEventType.STEP_START:
            started.setdefault(event.step_key, set()).add(event.pid)
        else:
            succeeded.add(event.step_key)
    return any(len(pids) > 1 and step in succeeded for step, pids in started.items())
