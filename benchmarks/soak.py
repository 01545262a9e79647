"""A soak (issue 25): the production stack for ``--minutes`` while an app writes two tables
and its parts are killed at random; then nothing lost, and nothing growing.

    .venv/bin/python benchmarks/soak.py [--minutes 60] [--seed 1] [--rate 4]
        [--kill-every 180] [--history-days 8] [--settle-minutes 15] [--workdir DIR]
        [--plot PNG] [--postgres ADMIN_URL] [--mariadb ADMIN_URL]

**The stack** (docs/deployment.md, on one machine): ``dagster api grpc`` (the code
location), ``dagster-webserver`` and ``dagster-daemon`` as processes of their own on
``deploy/dagster.yaml`` (the instance on PostgreSQL, run retries on); warehouse and the
``orders`` source on PostgreSQL; the day files in an S3-compatible bucket (``moto_server``
on 127.0.0.1); every step a task on RabbitMQ (a virtual host of the soak's own) run by
two workers of ``deploy/celery-worker.sh``. The code location is a user's dg project
declaring two tables: ``orders`` and ``payments`` (a composite key, ten columns of every
type, its source on MariaDB through its own ``source_url``), each with its daily files in
the bucket. The sensors and the schedule run as deployed.

**The app** writes both tables at ``--rate`` writes a second each, on a clock that runs
over past days (so every stamp is on a day whose partition exists): new rows, updates
that move a row to another day, late rows up to 30 hours behind, and deletes. Before the
stack starts it has written ``--history-days`` simulated days the same way, so the windows
the loads read and the check compares are full from the first minute.

**Chaos**: every ``--kill-every`` seconds on average, one part, at random, is SIGKILLed
and started again as a supervisor would: a Celery worker (two seconds later), the daemon
(three to eight seconds later), the code server (at once), a run worker or a step
process of a live run (Dagster's run retries and the sensors bring the work back).

**The end**: the app stops; once the pipeline has caught up, the range loads ``verify``
prints for the soak's days run (they propagate the app's deletes, which incremental
loads never do), then the soak waits until ``verify --require-all`` is clean for every
table. It fails unless it is, no key is stored twice, every row the app deleted is gone,
and every day file is committed (``verify`` checks it). It prints one summary: runs
launched, succeeded, failed and retried; kills by kind; the longest time from a kill
until both a load and a file build that started after it had succeeded; rows written and
loaded; and, sampled every minute, the resident memory of each long-lived process, the
wall time of each load run and of each sensor tick, with the targets (memory at the end
within 1.2× of five minutes in; the median load run and tick of the last ten minutes
within 1.2× of the first ten). ``--plot`` draws them (matplotlib, the ``bench`` extra).
Everything it measured is also in ``<workdir>/soak.json``.

``--minutes 2`` is the smoke that ``make test`` runs.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import sqlalchemy as sa  # noqa: E402
from cpu import CpuSampler  # noqa: E402
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter  # noqa: E402

from pipeline_assets.core.table.orders import ORDERS_ATTRIBUTES  # noqa: E402
from pipeline_assets_tests import app_writer  # noqa: E402
from pipeline_assets_tests.brokers import CeleryWorker, RabbitVhost, WorkerKeeper  # noqa: E402
from pipeline_assets_tests.devserver import (  # noqa: E402
    BIN,
    CALLERS_SETTINGS,
    ROOT,
    location_loaded,
    start_deployment,
    stop_deployment,
)
from pipeline_assets_tests.processes import LIVE, kill, pick, workers  # noqa: E402
from pipeline_assets_tests.stores import S3Server  # noqa: E402
from pipeline_assets_tests.support import dg_project  # noqa: E402
from pipeline_assets_tests.tables import PAYMENTS_ATTRIBUTES, PAYMENTS_DDL  # noqa: E402
from pipeline_assets_tests.worlds import psycopg2_url  # noqa: E402

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
MARIADB_ADMIN = "mysql+pymysql://root@127.0.0.1:3306/test"
SAMPLE_SECONDS = 60.0
LOAD_JOBS = ("orders_job", "payments_job")
FILE_JOBS = ("daily_files_job", "captured_payments_job")
SENSORS = (
    "new_orders_sensor",
    "paid_orders_refresh_sensor",
    "new_payments_sensor",
    "captured_payments_refresh_sensor",
)
KINDS = ("celery worker", "daemon", "code server", "run worker", "step process")
# The targets (issue 25): memory at the end of a process's longest life within 1.2x of its
# value five minutes into it; the median load run and sensor tick of the last ten minutes
# within 1.2x of the first ten; every kill followed by a load and a file build that started
# after it and succeeded within the bound of docs/guarantees.md ("The bound"): two sensor
# intervals (25 s), a pool slot given back (60 s), run monitoring's poll (5 s) and the
# runs themselves, three minutes in all on a busy machine.
GROWTH_TARGET = 1.2
KILL_BOUND_SECONDS = 180.0


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


# --- the databases, the bucket, the broker -----------------------------------------------


class Databases:
    """Throw-away databases on the PostgreSQL and MariaDB servers, dropped at the end."""

    def __init__(self, pg_admin: str, mariadb_admin: str, tag: str):
        self.pg = sa.create_engine(pg_admin, isolation_level="AUTOCOMMIT")
        self.my = sa.create_engine(mariadb_admin, isolation_level="AUTOCOMMIT")
        self.tag, self.made = tag, []

    def postgres(self, label: str) -> str:
        name = f"soak_{self.tag}_{label}"
        with self.pg.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        self.made.append(("pg", name))
        return self.pg.url.set(database=name).render_as_string(hide_password=False)

    def mariadb(self, label: str) -> str:
        name = f"soak_{self.tag}_{label}"
        with self.my.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
            conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        self.made.append(("my", name))
        return self.my.url.set(database=name).render_as_string(hide_password=False)

    def drop(self) -> None:
        for kind, name in self.made:
            engine = self.pg if kind == "pg" else self.my
            sql = (
                f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
                if kind == "pg"
                else f"DROP DATABASE IF EXISTS `{name}`"
            )
            try:
                with engine.connect() as conn:
                    conn.exec_driver_sql(sql)
            except sa.exc.DBAPIError as exc:
                log(f"could not drop {name}: {exc}")
        self.pg.dispose()
        self.my.dispose()


# --- the app ------------------------------------------------------------------------------

PAYMENT_UPSERT = (
    "INSERT INTO payments (payment_id, attempt, status, amount_cents, fee, rate, note, "
    "refundable, settle_on, modified_at, legacy_code) VALUES (:p, :a, :s, :c, :f, :r, :n, "
    ":b, :d, :m, 'soak') ON DUPLICATE KEY UPDATE status = VALUES(status), "
    "amount_cents = VALUES(amount_cents), fee = VALUES(fee), rate = VALUES(rate), "
    "note = VALUES(note), refundable = VALUES(refundable), settle_on = VALUES(settle_on), "
    "modified_at = VALUES(modified_at)"
)
RECENT_DAYS = 2  # the days an app still updates its rows in
NOTES = ["card 4242", "Grüße ☕", "retry after 3-D Secure", None, "𝄞 refund asked", ""]


class App(threading.Thread):
    """The app writing one table at ``rate`` writes a second on a clock that runs from
    ``sim_start`` over ``sim_days`` days in ``seconds``: new rows, updates (to another
    day), late rows and deletes. Counts what it did; remembers the keys it deleted.

    Updates go to rows of the last :data:`RECENT_DAYS` simulated days, as an app's do (an
    order is paid, shipped or refunded in its first days), so the days a load touches stay
    as many in the last ten minutes as in the first; updates spread over every key ever
    written would touch more days the longer the soak ran, a workload that grows and a
    growth the soak would then measure as the pipeline's. Deletes go anywhere."""

    def __init__(self, table: str, url: str, rng, rate, seconds, sim_start, sim_days):
        super().__init__(name=f"app-{table}", daemon=True)
        self.table, self.rng, self.rate = table, rng, rate
        self.seconds, self.sim_start, self.sim_days = seconds, sim_start, sim_days
        self.engine = app_writer.engine_for(url)
        if table == "payments":

            @sa.event.listens_for(self.engine, "connect")
            def _utc(dbapi_connection, _record):  # stamps written as UTC, as they are read
                cursor = dbapi_connection.cursor()
                cursor.execute("SET time_zone = '+00:00'")
                cursor.close()

        self.counts = {"new": 0, "updated": 0, "late": 0, "deleted": 0}
        # about the keys created in RECENT_DAYS simulated days (half the writes are new rows)
        self.recent = max(20, round(rate * seconds / sim_days * RECENT_DAYS / 2))
        self.keys: list = []
        self.deleted: set = set()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def clock(self, elapsed: float) -> datetime:
        return self.sim_start + timedelta(days=self.sim_days * min(1.0, elapsed / self.seconds))

    def run(self) -> None:
        began = time.monotonic()
        try:
            while not self.stop.is_set():
                elapsed = time.monotonic() - began
                if elapsed >= self.seconds:
                    return
                with self.engine.begin() as conn:
                    self.write_one(conn, self.clock(elapsed))
                time.sleep(self.rng.expovariate(self.rate))
        except BaseException as exc:  # noqa: BLE001 - reported by the soak, which fails
            self.error = exc

    def history(self, days: float) -> int:
        """Write ``days`` simulated days before ``sim_start`` at the same density, before
        the stack starts, as a deployment meets an app with a past: the window each load
        reads and the days the check compares are as full in the first ten minutes as in
        the last, so comparing the two measures growth, not a warm-up. Writes made."""
        writes = round(self.rate * self.seconds * days / self.sim_days)
        start = self.sim_start - timedelta(days=days)
        with self.engine.begin() as conn:
            for n in range(writes):
                self.write_one(conn, start + timedelta(days=days * n / writes))
        return writes

    def write_one(self, conn, now: datetime) -> None:
        kind = self.rng.choices(list(self.counts), weights=[5, 3, 1, 1])[0]
        if kind in ("updated", "deleted") and len(self.keys) < 20:
            kind = "new"
        late = timedelta(minutes=self.rng.randrange(60, 30 * 60))
        self.write(conn, kind, now - late if kind == "late" else now)
        self.counts[kind] += 1

    def write(self, conn, kind: str, at: datetime) -> None:
        if kind == "deleted":
            key = self.keys.pop(self.rng.randrange(len(self.keys)))
            self.deleted.add(key)
            if self.table == "orders":
                conn.execute(sa.text("DELETE FROM orders WHERE order_id = :k"), {"k": key})
            else:
                conn.execute(
                    sa.text("DELETE FROM payments WHERE payment_id = :p AND attempt = :a"),
                    {"p": key[0], "a": key[1]},
                )
            return
        if kind == "updated":
            key = self.rng.choice(self.keys[-self.recent :])
        else:
            key = self.new_key()
            self.keys.append(key)
        if self.table == "orders":
            conn.execute(
                app_writer.UPSERT,
                {
                    "order_id": key,
                    "status": self.rng.choice(["paid", "paid", "pending", "refunded"]),
                    "amount": f"{self.rng.randrange(100, 20000) / 100:.2f}",
                    "updated_at": app_writer.stamp(at),
                },
            )
            return
        status = self.rng.choice(["captured", "captured", "failed", "refunded"])
        cents = self.rng.randrange(100, 250_000)
        conn.execute(
            sa.text(PAYMENT_UPSERT),
            {
                "p": key[0],
                "a": key[1],
                "s": status,
                "c": cents,
                "f": f"{cents * 29 // 100_000}.{cents * 29 // 1000 % 100:02d}",
                "r": None if self.rng.random() < 0.3 else round(self.rng.random(), 6),
                "n": self.rng.choice(NOTES),
                "b": self.rng.random() < 0.6,
                "d": (at.date() + timedelta(days=2)).isoformat() if status == "captured" else None,
                "m": at.strftime("%Y-%m-%d %H:%M:%S"),
            },
        )

    def new_key(self):
        self.next = getattr(self, "next", 0) + 1
        if self.table == "orders":
            return self.next
        return (self.next, self.rng.choice([1, 1, 1, 2]))


