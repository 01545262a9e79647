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

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pipeline_assets.core import demo
from pipeline_assets.core.daily_files import (
    MANIFEST_RE,
    DayFilesError,
    UncommittedDayError,
    read_committed_day,
)
from pipeline_assets.core.days import days_between
from pipeline_assets.core.db import make_engine
from pipeline_assets.core.sensing import read_watermark
from pipeline_assets.core.times import UTC, parse_day, to_instant

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent
FIRST_LOAD_DAYS = ["2026-01-03", "2026-01-08", "2026-01-12", "2026-01-15", "2026-01-19",
                   "2026-01-21"]
IN_PROGRESS = ["QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING"]


class Timeout(AssertionError):
    pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class DevServer:
    proc: subprocess.Popen
    url: str
    env: dict
    home: Path
    data: Path
    log: Path
    started: float = field(default_factory=time.monotonic)
    phases: dict = field(default_factory=dict)  # what was waited for -> seconds since start

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(self.url, data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=15) as response:
            answer = json.loads(response.read())
        if answer.get("errors"):
            raise AssertionError(f"GraphQL errors: {answer['errors']}")
        return answer["data"]

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def wait(self, what: str, probe: Callable[[], object], timeout: float,
             every: float = 0.5, *, no_failed_runs: bool = True):
        """Poll ``probe`` until it returns something truthy; fail after ``timeout`` s,
        or at once when a run has failed (with its error)."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"dagster dev exited ({self.proc.returncode}) while "
                                     f"waiting for {what}:\n{self.log_tail()}")
            try:
                if no_failed_runs:
                    assert_no_failed_runs(self)
                result = probe()
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                result, last = None, exc
            if result:
                self.phases[what] = time.monotonic() - self.started
                return result
            time.sleep(every)
        raise Timeout(f"no {what} within {timeout:.0f} s (last: {last!r}); "
                      f"dagster dev log:\n{self.log_tail()}")


def _session_processes(sid: int) -> list[str]:
    """Live (non-zombie) processes of session ``sid``, as 'pid cmdline'."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            state = stat.rsplit(")", 1)[1].split()[0]
            if os.getsid(int(entry.name)) == sid and state != "Z":
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append(f"{entry.name} {cmd[:120]}")
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
    return found


def _processes_with_home(home: Path) -> list[str]:
    """Processes (live) whose environment names this test's DAGSTER_HOME."""
    marker = f"DAGSTER_HOME={home}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(entry.name)
        except OSError:
            continue
    return found


def stop(server: DevServer) -> None:
    """SIGTERM to the whole group, SIGKILL to whatever is left, then check nothing is."""
    pgid = server.proc.pid  # start_new_session: the leader's pid is the group's id
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        server.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _session_processes(pgid):
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if server.proc.poll() is None:
        server.proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_session_processes(pgid)
                                           or _processes_with_home(server.home)):
        time.sleep(0.2)
    assert _session_processes(pgid) == [], "processes of dagster dev were left running"
    assert _processes_with_home(server.home) == [], "processes with this DAGSTER_HOME remain"


@pytest.fixture
def dev_server(tmp_path: Path):
    home, data = tmp_path / "home", tmp_path / "data"
    home.mkdir()
    data.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    (tmp_path / "workspace.yaml").write_text((ROOT / "workspace.yaml").read_text())
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PIPELINE_", "SOURCE_DATABASE", "WAREHOUSE_DATABASE"))}
    env |= {"DAGSTER_HOME": str(home), "PIPELINE_DATA_DIR": str(data),
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}
    source = make_engine(f"sqlite:///{data / 'app.db'}", role="source")
    demo.init(source)
    source.dispose()

    port = free_port()
    log = tmp_path / "dagster-dev.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "dagster"), "dev", "-h", "127.0.0.1", "-p", str(port),
             "-w", "workspace.yaml"],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    server = DevServer(proc, f"http://127.0.0.1:{port}/graphql", env, home, data, log)
    try:
        yield server
    finally:
        stopping = time.monotonic()
        stop(server)
        print(f"dagster dev stopped in {time.monotonic() - stopping:.1f} s")


