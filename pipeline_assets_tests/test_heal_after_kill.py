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
import signal
import subprocess
import sys
import time
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
from .support import database_urls

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("devserver")]
UTC = timezone.utc
SEED = int(os.environ.get("PIPELINE_HEAL_SEED", "1"))
WRITE_SECONDS = float(os.environ.get("PIPELINE_HEAL_WRITE_SECONDS", "40"))
CONVERGE_DEADLINE = 240.0  # generous: the bound in docs/guarantees.md is far below
DAY_FILE = re.compile(r"\d{4}-\d{2}-\d{2}\.json")
LIVE = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED]
# the long-lived processes of dagster dev: never killed here
SERVERS = ("dagster dev", "dagster-webserver", "dagster-daemon", "dagster api grpc",
           "dagster code-server", "dagster_webserver", "dagster._daemon")


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


def file_rows(folder: Path, day: str) -> list | None:
    try:
        rows = json.loads((folder / f"{day}.json").read_text())
    except (OSError, ValueError):
        return None
    return [(row["order_id"], Decimal(row["amount"])) for row in rows]


def differences(source: sa.Engine, warehouse: sa.Engine, folder: Path, first: date,
                last: date) -> list[str]:
    """What still differs; empty once the pipeline has converged."""
    src = table(source)
    out = []
    wh = table(warehouse)
    if wh != src:
        missing = sorted(set(src) - set(wh))
        stale = sorted(i for i in set(src) & set(wh) if src[i] != wh[i])
        out.append(f"warehouse: {len(missing)} missing {missing[:5]}, {len(stale)} stale "
                   f"{stale[:5]}")
    want = expected_days(src, first, last)
    on_disk = {p.name[:-5] for p in folder.iterdir() if DAY_FILE.fullmatch(p.name)} \
        if folder.exists() else set()
    for day in sorted(set(want) | on_disk):
        got = file_rows(folder, day)
        if got != want.get(day, []):
            out.append(f"{day}.json: {'missing' if got is None else f'{len(got)} rows'}, "
                       f"source has {len(want.get(day, []))} paid")
            continue
        try:
            read_committed_day(folder, day)
        except (UncommittedDayError, DayFilesError) as exc:
            out.append(f"{day}: not committed ({str(exc).splitlines()[0][:80]})")
    return out


# --- the killer -------------------------------------------------------------------------

def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def killable(server: DevServer, pid: int | None) -> bool:
    """A live run or step worker of this dagster dev: never one of its servers."""
    if not pid or pid == server.proc.pid:
        return False
    try:
        if os.getsid(pid) != server.proc.pid:
            return False
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    command = cmdline(pid)
    return state != "Z" and bool(command) and not any(s in command for s in SERVERS)