def make_sources(urls: dict) -> None:
    orders = app_writer.engine_for(urls["orders_source"])
    app_writer.create_table(orders)
    orders.dispose()
    payments = sa.create_engine(urls["payments_source"])
    with payments.begin() as conn:
        conn.exec_driver_sql(PAYMENTS_DDL["mysql"].format(t="payments"))
        conn.exec_driver_sql("CREATE INDEX payments_modified_at_idx ON payments (modified_at)")
    payments.dispose()


# --- the parts, and what happens to them ------------------------------------------------


class Stack:
    """The deployment, its two workers and their supervisor, and the samples taken."""

    def __init__(self, root: Path, module: str, env: dict, production: str):
        self.root, self.module, self.production = root, module, production
        self.deployment = start_deployment(
            root,
            instance=production,
            drop=CALLERS_SETTINGS + ("PAID_ORDERS", "DAGSTER_", "CELERY_", "AWS_"),
            settings=env,
            module=module,
        )
        self.kills: list[tuple] = []
        self.pool = []
        for n in (1, 2):  # each worker: a home and a data folder of its own
            home = root / f"worker{n}" / "home"
            home.mkdir(parents=True)
            (home / "dagster.yaml").write_text(production)
            self.pool.append(
                CeleryWorker(
                    f"w{n}",
                    self.deployment.web.env
                    | {
                        "DAGSTER_HOME": str(home),
                        "PIPELINE_DATA_DIR": str(home.parent / "data"),
                        "CELERY_WORKER_MODULE": module,
                    },
                    root / f"worker{n}.log",
                )
            )
        self.keeper = WorkerKeeper(self.pool, self.kills)
        for worker in self.pool:
            worker.start()
        for worker in self.pool:
            worker.wait_ready()
        self.keeper.start()
        web = self.deployment.web
        web.wait("code location loaded", lambda: location_loaded(web), 180, no_failed_runs=False)
        self.instance = DagsterInstance.from_config(str(web.home))
        self.daemon_back_at: float | None = None

    def long_lived(self) -> dict[str, list[int]]:
        """Each long-lived process by role: its pid (a worker: its main process and pool)."""
        from pipeline_assets_tests.processes import children

        d = self.deployment
        out = {
            "code server": [d.code.pid],
            "webserver": [d.web.proc.pid],
            "daemon": [d.daemon.pid] if d.daemon else [],
        }
        for worker in self.pool:
            if worker.alive:
                out[f"celery worker {worker.name}"] = [worker.proc.pid, *children(worker.proc.pid)]
        return out

    def chaos(self, rng: random.Random) -> str | None:
        """Kill one part at random; what was killed (None: nothing of that kind was up)."""
        kind = rng.choice(KINDS)
        now = time.monotonic()
        d = self.deployment
        if kind == "celery worker":
            worker = rng.choice(self.pool)
            if not worker.alive:
                return None
            worker.kill()  # the keeper records it and starts it again two seconds later
            return kind
        if kind == "daemon":
            if self.daemon_back_at is not None:
                return None
            pid = d.daemon.pid
            d.kill_daemon()
            self.kills.append((now, pid, kind, "-", "daemon"))
            self.daemon_back_at = now + rng.uniform(3, 8)
            return kind
        if kind == "code server":
            pid = d.code.pid
            d.kill_code()
            self.kills.append((now, pid, kind, "-", "code server"))
            d.start_code()
            return kind
        live = self.instance.get_run_records(RunsFilter(statuses=LIVE))
        celery = {w.proc.pid for w in self.pool if w.alive}
        found = workers(self.instance, d.sessions, live, celery)
        wanted = "run worker" if kind == "run worker" else "step worker"
        found = [w for w in found if w[1] == wanted]
        if not found:
            return None
        killed = list(pick(rng, found))
        killed[1] = kind
        kill(tuple(killed), self.kills)
        return kind

    def supervise(self) -> None:
        """Start again what is down and due (the daemon)."""
        if self.daemon_back_at is not None and time.monotonic() >= self.daemon_back_at:
            self.deployment.start_daemon()
            self.daemon_back_at = None

    def all_up(self) -> None:
        if self.daemon_back_at is not None:
            self.deployment.start_daemon()
            self.daemon_back_at = None
        if self.deployment.code.poll() is not None:
            self.deployment.start_code()

    def stop(self) -> None:
        try:
            self.keeper.halt()
            for worker in self.pool:
                worker.stop()
            stop_deployment(self.deployment)
        finally:
            self.instance.dispose()