LOCATION_QUERY = """
{ workspaceOrError { __typename
    ... on Workspace { locationEntries { name loadStatus
        locationOrLoadError { __typename ... on PythonError { message } } } }
    ... on PythonError { message } } }
"""

RUNS_QUERY = """
query ($filter: RunsFilter) { runsOrError(filter: $filter) { __typename
    ... on Runs { results { runId status jobName tags { key value } } }
    ... on PythonError { message } } }
"""

LAUNCH_BACKFILL = """
mutation ($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on PartitionKeysNotFoundError { message }
    ... on InvalidSubsetError { message } } }
"""

BACKFILL_STATUS = """
query ($id: String!) { partitionBackfillOrError(backfillId: $id) { __typename
    ... on PartitionBackfill { status }
    ... on PythonError { message } } }
"""


RUN_ERRORS = """
query ($runId: ID!) { logsForRun(runId: $runId) { __typename
    ... on EventConnection { events { __typename
        ... on MessageEvent { message level }
        ... on ExecutionStepFailureEvent { error { message } } } } } }
"""


def run_errors(server: DevServer, run_ids: list[str]) -> str:
    """The error messages of failed runs, for a failure message that says what happened."""
    out = []
    for run_id in run_ids:
        logs = server.graphql(RUN_ERRORS, {"runId": run_id})["logsForRun"]
        for event in logs.get("events", []):
            if event.get("level") == "ERROR" or event.get("error"):
                detail = (event.get("error") or {}).get("message", "")
                out.append(f"{run_id[:8]} {event['__typename']}: {event.get('message')} "
                           f"{detail}".strip())
    return "\n".join(out)


def location_loaded(server: DevServer) -> bool:
    workspace = server.graphql(LOCATION_QUERY)["workspaceOrError"]
    assert workspace["__typename"] == "Workspace", workspace
    for entry in workspace["locationEntries"]:
        loaded = entry["locationOrLoadError"]
        if loaded and loaded["__typename"] == "PythonError":
            raise AssertionError(f"the code location failed to load: {loaded['message']}")
        if entry["name"] == "pipeline_assets" and entry["loadStatus"] == "LOADED" and loaded:
            return True
    return False


def runs(server: DevServer, statuses: list[str] | None = None) -> list[dict]:
    found = server.graphql(RUNS_QUERY, {"filter": {"statuses": statuses} if statuses else {}})
    assert found["runsOrError"]["__typename"] == "Runs", found
    return found["runsOrError"]["results"]


def assert_no_failed_runs(server: DevServer) -> None:
    failed = runs(server, ["FAILURE"])
    assert not failed, (f"runs failed: {failed}\n"
                        f"{run_errors(server, [r['runId'] for r in failed])}")


def idle(server: DevServer) -> bool:
    """No run queued or running."""
    return not runs(server, IN_PROGRESS)


def committed_ids(data: Path, day: str) -> list[int] | None:
    try:
        return [row["order_id"] for row in read_committed_day(data / "paid_orders", day)]
    except (UncommittedDayError, DayFilesError, OSError):
        return None


def manifests(data: Path) -> dict[str, dict]:
    folder = data / "paid_orders"
    return {p.name: json.loads(p.read_text()) for p in folder.iterdir()
            if MANIFEST_RE.fullmatch(p.name)} if folder.exists() else {}


