"""One harness for the tests that start a real ``dagster dev`` (webserver + daemon).

:func:`start_dagster_dev` starts it in its own process group, on 127.0.0.1 and a free
port, with its ``DAGSTER_HOME`` and data under a folder of the test's, from a clean
environment (no ``PIPELINE_*`` or database URL of the caller's leaks in);
:func:`stop` stops the group and checks that no process of it is left. The GraphQL
helpers and :meth:`DevServer.wait` poll with a deadline; none sleeps blindly.
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
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_assets.core.daily_files import (
    MANIFEST_RE,
    DayFilesError,
    UncommittedDayError,
    read_committed_day,
)

from .support import free_port

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent
IN_PROGRESS = ["QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING"]
# what a test's dagster dev never inherits from the environment of the test run
CALLERS_SETTINGS = ("PIPELINE_", "SOURCE_DATABASE", "WAREHOUSE_DATABASE")
QUIET_INSTANCE = "telemetry:\n  enabled: false\n"


class Timeout(AssertionError):
    pass


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
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=15) as response:
            answer = json.loads(response.read())
        if answer.get("errors"):
            raise AssertionError(f"GraphQL errors: {answer['errors']}")
        return answer["data"]

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def wait(
        self,
        what: str,
        probe: Callable[[], object],
        timeout: float,
        every: float = 0.5,
        *,
        no_failed_runs: bool = True,
    ):
        """Poll ``probe`` until it returns something truthy; fail after ``timeout`` s,
        or at once when a run has failed (with its error)."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"dagster dev exited ({self.proc.returncode}) while "
                    f"waiting for {what}:\n{self.log_tail()}"
                )
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
        raise Timeout(
            f"no {what} within {timeout:.0f} s (last: {last!r}); "
            f"dagster dev log:\n{self.log_tail()}"
        )


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
    while time.monotonic() < deadline and (
        _session_processes(pgid) or _processes_with_home(server.home)
    ):
        time.sleep(0.2)
    assert _session_processes(pgid) == [], "processes of dagster dev were left running"
    assert _processes_with_home(server.home) == [], "processes with this DAGSTER_HOME remain"


def clean_env(drop: tuple[str, ...] = CALLERS_SETTINGS, **settings: str) -> dict[str, str]:
    """The test run's environment without the variables starting with ``drop``, plus
    ``settings``, with this virtualenv's ``bin`` first on PATH."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(drop)}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env | settings


def launch(
    argv: list[str], cwd: Path, env: Mapping[str, str], log: Path, home: Path, data: Path, port: int
) -> DevServer:
    """Start ``argv`` (a ``dagster dev`` or a ``make dev``) in its own session, output to
    ``log``; the server answers GraphQL on 127.0.0.1:``port``."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return DevServer(proc, f"http://127.0.0.1:{port}/graphql", dict(env), home, data, log)


def start_dagster_dev(
    root: Path,
    *,
    instance: str = QUIET_INSTANCE,
    drop: tuple[str, ...] = CALLERS_SETTINGS,
    settings: Mapping[str, str] | None = None,
) -> DevServer:
    """``dagster dev`` with the checkout's workspace, run from ``root``: its home is
    ``root/home`` (``instance`` as its ``dagster.yaml``), its data ``root/data`` (both
    created if missing, so a test may put a source there first), ``settings`` added to
    the clean environment."""
    home, data = root / "home", root / "data"
    home.mkdir(exist_ok=True)
    data.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text(instance)
    (root / "workspace.yaml").write_text((ROOT / "workspace.yaml").read_text())
    env = clean_env(
        drop, DAGSTER_HOME=str(home), PIPELINE_DATA_DIR=str(data), **dict(settings or {})
    )
    port = free_port()
    return launch(
        [str(BIN / "dagster"), "dev", "-h", "127.0.0.1", "-p", str(port), "-w", "workspace.yaml"],
        root,
        env,
        root / "dagster-dev.log",
        home,
        data,
        port,
    )