def sample(stack: Stack, memory: list, queue: list, cpu: tuple, t0: float) -> None:
    """Into ``memory``: (seconds into the soak, role, main pid, resident KiB) of each
    long-lived process that is up (one killed and not started again has nothing to
    sample); into ``queue``: (seconds, runs waiting in the run queue); into ``cpu``'s
    list: (seconds, the CPU seconds of each part since the sample before)."""
    at = time.time() - t0
    sampler, used = cpu
    used.append((at, sampler.sample()))
    for role, pids in stack.long_lived().items():
        kib = rss_kib(pids)
        if kib:
            memory.append((at, role, pids[0], kib))
    queued = stack.instance.get_runs_count(RunsFilter(statuses=[DagsterRunStatus.QUEUED]))
    queue.append((at, queued))


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


# --- the end: repair, converge, check -------------------------------------------------------


def cli(env: dict, cwd: Path, *argv: str, ok=(0,)) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(BIN / argv[0]), *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True
    )
    if done.returncode not in ok:
        raise SystemExit(
            f"soak: {' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    return done


def verify(env: dict, cwd: Path, module: str) -> dict:
    done = cli(
        env, cwd, "pipeline-assets", "verify", "-m", module, "--require-all", "--json", ok=(0, 1)
    )
    return json.loads(done.stdout)


BUSY = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, *LIVE]