def test_dagster_dev_backfill_and_sensors(dev_server: DevServer, record_property):
    server = dev_server
    started = time.monotonic()
    warehouse = make_engine(f"sqlite:///{server.data / 'warehouse.db'}", role="warehouse")
    try:
        server.wait("code location loaded over GraphQL", lambda: location_loaded(server), 90,
                    no_failed_runs=False)

        # 1. the first load happens by itself (the sensor's first tick)
        server.wait("first automatic load (watermark 2026-01-21)",
                    lambda: read_watermark(warehouse) == to_instant("2026-01-21", UTC), 90)

        # 2. meanwhile, a partition-range backfill over GraphQL, of days the first load's
        # refresh does not touch (after the 21st: empty days so far, the 24th included)
        watermark = read_watermark(warehouse)
        before = manifests(server.data)
        days = days_between(parse_day("2026-01-22"), parse_day("2026-01-31"))
        launched = server.graphql(LAUNCH_BACKFILL, {"params": {
            "assetSelection": [{"path": ["paid_orders"]}, {"path": ["daily_revenue"]}],
            "partitionNames": days,
        }})["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched

        def backfill_status() -> str:
            status = server.graphql(BACKFILL_STATUS, {"id": launched["backfillId"]})
            status = status["partitionBackfillOrError"]["status"]
            assert status not in ("FAILED", "COMPLETED_FAILED", "CANCELED"), status
            return status

        def backfill_runs_done() -> bool:
            # the backfill's run(s) finished; the daemon marks the backfill itself completed
            # on its next pass (every 30 s), checked at the end of the test
            found = server.graphql(RUNS_QUERY, {"filter": {"tags": [
                {"key": "dagster/backfill", "value": launched["backfillId"]}]}})
            results = found["runsOrError"]["results"]
            statuses = [r["status"] for r in results]
            assert "FAILURE" not in statuses, run_errors(server, [r["runId"] for r in results])
            return bool(statuses) and set(statuses) == {"SUCCESS"}

        server.wait("the first load's days rebuilt by the refresh sensor",
                    lambda: all(committed_ids(server.data, d) is not None
                                for d in FIRST_LOAD_DAYS), 300)
        server.wait("the backfill's run done", backfill_runs_done, 120, every=1)
        server.wait("no run in progress", lambda: idle(server), 60)

        assert {day: committed_ids(server.data, day) for day in days} == \
            {day: [] for day in days}
        new = {name: m for name, m in manifests(server.data).items() if name not in before}
        listing = [m for m in new.values() if set(m["days_written"]) & set(days)]
        assert len(listing) == 1 and listing[0]["days_written"] == days  # one run
        assert read_watermark(warehouse) == watermark  # a backfill never moves it
        assert committed_ids(server.data, "2026-01-21") == [106]
        reasons = {tag["value"] for run in runs(server) for tag in run["tags"]
                   if tag["key"] == "pipeline_assets/reason"}
        assert reasons == {"new_orders_sensor", "paid_orders_refresh_sensor"}
        # the load itself was no news to the sensor: one load, not two
        assert sum(run["jobName"] == "orders_job" for run in runs(server)) == 1

        # 3. a late order, added as the app would, reaches its day file by itself
        assert committed_ids(server.data, "2026-01-24") == []  # built empty by the backfill
        set_at = time.monotonic()
        done = subprocess.run(
            [str(BIN / "pipeline-assets"), "demo", "set", "186", "--status", "paid",
             "--amount", "30.00", "--updated-at", "2026-01-24"],
            env=server.env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        server.wait("order 186 in the committed paid_orders/2026-01-24.json",
                    lambda: committed_ids(server.data, "2026-01-24") == [186], 180)
        elapsed = time.monotonic() - set_at
        message = (f"demo set 186 -> committed paid_orders/2026-01-24.json: {elapsed:.1f} s "
                   f"(whole test so far {time.monotonic() - started:.0f} s)")
        print(message)
        print("phases (s since start): "
              + ", ".join(f"{what} {at:.0f}" for what, at in server.phases.items()))
        record_property("demo_set_to_day_file_seconds", round(elapsed, 1))
        assert read_watermark(warehouse) == to_instant("2026-01-24", UTC)  # a load moved it
        server.wait("backfill completed",
                    lambda: backfill_status() in ("COMPLETED", "COMPLETED_SUCCESS"), 60, every=1)
        # the day file is committed before the run's daily_revenue step ends: let it end
        server.wait("no run in progress at the end", lambda: idle(server), 60)
        assert sum(run["jobName"] == "orders_job" for run in runs(server)) == 2
    finally:
        warehouse.dispose()