def children(pid: int) -> list[int]:
    """The live child processes of ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def workers(instance: DagsterInstance, server: DevServer, runs) -> list[tuple]:
    """(pid, role, run id, job) of the workers of ``runs``: the run worker is the process
    that reported RUN_START; the step workers are its child processes that run a step
    (from their start, not only once the step has reported STEP_START)."""
    found = []
    for record in runs:
        run = record.dagster_run
        for entry in instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_START):
            pid = entry.dagster_event.pid
            found.append((pid, "run worker", run.run_id, run.job_name))
            found += [(child, "step worker", run.run_id, run.job_name)
                      for child in children(pid) if "spawn_main" in cmdline(child)]
    return [w for w in found if killable(server, w[0])]


def pick(rng: random.Random, found: list[tuple]) -> tuple:
    """A run worker or a step worker, each kind as likely (a step lives much shorter)."""
    kinds = sorted({w[1].split()[0] for w in found})
    kind = rng.choice(kinds)
    return rng.choice([w for w in found if w[1].startswith(kind)])


def kill(worker: tuple, kills: list) -> None:
    try:
        os.kill(worker[0], signal.SIGKILL)
    except ProcessLookupError:
        return
    kills.append((time.monotonic(), *worker))


# --- the scenario -----------------------------------------------------------------------

def instance_yaml(retries: bool) -> str:
    config = yaml.safe_load((ROOT / "deploy" / "dagster-dev.yaml").read_text())
    config["run_retries"]["enabled"] = retries
    return yaml.safe_dump(config)


@pytest.fixture(params=[
    pytest.param(("sqlite", True), id="sqlite-retries-on"),
    pytest.param(("postgresql", False), id="postgresql-retries-off",
                 marks=pytest.mark.postgres),
])
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

    server = start_dagster_dev(tmp_path, instance=instance_yaml(retries), settings={
        "SOURCE_DATABASE_URL": urls["source"], "WAREHOUSE_DATABASE_URL": urls["warehouse"],
        "PARTITIONS_START_DATE": first_day.isoformat(),
    })
    instance = None
    try:
        server.wait("code location loaded", lambda: location_loaded(server), 120,
                    no_failed_runs=False)
        instance = DagsterInstance.from_config(str(server.home))

        app = subprocess.Popen(
            [sys.executable, str(Path(app_writer.__file__)), urls["source"],
             "--seed", str(SEED), "--seconds", str(WRITE_SECONDS),
             "--sim-start", sim_start.isoformat(), "--sim-days", "9"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        kills: list[tuple] = []
        next_kill = time.monotonic() + rng.uniform(4, 8)
        while app.poll() is None:
            time.sleep(0.2)
            if time.monotonic() < next_kill:
                continue
            candidates = workers(instance, server,
                                 instance.get_run_records(RunsFilter(statuses=LIVE)))
            if candidates:
                kill(pick(rng, candidates), kills)
                next_kill = time.monotonic() + rng.uniform(3, 8)
        out, err = app.communicate(timeout=30)
        assert app.returncode == 0, err
        written = json.loads(out.strip().splitlines()[-1])
        app_stopped = time.monotonic()
        stopped_at = datetime.now(UTC)

        # every load from now on is killed, until one that was created after the app
        # stopped (so it reads every write, and no later change will show) has died too:
        # the trap of a cursor that advances on request. Half the time the whole run dies
        # (a preempted pod: run worker and step workers at once), half the time only its
        # step worker (an OOM kill), once it has one (if it gets one within 5 s)
        first_seen: dict[str, tuple[float, bool]] = {}  # run id -> (seen at, whole run)

        def kill_loads() -> bool:
            loads = instance.get_run_records(RunsFilter(job_name="orders_job",
                                                        statuses=LIVE))
            for record in loads:
                found = workers(instance, server, [record])
                if not found:
                    continue
                run_id = record.dagster_run.run_id
                seen, whole = first_seen.setdefault(run_id,
                                                    (time.monotonic(), rng.random() < 0.5))
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

        server.wait("a load created after the app stopped, killed", kill_loads, 180,
                    every=0.1, no_failed_runs=False)
        last_kill = kills[-1][0]

        folder = server.data / "paid_orders"
        left: list[str] = []

        def converged() -> bool:
            nonlocal left
            left = differences(source, warehouse, folder, first_day, last_day)
            return not left

        try:
            server.wait("the warehouse and every day file equal to the source",
                        converged, CONVERGE_DEADLINE, every=1, no_failed_runs=False)
        except AssertionError as exc:
            raise AssertionError(f"not converged: {left[:10]}\nruns:\n"
                                 f"{timeline(instance.get_run_records())}\n{exc}") from None
        healed = time.monotonic() - last_kill

        verified = subprocess.run([str(BIN / "pipeline-assets"), "verify", "--require-all"],
                                  env=server.env, capture_output=True, text=True,
                                  timeout=120)
        assert verified.returncode == 0, verified.stdout + verified.stderr

        records = instance.get_run_records()
        failed = sum(r.dagster_run.status != DagsterRunStatus.SUCCESS for r in records)
        retried = sum("dagster/retry_number" in r.dagster_run.tags for r in records)
        roles = sorted({k[2] for k in kills})
        killed = ", ".join(f"{role} x{sum(k[2] == role for k in kills)}" for role in roles)
        message = (f"heal seed={SEED} {backend} retries={'on' if retries else 'off'}: "
                   f"{len(kills)} kills ({killed}), {failed} of {len(records)} runs not "
                   f"successful, "
                   f"{retried} Dagster retries; app wrote {written}; converged "
                   f"{healed:.1f} s after the last kill ({last_kill - app_stopped:.1f} s "
                   f"after the app stopped)")
        print(f"\n{message}\n{timeline(records)}")
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
            if "dagster/asset_partition_range_start" in tags else "")
        lines.append(f"  +{(r.create_timestamp - t0).total_seconds():6.1f}s {run.job_name:16} "
                     f"{run.status.value:9} {tags.get('dagster/run_key', '-')[-30:]:30} "
                     f"retry={tags.get('dagster/retry_number', '-')} {span}")
    return "\n".join(lines)


def assert_never_two_loads_at_once(records) -> None:
    """The sensor's loads, as Dagster saw them, never overlap in time."""
    loads = sorted((r.start_time, r.end_time, r.dagster_run.run_id) for r in records
                   if r.dagster_run.tags.get("dagster/sensor_name") == "new_orders_sensor"
                   and r.start_time is not None and r.end_time is not None)
    for (_, end, first), (start, _, second) in zip(loads, loads[1:], strict=False):
        assert start >= end, f"loads {first} and {second} ran at the same time"