def idle(instance: DagsterInstance) -> bool:
    return not instance.get_run_records(RunsFilter(statuses=BUSY), limit=1)


def in_progress(instance: DagsterInstance) -> list[str]:
    """Each run not finished: its job, status and age, for a soak that did not settle."""
    now = time.time()
    return [
        f"{r.dagster_run.job_name} {r.dagster_run.run_id[:8]} {r.dagster_run.status.value} "
        f"for {now - r.create_timestamp.timestamp():.0f} s"
        for r in instance.get_run_records(RunsFilter(statuses=BUSY))
    ]


def converge(stack: Stack, env: dict, module: str, deadline: float) -> tuple[float, dict]:
    """Wait for the pipeline to be idle and verify clean; seconds taken, the last report."""
    started = time.monotonic()
    report = {}
    while time.monotonic() < started + deadline:
        stack.supervise()
        if idle(stack.instance):
            report = verify(env, stack.root, module)
            if report["ok"]:
                return time.monotonic() - started, report
        time.sleep(10)
    return time.monotonic() - started, report


# --- what is measured --------------------------------------------------------------------


def run_times(instance: DagsterInstance, jobs, t0: float) -> list[tuple[float, float, str]]:
    """(ended at, seconds from the soak's start; wall seconds; job) of each successful run."""
    out = []
    for record in instance.get_run_records(
        RunsFilter(statuses=[DagsterRunStatus.SUCCESS], job_name=None)
    ):
        job = record.dagster_run.job_name
        if job in jobs and record.start_time and record.end_time:
            out.append((record.end_time - t0, record.end_time - record.start_time, job))
    return sorted(out)


def file_run_days(instance: DagsterInstance, t0: float) -> list[tuple[float, int]]:
    """(ended at, seconds from the soak's start; days built) of each successful file run:
    how much work a rebuild was asked for, from the partitions it was launched with."""
    out = []
    for record in instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.SUCCESS])):
        run = record.dagster_run
        if run.job_name not in FILE_JOBS or not record.end_time:
            continue
        tags = run.tags
        first = tags.get("dagster/asset_partition_range_start", tags.get("dagster/partition"))
        last = tags.get("dagster/asset_partition_range_end", first)
        if first and last:
            days = (datetime.fromisoformat(last) - datetime.fromisoformat(first)).days + 1
            out.append((record.end_time - t0, days))
    return sorted(out)


TICKS = """
query Ticks($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    __typename
    ... on Sensor { sensorState { ticks(limit: 100000) { timestamp endTimestamp status } } }
  }
}
"""


def tick_times(stack: Stack, t0: float) -> dict[str, list[tuple[float, float]]]:
    out = {}
    for name in SENSORS:
        got = stack.deployment.web.graphql(
            TICKS,
            {
                "selector": {
                    "repositoryLocationName": "pipeline_assets",
                    "repositoryName": "__repository__",
                    "sensorName": name,
                }
            },
        )["sensorOrError"]
        ticks = got.get("sensorState", {}).get("ticks", []) if got["__typename"] == "Sensor" else []
        out[name] = sorted(
            (t["timestamp"] - t0, t["endTimestamp"] - t["timestamp"])
            for t in ticks
            if t["endTimestamp"] and t["timestamp"] >= t0
        )
    return out


