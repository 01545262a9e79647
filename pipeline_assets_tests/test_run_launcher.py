"""A run whose code server dies with it is failed, and retried, instead of hanging.

With Dagster's default run launcher a run worker is a child of the code server that
received the run; when both die at once (a deploy, the pod OOM-killed) nobody marks the
run failed, and it stays ``STARTED`` for ever: no retry, and the sensors, which wait while
a run of their work is in progress, wait for ever. ``WatchedRunLauncher`` (the instance
files in ``deploy/``) lets run monitoring ask the code server whether it still runs it.

Here, for real: a code server, the webserver and the daemon as processes of their own; a
run held in its step; the code server's whole session SIGKILLed and started again on its
address. The daemon fails the run, naming why, and run retries launch it again, which
gets the pool slot the killed step held and succeeds. The two answers about a code server
that does not answer (wait, then fail) are asked of the launcher while the server is down.
A run a command executes (no code server) is checked by run monitoring and left running.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.launcher import WorkerStatus

from pipeline_assets.run_launcher import WatchedRunLauncher

from .devserver import BIN, ROOT, location_loaded, start_deployment, stop_deployment

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("stack-1")]

# a job whose one step says it started, then waits while the hold file exists
HELD_LOCATION = """
import os, time
from pathlib import Path
from dagster import Definitions, job, op

@op(pool="held_files")
def held(context):
    folder = Path(os.environ["HELD_DIR"])
    (folder / f"started-{context.run_id}").write_text("")
    deadline = time.monotonic() + 300
    while (folder / "hold").exists() and time.monotonic() < deadline:
        time.sleep(0.1)

@job
def held_job():
    held()

defs = Definitions(jobs=[held_job])
"""


def instance_yaml() -> str:
    """``make dev``'s instance (deploy/dagster-dev.yaml) as shipped, with shorter polls,
    and the pool of the held step limited to one slot as deploy/dagster.yaml limits
    the day files' writers."""
    config = yaml.safe_load((ROOT / "deploy" / "dagster-dev.yaml").read_text())
    assert config["run_launcher"]["class"] == "WatchedRunLauncher"
    config["run_launcher"]["config"] = {"unreachable_seconds": 30}
    config["run_monitoring"].update(poll_interval_seconds=1, free_slots_after_run_end_seconds=3)
    config["concurrency"] = {"pools": {"default_limit": 1, "granularity": "op"}}
    return yaml.safe_dump(config)


LAUNCH_RUN = """
mutation ($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename
  ... on LaunchRunSuccess { run { runId } }
  ... on PythonError { message }
} }
"""


def _wait(what: str, probe, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"no {what} within {timeout:.0f} s")


def test_a_run_lost_with_its_code_server_is_failed_and_retried(tmp_path: Path):
    held = tmp_path / "held"
    held.mkdir()
    (tmp_path / "held_location.py").write_text(HELD_LOCATION)
    (held / "hold").write_text("")
    deployment = start_deployment(
        tmp_path, instance=instance_yaml(), module="held_location", settings={"HELD_DIR": str(held)}
    )
    instance = None
    try:
        web = deployment.web
        web.wait("code location loaded", lambda: location_loaded(web), 120)
        instance = DagsterInstance.from_config(str(web.home))
        launched = web.graphql(
            LAUNCH_RUN,
            {
                "params": {
                    "selector": {
                        "repositoryLocationName": "pipeline_assets",
                        "repositoryName": "__repository__",
                        "jobName": "held_job",
                    },
                    "runConfigData": {},
                }
            },
        )["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]
        _wait("step started", (held / f"started-{run_id}").exists, 120)
        run = instance.get_run_by_id(run_id)
        assert run.status == DagsterRunStatus.STARTED
        assert instance.run_launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING

        deployment.kill_code()  # the server and the run worker it started, at once
        down = instance.run_launcher.check_run_worker_health(run)
        assert down.status == WorkerStatus.RUNNING and "did not answer" in down.msg
        gone = WatchedRunLauncher(unreachable_seconds=0)
        gone.register_instance(instance)
        verdict = gone.check_run_worker_health(run)
        assert verdict.status == WorkerStatus.FAILED and "has not answered" in verdict.msg

        deployment.start_code()  # as a supervisor would, on the same address
        failed = _wait(
            "the lost run failed",
            lambda: instance.get_run_by_id(run_id).status == DagsterRunStatus.FAILURE,
            60,
        )
        assert failed
        said = [e.message or "" for e in instance.all_logs(run_id)]
        assert any("is not running this run" in m for m in said), said[-5:]

        (held / "hold").unlink()  # let the retry through
        retried = _wait(
            "a successful retry",
            lambda: [
                r
                for r in instance.get_run_records(
                    RunsFilter(tags={"dagster/parent_run_id": run_id})
                )
                if r.dagster_run.status == DagsterRunStatus.SUCCESS
            ],
            120,
        )
        assert retried[0].dagster_run.job_name == "held_job"

        # a run a command executes (a repair `verify` prints) has no code server: run
        # monitoring checks it, and it runs on
        (held / "hold").write_text("")
        before = {p.name for p in held.glob("started-*")}
        command = subprocess.Popen(
            [str(BIN / "dagster"), "job", "execute", "-m", "held_location", "-j", "held_job"],
            cwd=tmp_path,
            env=web.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started = _wait(
            "the command's step started",
            lambda: {p.name for p in held.glob("started-*")} - before,
            120,
        )
        command_run = started.pop().removeprefix("started-")
        daemon_log = tmp_path / "daemon.log"
        _wait(
            "two checks of the command's run",
            lambda: daemon_log.read_text().count(f"Checking run {command_run}") >= 2,
            60,
        )
        run = instance.get_run_by_id(command_run)
        assert run.status == DagsterRunStatus.STARTED
        assert instance.run_launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING
        (held / "hold").unlink()
        out, _ = command.communicate(timeout=120)
        assert command.returncode == 0, out[-3000:]
        assert instance.get_run_by_id(command_run).status == DagsterRunStatus.SUCCESS
    finally:
        if instance is not None:
            instance.dispose()
        stop_deployment(deployment)
