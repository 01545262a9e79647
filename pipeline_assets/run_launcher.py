"""Dagster's default run launcher, with a health check run monitoring can call.

The default run launcher starts each run worker as a child of the code server that
received the run, and that code server marks the run failed when its child dies. Nobody
does when the code server dies too (a deploy, an OOM kill of the pod, a preempted
machine): the run stays ``STARTED`` for ever, run retries never see a failure, and the
sensors, which request nothing while a run of the same work is in progress, wait on it
for ever. Run monitoring would fail such a run, but only for a launcher that can check
its run worker, and the default one cannot.

:class:`WatchedRunLauncher` is the default launcher plus that check: the code server a
run was launched on (Dagster records its address on the run) is asked which runs it is
executing. A server that answers without the run has restarted or lost it: the run is
reported failed, so run retries and the sensors take over. A server that does not answer
is given ``unreachable_seconds`` (a supervisor restarts it on its address; the new one
then answers) before the run is reported failed too. A run a command executes in its own
process (``dagster asset materialize``, the repairs ``verify`` prints) has no code server
to ask and is left alone, as before. Configured in ``dagster.yaml``::

    run_launcher:
      module: pipeline_assets.run_launcher
      class: WatchedRunLauncher
      config:
        unreachable_seconds: 120   # optional

One code server per address, as ``dagster dev``, ``dagster api grpc`` and the Helm
chart's user deployments with one replica run it: several replicas behind one address
would each be asked about the others' runs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from dagster import DagsterRun, DefaultRunLauncher, Field, IntSource, deserialize_value

# the types of the health check every run launcher returns (Dagster's own launchers, such
# as the Kubernetes one, import them from here too); the only non-public import of the
# package
from dagster._core.launcher import CheckRunHealthResult, WorkerStatus

UNREACHABLE_SECONDS = 120
STALE_SECONDS = 3600


class WatchedRunLauncher(DefaultRunLauncher):
    """The default run launcher, whose runs run monitoring can check (module docstring)."""

    def __init__(
        self,
        inst_data: Any = None,
        unreachable_seconds: int = UNREACHABLE_SECONDS,
    ):
        super().__init__(inst_data=inst_data)
        self._unreachable_seconds = unreachable_seconds
        # run id -> (first unanswered check, latest unanswered check)
        self._unreachable_since: dict[str, tuple[float, float]] = {}

    @classmethod
    def config_type(cls):
        return {
            "unreachable_seconds": Field(
                IntSource,
                is_required=False,
                default_value=UNREACHABLE_SECONDS,
                description="How long the code server of a started run may not answer "
                "before the run is reported failed.",
            )
        }

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Mapping[str, Any]):
        return cls(inst_data=inst_data, **config_value)

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        # the code server the run was launched on, from the address Dagster records on
        # the run (None: executed by a command such as `dagster asset materialize`)
        client = self._get_grpc_client_for_termination(run.run_id)
        if client is None:
            # nobody to ask, and run monitoring fails any status but RUNNING
            return CheckRunHealthResult(WorkerStatus.RUNNING, "no code server to ask")
        address = f"{client.host}:{client.port or client.socket}"
        try:
            current = deserialize_value(client.get_current_runs()).current_runs
        except Exception as exc:  # noqa: BLE001 - any failure to ask is "no answer"
            return self._no_answer(run, address, exc)
        self._unreachable_since.pop(run.run_id, None)
        if run.run_id in current:
            return CheckRunHealthResult(WorkerStatus.RUNNING)
        return CheckRunHealthResult(
            WorkerStatus.FAILED,
            f"the code server at {address} is not running this run: it was restarted, "
            "or lost the run worker it had started",
        )

    def _no_answer(self, run: DagsterRun, address: str, exc: Exception) -> CheckRunHealthResult:
        now = time.monotonic()
        # forget runs no longer asked about (they ended while their server was away), so
        # a daemon that runs for months keeps nothing of them
        for run_id, (_, asked) in list(self._unreachable_since.items()):
            if now - asked > STALE_SECONDS:
                del self._unreachable_since[run_id]
        since = self._unreachable_since.get(run.run_id, (now, now))[0]
        self._unreachable_since[run.run_id] = (since, now)
        waited = now - since
        if waited < self._unreachable_seconds:
            # not known dead: run monitoring fails any status but RUNNING, so say RUNNING
            # and ask again at its next poll
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"{address} did not answer")
        self._unreachable_since.pop(run.run_id, None)
        return CheckRunHealthResult(
            WorkerStatus.FAILED,
            f"the code server at {address} has not answered for {waited:.0f} s "
            f"({type(exc).__name__}): its run worker is presumed lost with it",
        )