def kill_recoveries(kills: list[float], runs: list[tuple[float, float, str]]) -> list[float]:
    """Per kill (seconds into the soak): seconds until a load and a file build, both
    started after it, had succeeded."""
    out = []
    for at in kills:
        loads = [end for end, wall, job in runs if job in LOAD_JOBS and end - wall >= at]
        files = [end for end, wall, job in runs if job in FILE_JOBS and end - wall >= at]
        if loads and files:
            out.append(max(min(loads), min(files)) - at)
        else:
            out.append(float("inf"))
    return out


def memory_growth(memory: list[tuple[float, str, int, int]], role: str) -> dict:
    """A role's memory over its longest life (the chaos restarts most parts): resident
    KiB five minutes into that life and at its last sample, and their ratio; with the
    worst ratio of any life of ten minutes or more."""
    lives: dict[int, list[tuple[float, int]]] = {}
    for t, r, pid, kib in memory:
        if r == role:
            lives.setdefault(pid, []).append((t, kib))

    def ratio(life):
        after5 = [kib for t, kib in life if t - life[0][0] >= 300]
        return (after5[0], life[-1][1] / after5[0]) if after5 else (None, None)

    longest = max(lives.values(), key=lambda life: life[-1][0] - life[0][0])
    at5, longest_ratio = ratio(longest)
    long_lives = [ratio(life)[1] for life in lives.values() if life[-1][0] - life[0][0] >= 600]
    return {
        "restarts": len(lives) - 1,
        "lived_minutes": round((longest[-1][0] - longest[0][0]) / 60, 1),
        "at_5_min_kib": at5,
        "at_end_kib": longest[-1][1],
        "ratio": longest_ratio,
        "worst_ratio_of_lives_over_10_min": max(long_lives, default=None),
    }


STEP_DONE = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}): INFO/[^\]]+\] Task execute_plan\[[^\]]+\] "
    r"succeeded in ([0-9.]+)s: .*?\"text\": \"([A-Za-z0-9_, ]+)\"\}, \"label\": \"step_keys\""
)


def step_times(root: Path, t0: float) -> dict[str, list[tuple[float, float]]]:
    """Per step: (ended at, seconds from the soak's start; seconds its Celery task
    took) of each step a worker ran, from the workers' logs: the step's own time, without
    the run's start, its queue or the executor's one-second poll of results."""
    out: dict[str, list[tuple[float, float]]] = {}
    for path in sorted(root.glob("worker*.log")):
        for line in path.read_text(errors="replace").splitlines():
            found = STEP_DONE.match(line)
            if found:
                # the worker logs its local time
                at = (
                    time.mktime(time.strptime(found[1], "%Y-%m-%d %H:%M:%S")) + int(found[2]) / 1000
                )
                out.setdefault(found[4], []).append((at - t0, float(found[3])))
    return {step: sorted(points) for step, points in out.items()}


def window_median(points: list[tuple[float, float]], start: float, end: float) -> float | None:
    values = [v for t, v in points if start <= t < end]
    return statistics.median(values) if values else None