@dataclass
class Deployment:
    """The production shape on one machine: a code server (``dagster api grpc``), the
    webserver and the daemon, each a process in a session of its own, so the daemon can
    be killed and started again while the others run. ``web`` is the webserver as a
    :class:`DevServer` (GraphQL, :meth:`DevServer.wait`)."""

    web: DevServer
    code: subprocess.Popen
    daemon: subprocess.Popen | None = None
    code_argv: list[str] | None = None  # how the code server was started, to start it again
    code_port: int | None = None

    @property
    def sessions(self) -> set[int]:
        """The session ids of the three servers (run workers are in the code server's)."""
        return {p.pid for p in (self.web.proc, self.code, self.daemon) if p is not None}

    def start_daemon(self) -> None:
        with open(self.web.home.parent / "daemon.log", "ab") as out:
            self.daemon = subprocess.Popen(
                [str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"],
                cwd=self.web.home.parent,
                env=self.web.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def kill_daemon(self) -> None:
        """SIGKILL the daemon: sensors, schedule, queue, monitoring and retries stop."""
        _end_group(self.daemon, signal.SIGKILL)

    def start_code(self) -> None:
        """Start the code server again, on its port (as a supervisor would after it died);
        returns once it listens."""
        root = self.web.home.parent
        with open(root / "code-server.log", "ab") as out:
            self.code = subprocess.Popen(
                self.code_argv,
                cwd=root,
                env=self.web.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        _wait_listening(self.code, self.code_port, root / "code-server.log")

    def kill_code(self) -> None:
        """SIGKILL the code server's session: the server and the run workers it started."""
        _end_group(self.code, signal.SIGKILL)


def _end_group(proc: subprocess.Popen | None, sig: int, timeout: float = 30) -> None:
    if proc is None:
        return
    try:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=timeout)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        _end_group(proc, signal.SIGKILL)
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # whatever of the group outlived its leader
    except ProcessLookupError:
        pass


def start_deployment(
    root: Path,
    *,
    instance: str,
    drop: tuple[str, ...] = CALLERS_SETTINGS,
    settings: Mapping[str, str] | None = None,
    module: str = "pipeline_assets.definitions",
) -> Deployment:
    """A code server of ``module``, the webserver and the daemon from ``root`` (home
    ``root/home`` with ``instance``, data ``root/data``), on a workspace that reaches the
    code server over gRPC, as a deployment runs them."""
    home, data = root / "home", root / "data"
    home.mkdir(exist_ok=True)
    data.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text(instance)
    env = clean_env(
        drop, DAGSTER_HOME=str(home), PIPELINE_DATA_DIR=str(data), **dict(settings or {})
    )
    code_port, web_port = free_port(), free_port()
    (root / "workspace.yaml").write_text(
        "load_from:\n  - grpc_server:\n      host: 127.0.0.1\n"
        f"      port: {code_port}\n      location_name: pipeline_assets\n"
    )
    code_argv = [
        str(BIN / "dagster"),
        "api",
        "grpc",
        "-m",
        module,
        "-h",
        "127.0.0.1",
        "-p",
        str(code_port),
    ]
    with open(root / "code-server.log", "wb") as out:
        code = subprocess.Popen(
            code_argv,
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    _wait_listening(code, code_port, root / "code-server.log")  # before anyone asks it
    web = launch(
        [
            str(BIN / "dagster-webserver"),
            "-h",
            "127.0.0.1",
            "-p",
            str(web_port),
            "-w",
            "workspace.yaml",
        ],
        root,
        env,
        root / "webserver.log",
        home,
        data,
        web_port,
    )
    deployment = Deployment(web, code, code_argv=code_argv, code_port=code_port)
    deployment.start_daemon()
    return deployment


def _wait_listening(proc: subprocess.Popen, port: int, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                _end_group(proc, signal.SIGKILL)
                raise Timeout(
                    f"the code server did not listen on {port}:\n"
                    f"{log.read_text(errors='replace')[-3000:]}"
                ) from None
            time.sleep(0.2)


def stop_deployment(deployment: Deployment) -> None:
    """Stop the daemon, the code server (its run workers with it) and the webserver;
    then nothing with this DAGSTER_HOME may be left."""
    _end_group(deployment.daemon, signal.SIGTERM)
    _end_group(deployment.code, signal.SIGTERM)
    stop(deployment.web)


@contextmanager
def running(server: DevServer) -> Iterator[DevServer]:
    """Yield ``server``; stop it afterwards, whatever happened, and say how long that took."""
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
                out.append(
                    f"{run_id[:8]} {event['__typename']}: {event.get('message')} {detail}".strip()
                )
    return "\n".join(out)


def backfill_runs_done(server: DevServer, backfill_id: str) -> bool:
    """Whether every run of the backfill succeeded (an assertion error if one failed). The
    daemon marks the backfill itself completed on a later pass (every 30 s)."""
    found = server.graphql(
        RUNS_QUERY, {"filter": {"tags": [{"key": "dagster/backfill", "value": backfill_id}]}}
    )
    results = found["runsOrError"]["results"]
    statuses = [r["status"] for r in results]
    assert "FAILURE" not in statuses, run_errors(server, [r["runId"] for r in results])
    return bool(statuses) and set(statuses) == {"SUCCESS"}


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
    assert not failed, f"runs failed: {failed}\n{run_errors(server, [r['runId'] for r in failed])}"


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
    return (
        {
            p.name: json.loads(p.read_text())
            for p in folder.iterdir()
            if MANIFEST_RE.fullmatch(p.name)
        }
        if folder.exists()
        else {}
    )
