"""The processes of a running deployment, as the kill tests and the soak find them: the
run workers and step workers of live runs (never the servers themselves), read from
``/proc`` and the runs' events, and the SIGKILL that records what it killed."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus

LIVE = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED]
# the long-lived processes of dagster dev: never killed here
SERVERS = (
    "dagster dev",
    "dagster-webserver",
    "dagster-daemon",
    "dagster api grpc",
    "dagster code-server",
    "dagster_webserver",
    "dagster._daemon",
)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def killable(sessions: set[int], pid: int | None) -> bool:
    """A live run or step worker in one of ``sessions`` (those of the servers that launch
    runs): never one of the servers themselves."""
    if not pid or pid in sessions:
        return False
    try:
        if os.getsid(pid) not in sessions:
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


def workers(
    instance: DagsterInstance, sessions: set[int], runs, celery: set[int] = frozenset()
) -> list[tuple]:
    """(pid, role, run id, job) of the workers of ``runs``: the run worker is the process
    that reported RUN_START; the step workers are its child processes that run a step
    (from their start, not only once the step has reported STEP_START), or, with the
    steps on Celery workers (``celery``: their sessions), the worker process that reported
    the step's STEP_START."""
    found = []
    for record in runs:
        run = record.dagster_run
        for entry in instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_START):
            pid = entry.dagster_event.pid
            found.append((pid, "run worker", run.run_id, run.job_name))
            found += [
                (child, "step worker", run.run_id, run.job_name)
                for child in children(pid)
                if "spawn_main" in cmdline(child)
            ]
        if celery:
            found += [
                (entry.dagster_event.pid, "step worker", run.run_id, run.job_name)
                for entry in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_START)
            ]
    return [w for w in found if killable(sessions | set(celery), w[0])]


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