# --- the soak -----------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=4.0, help="app writes a second, per table")
    parser.add_argument("--kill-every", type=float, help="mean seconds between kills")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument(
        "--history-days",
        type=float,
        default=8,
        help="simulated days the app wrote before the soak (the check compares 7)",
    )
    parser.add_argument(
        "--settle-minutes",
        type=float,
        default=15,
        help="how long after the app stops the pipeline may take to converge",
    )
    parser.add_argument("--plot", type=Path, help="a PNG of memory, run and tick times")
    parser.add_argument("--postgres", default=PG_ADMIN, metavar="ADMIN_URL")
    parser.add_argument("--mariadb", default=MARIADB_ADMIN, metavar="ADMIN_URL")
    args = parser.parse_args(argv)

    def interrupted(signum, _frame):  # the stack, databases and vhost are cleaned up
        raise KeyboardInterrupt(f"signal {signum}")

    # SIGINT too: a shell ignores it in a job it starts in the background
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    seconds = args.minutes * 60
    kill_every = args.kill_every or (180.0 if args.minutes >= 20 else 30.0)
    rng = random.Random(args.seed)
    root = args.workdir or Path(__import__("tempfile").mkdtemp(prefix="soak_"))
    root.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}"
    today = datetime.now(UTC).date()
    sim_days = max(2.0, min(30.0, args.minutes / 3))  # a simulated day every 3 minutes
    sim_start = datetime.combine(
        today - timedelta(days=int(sim_days) + 3), datetime.min.time(), UTC
    )
    first_day = (sim_start - timedelta(days=args.history_days + 2)).date()

    dbs = Databases(args.postgres, args.mariadb, tag)
    s3 = S3Server(root / "moto.log")
    vhost = RabbitVhost()
    stack = None
    apps: list[App] = []
    try:
        urls = {
            "orders_source": dbs.postgres("orders"),
            "payments_source": dbs.mariadb("payments"),
            "warehouse": dbs.postgres("warehouse"),
            "instance": psycopg2_url(dbs.postgres("instance")),
        }
        bucket = s3.bucket()
        make_sources(urls)
        payments = copy.deepcopy(PAYMENTS_ATTRIBUTES)
        payments["source_url"] = urls["payments_source"]
        payments["daily_files"][0]["url"] = f"s3://{bucket}/captured_payments"
        module = dg_project(root, {"orders": ORDERS_ATTRIBUTES, "payments": payments})
        env = {
            "SOURCE_DATABASE_URL": urls["orders_source"],
            "WAREHOUSE_DATABASE_URL": urls["warehouse"],
            "PARTITIONS_START_DATE": first_day.isoformat(),
            "PAID_ORDERS_URL": f"s3://{bucket}/paid_orders",
            "DAGSTER_POSTGRES_URL": urls["instance"],
            "PIPELINE_EXECUTOR": "celery",
            "CELERY_BROKER_URL": vhost.url,
            **s3.env,
        }
        os.environ["DAGSTER_POSTGRES_URL"] = urls["instance"]  # this process's instance
        production = (ROOT / "deploy" / "dagster.yaml").read_text()
        log(f"soak: {args.minutes:g} min, seed {args.seed}, workdir {root}")
        apps = [
            App(
                "orders",
                urls["orders_source"],
                random.Random(args.seed * 7 + 1),
                args.rate,
                seconds,
                sim_start,
                sim_days,
            ),
            App(
                "payments",
                urls["payments_source"],
                random.Random(args.seed * 7 + 2),
                args.rate,
                seconds,
                sim_start,
                sim_days,
            ),
        ]
        history = [app.history(args.history_days) for app in apps]
        log(f"{args.history_days:g} days of history written: {history}; starting the stack")
        stack = Stack(root, module, env, production)
        user_env = stack.deployment.web.env
        t0 = time.time()
        started = time.monotonic()
        for app in apps:
            app.start()
        memory: list[tuple[float, str, int, int]] = []  # (t, role, pid, KiB)
        queue: list[tuple[float, int]] = []  # (t, runs queued)
        cpu = (CpuSampler(os.getpid()), [])  # (the sampler, [(t, CPU seconds by part)])
        next_sample, next_kill = started, started + rng.expovariate(1 / kill_every)
        killed_by_kind: dict[str, int] = {}
        while time.monotonic() < started + seconds:
            now = time.monotonic()
            stack.supervise()
            if now >= next_sample:
                sample(stack, memory, queue, cpu, t0)
                next_sample = now + SAMPLE_SECONDS
            if now >= next_kill:
                kind = stack.chaos(rng)
                if kind:
                    killed_by_kind[kind] = killed_by_kind.get(kind, 0) + 1
                    log(f"killed a {kind}")
                next_kill = now + rng.expovariate(1 / kill_every)
            for app in apps:
                if app.error is not None:
                    raise SystemExit(f"soak: the app writing {app.table} failed: {app.error!r}")
            time.sleep(0.5)
        for app in apps:
            app.stop.set()
            app.join(timeout=30)
        sample(stack, memory, queue, cpu, t0)
        stack.all_up()
        writes_end = time.monotonic()
        log(f"the app stopped: {[a.counts for a in apps]}; waiting for the pipeline")
        waited, report = converge_after_writes(stack, user_env, module, args.settle_minutes * 60)
        summary = summarize(
            stack,
            apps,
            urls,
            (memory, queue, cpu[1]),
            killed_by_kind,
            (t0, started),
            args,
            report,
            waited,
            writes_end - started,
        )
        (root / "soak.json").write_text(json.dumps(summary, indent=2, default=str))
        print_summary(summary)
        if args.plot:
            plot(summary, args.plot)
        return 0 if summary["ok"] else 1
    finally:
        for app in apps:
            app.stop.set()
        if stack is not None:
            stack.stop()
        s3.stop()
        vhost.delete()
        dbs.drop()
        if not args.workdir:
            shutil.rmtree(root, ignore_errors=True)


def converge_after_writes(
    stack: Stack, env: dict, module: str, settle: float
) -> tuple[float, dict]:
    """Idle, then the range loads verify prints (the app's deletes), then verify clean;
    all within ``settle`` seconds, or the soak fails naming the runs still in progress."""
    started = time.monotonic()
    deadline = started + settle
    while not idle(stack.instance):
        if time.monotonic() > deadline:
            raise SystemExit(
                f"soak: the pipeline was not idle {settle:.0f} s after the app stopped; "
                f"in progress: {in_progress(stack.instance)}"
            )
        stack.supervise()
        time.sleep(5)
    report = verify(env, stack.root, module)
    for command in report.get("repair", []):
        argv = shlex.split(command)
        log(f"repair: {' '.join(argv[:8])} …")
        cli(env, stack.root, *argv)
    waited, report = converge(stack, env, module, max(60.0, deadline - time.monotonic()))
    return time.monotonic() - started, report


def summarize(stack, apps, urls, sampled, killed_by_kind, clocks, args, report, waited, wrote):
    t0, started = clocks  # the soak's start, on the wall clock and on the monotonic one
    memory, queue, cpu = sampled
    kills = [(k[0] - started, k[2]) for k in stack.kills]
    instance = stack.instance
    records = instance.get_run_records()
    statuses = [r.dagster_run.status for r in records]
    retried = sum(1 for r in records if "dagster/retry_number" in r.dagster_run.tags)
    runs = run_times(instance, LOAD_JOBS + FILE_JOBS, t0)
    ticks = tick_times(stack, t0)
    recoveries = kill_recoveries([at for at, _ in kills], runs)
    warehouse = sa.create_engine(urls["warehouse"])
    checks = {}
    with warehouse.connect() as conn:
        for table, key in (("orders", "order_id"), ("payments", "payment_id, attempt")):
            rows, keys = conn.exec_driver_sql(
                f"SELECT count(*), count(DISTINCT ({key})) FROM {table}"
            ).one()
            app = next(a for a in apps if a.table == table)
            left = 0
            for deleted in app.deleted:
                where = (
                    f"order_id = {int(deleted)}"
                    if table == "orders"
                    else f"payment_id = {int(deleted[0])} AND attempt = {int(deleted[1])}"
                )
                left += conn.exec_driver_sql(f"SELECT count(*) FROM {table} WHERE {where}").scalar()
            loaded = conn.exec_driver_sql(
                "SELECT coalesce(sum(inserted + updated), 0) FROM pipeline_batches "
                f"WHERE table_name = '{table}'"
            ).scalar()
            checks[table] = {
                "rows": rows,
                "keys stored twice": rows - keys,
                "deleted rows left": left,
                "rows loaded": int(loaded),
                "app": app.counts,
            }
    warehouse.dispose()
    minutes = args.minutes * 60
    first, last = (0, min(600, minutes / 2)), (max(minutes - 600, minutes / 2), minutes)
    load_points = [(t, wall) for t, wall, job in runs if job in LOAD_JOBS]
    tick_points = [p for points in ticks.values() for p in points]

    def trend(points):
        a, b = window_median(points, *first), window_median(points, *last)
        return {"first": a, "last": b, "ratio": (b / a) if a and b else None}

    growth = {role: memory_growth(memory, role) for role in sorted({m[1] for m in memory})}
    steps = step_times(stack.root, t0)
    days = file_run_days(instance, t0)
    cpu = [(t, used) for t, used in cpu if used and used["seconds"] >= 30]  # whole minutes
    parts = sorted({part for _, used in cpu for part in used["parts"]})
    cpu_trend = {
        part: trend([(t, used["parts"].get(part, 0.0)) for t, used in cpu]) for part in parts
    } | {
        "machine busy share": trend([(t, used["busy_share"]) for t, used in cpu]),
        "load average": trend([(t, used["load_1min"]) for t, used in cpu]),
    }
    load_trend, tick_trend = trend(load_points), trend(tick_points)
    longest_kill = max(recoveries, default=0.0)
    targets = {
        "memory": all((g["ratio"] or 0) <= GROWTH_TARGET for g in growth.values()),
        "load run": (load_trend["ratio"] or 0) <= GROWTH_TARGET,
        "sensor tick": (tick_trend["ratio"] or 0) <= GROWTH_TARGET,
        f"kills within {KILL_BOUND_SECONDS:.0f} s": longest_kill <= KILL_BOUND_SECONDS,
    }
    ok = bool(report.get("ok")) and all(
        c["keys stored twice"] == 0 and c["deleted rows left"] == 0 for c in checks.values()
    )
    return {
        "ok": ok,
        "minutes": args.minutes,
        "seed": args.seed,
        "runs": {
            "launched": len(records),
            "succeeded": statuses.count(DagsterRunStatus.SUCCESS),
            "failed": statuses.count(DagsterRunStatus.FAILURE),
            "canceled": statuses.count(DagsterRunStatus.CANCELED),
            "retried": retried,
        },
        "kills": killed_by_kind
        | {"celery worker": sum(k[2] == "celery worker" for k in stack.kills)},
        "kill_recovery_seconds": {
            "longest": longest_kill,
            "median": statistics.median(recoveries) if recoveries else 0.0,
        },
        "converged_after_writes_seconds": round(waited, 1),
        "writes_seconds": round(wrote, 1),
        "tables": checks,
        "verify_ok": report.get("ok"),
        "verify_failing": {
            name: t.get("failing_days") for name, t in report.get("tables", {}).items()
        },
        "memory": growth,
        "load_run_seconds": load_trend,
        "sensor_tick_seconds": tick_trend,
        "targets": targets,
        "runs_queued": trend(queue) | {"max": max((n for _, n in queue), default=0)},
        "step_seconds": {step: trend(points) for step, points in sorted(steps.items())},
        "days_per_file_run": trend(days),
        "cpu_seconds_per_minute": cpu_trend,
        "samples": {
            "memory": memory,
            "load_runs": runs,
            "ticks": ticks,
            "kills": kills,
            "queue": queue,
            "cpu": cpu,
            "steps": steps,
            "file_run_days": days,
        },
    }


def print_summary(s: dict) -> None:
    print("\nsoak summary")
    print(f"  runs: {s['runs']}")
    print(
        f"  kills: {s['kills']}; longest kill to a load and a build after it: "
        f"{s['kill_recovery_seconds']['longest']:.0f} s (median "
        f"{s['kill_recovery_seconds']['median']:.0f} s)"
    )
    print(
        f"  converged {s['converged_after_writes_seconds']:.0f} s after the app stopped; "
        f"verify --require-all clean: {s['verify_ok']}"
    )
    for table, c in s["tables"].items():
        print(
            f"  {table}: app {c['app']}, {c['rows']} rows stored, {c['rows loaded']} loaded, "
            f"{c['keys stored twice']} keys stored twice, "
            f"{c['deleted rows left']} deleted rows left"
        )
    print(
        f"\n  {'process (longest life)':<22} | {'restarts':>8} | {'lived min':>9} | "
        f"{'MiB at 5 min':>12} | {'MiB at end':>10} | {'ratio':>6} | {'worst, lives >10 min':>20}"
    )
    print("  " + "-" * 107)
    for role, g in s["memory"].items():
        at5 = f"{g['at_5_min_kib'] / 1024:.0f}" if g["at_5_min_kib"] else "-"
        ratio = f"{g['ratio']:.2f}x" if g["ratio"] else "-"
        worst = g["worst_ratio_of_lives_over_10_min"]
        worst = f"{worst:.2f}x" if worst else "-"
        print(
            f"  {role:<22} | {g['restarts']:>8} | {g['lived_minutes']:>9} | {at5:>12} | "
            f"{g['at_end_kib'] / 1024:>10.0f} | {ratio:>6} | {worst:>20}"
        )
    print(f"\n  {'median seconds':<22} | {'first 10 min':>12} | {'last 10 min':>11} | {'ratio':>6}")
    print("  " + "-" * 60)
    for label, key in (
        ("load run", "load_run_seconds"),
        ("sensor tick", "sensor_tick_seconds"),
        ("runs queued (count)", "runs_queued"),
    ):
        t = s[key]
        fmt = lambda v: f"{v:.3f}" if v is not None else "-"  # noqa: E731
        ratio = f"{t['ratio']:.2f}x" if t["ratio"] else "-"
        print(f"  {label:<22} | {fmt(t['first']):>12} | {fmt(t['last']):>11} | {ratio:>6}")
    rows = [(f"step {step}", t) for step, t in s.get("step_seconds", {}).items()]
    rows.append(("days per file run", s["days_per_file_run"]))
    rows += [  # the parts that use a fifth of a CPU second a minute or more
        (f"cpu s/min {part}", t)
        for part, t in s.get("cpu_seconds_per_minute", {}).items()
        if max(t["first"] or 0, t["last"] or 0) >= 0.2 or "share" in part or "load" in part
    ]
    print(f"\n  {'median':<34} | {'first 10 min':>12} | {'last 10 min':>11} | {'ratio':>6}")
    print("  " + "-" * 72)
    for label, t in rows:  # what a slower run is made of: its step's own time, the CPU
        fmt = lambda v: f"{v:.3f}" if v is not None else "-"  # noqa: E731
        ratio = f"{t['ratio']:.2f}x" if t["ratio"] else "-"
        print(f"  {label[:34]:<34} | {fmt(t['first']):>12} | {fmt(t['last']):>11} | {ratio:>6}")
    missed = [name for name, met in s["targets"].items() if not met]
    print(f"\n  targets: {'all met' if not missed else 'missed: ' + ', '.join(missed)}")
    print(f"\n{'OK' if s['ok'] else 'FAILED'}: soak of {s['minutes']:g} min, seed {s['seed']}")


def plot(s: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (mem, runs, cpu, queued) = plt.subplots(
        4, 1, figsize=(10, 12), sharex=True, gridspec_kw={"height_ratios": [3, 3, 2.4, 1.4]}
    )
    for role in sorted({m[1] for m in s["samples"]["memory"]}):
        points = [(t / 60, kib / 1024) for t, r, _, kib in s["samples"]["memory"] if r == role]
        mem.plot(*zip(*points, strict=True), marker=".", label=role)
    mem.set_ylabel("resident memory, MiB")
    mem.legend(fontsize=8)
    for label, jobs, size in (("load run, s", LOAD_JOBS, 6), ("file run, s", FILE_JOBS, 4)):
        points = [(t / 60, wall) for t, wall, job in s["samples"]["load_runs"] if job in jobs]
        if points:
            runs.scatter(*zip(*points, strict=True), s=size, label=label)
    ticks = [(t / 60, wall) for pts in s["samples"]["ticks"].values() for t, wall in pts]
    if ticks:
        runs.scatter(*zip(*ticks, strict=True), s=3, label="sensor tick, s")
    for at, _kind in s["samples"]["kills"]:
        runs.axvline(at / 60, color="grey", linewidth=0.5, alpha=0.5)
    runs.set_yscale("log")
    runs.set_ylabel("wall seconds (grey: a kill)")
    runs.legend(fontsize=8)
    used = [(t / 60, u["parts"]) for t, u in s["samples"].get("cpu", []) if u]
    if used:
        total = {p: sum(b.get(p, 0.0) for _, b in used) for _, by in used for p in by}
        parts = sorted(total, key=lambda p: -total[p])
        cpu.stackplot(
            [t for t, _ in used],
            [[by.get(p, 0.0) for _, by in used] for p in parts],
            labels=parts,
        )
        cpu.set_ylabel("CPU s per minute")
        cpu.legend(fontsize=7, ncol=3, loc="upper left")
    if s["samples"]["queue"]:
        queued.step(*zip(*[(t / 60, n) for t, n in s["samples"]["queue"]], strict=True))
    queued.set_ylabel("runs queued")
    queued.set_xlabel("minutes into the soak")
    fig.suptitle(f"soak: {s['minutes']:g} min, seed {s['seed']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
