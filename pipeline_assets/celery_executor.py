"""``PIPELINE_EXECUTOR=celery``: every step of every job is a task on the Celery broker.

The run worker (launched as usual: by the daemon, the CLI or the UI) plans the run and
hands each step to the broker at ``CELERY_BROKER_URL``; Celery workers started with
``deploy/celery-worker.sh`` (this module's :data:`app` after ``celery -A``) run it,
reloading the code location from its module and reaching the instance, the databases
and the bucket themselves. Results come back through ``CELERY_BACKEND_URL``.

This is ``dagster-celery``'s executor and task, with three additions:

- both sides build the Celery app from the same settings (``core.broker``): a task
  acknowledged only once its step has finished, so a worker lost in the middle of a step
  gives the step back to the broker for the next worker;
- the run worker checks once that the broker answers, so a down broker fails the run
  within seconds with a message naming its host and port, never its password;
- a worker runs a step only while its run is still in progress: a step handed back
  after its run has ended (failed, canceled, retried by a new run) is not run again
  beside the new run's.

Imported only when ``PIPELINE_EXECUTOR=celery`` (it needs the ``celery`` extra).
"""

from __future__ import annotations

import json
import logging
import warnings
from typing import Any

from celery import Celery, Task
from celery.exceptions import DuplicateTaskNameWarning
from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    Executor,
    Failure,
    InitExecutorContext,
    deserialize_value,
    executor,
    multiple_process_executor_requirements,
)
from dagster_celery.config import DEFAULT_CONFIG
from dagster_celery.executor import CELERY_CONFIG, CeleryExecutor, celery_executor
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from .core import broker
from .core.errors import PipelineError
from .settings import Settings

log = logging.getLogger("pipeline_assets.celery")
# dagster-celery registers its step task again for every step it submits; harmless
warnings.filterwarnings("ignore", category=DuplicateTaskNameWarning)
# a step may run while its run is here: a run worker waits for its result
LIVE = (DagsterRunStatus.STARTING, DagsterRunStatus.STARTED)


class PipelineCeleryExecutor(CeleryExecutor):
    """dagster-celery's executor, failing fast and clearly when the broker is down."""

    def execute(self, plan_context, execution_plan):
        try:
            broker.check_reachable(self.broker)
        except PipelineError as exc:
            raise Failure(description=str(exc), allow_retries=exc.retryable) from None
        lost = broker.connection_errors(self.broker)
        try:
            yield from super().execute(plan_context, execution_plan)
        except lost as exc:  # the broker went away while the run waited for its steps
            raise Failure(
                description=str(broker.unreachable(self.broker, exc)), allow_retries=True
            ) from None


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery settings of the run worker and the workers alike: dagster-celery's
    defaults, then ours (``core.broker.celery_settings``)."""
    return dict(DEFAULT_CONFIG, **broker.celery_settings(settings.celery_backend_url))


def build_celery_executor(settings: Settings):
    """The executor definition every job of the code location gets. The broker URL stays
    in the settings (read from the environment in each process), never in run config,
    so its password is in no run's configuration or event."""

    @executor(
        name="celery",
        config_schema={"retries": CELERY_CONFIG["retries"]},
        requirements=multiple_process_executor_requirements(),
    )
    def pipeline_celery_executor(init_context: InitExecutorContext) -> Executor:
        # dagster-celery's own executor reads the run's retry setting; ours takes it over
        retries = celery_executor.executor_creation_fn(
            InitExecutorContext(
                job=init_context.job,
                executor_def=celery_executor,
                executor_config={"retries": init_context.executor_config["retries"]},
                instance=init_context.instance,
            )
        ).retries
        return PipelineCeleryExecutor(
            retries=retries,
            broker=settings.celery_broker_url,
            backend=settings.celery_backend_url,
            config_source=celery_config(settings),
        )

    return pipeline_celery_executor


class StepTask(Task):
    """dagster-celery's step task, run only while the step's run is in progress."""

    def __call__(self, execute_step_args_packed, executable_dict):
        args = deserialize_value(json.dumps(execute_step_args_packed))
        instance = DagsterInstance.from_ref(args.instance_ref)
        try:
            run = instance.get_run_by_id(args.run_id)
            if run is None or run.status not in LIVE:
                steps = ", ".join(args.step_keys_to_execute or [])
                status = run.status.value if run else "unknown"
                worker = f" on {self.request.hostname}" if self.request.hostname else ""
                message = (
                    f"step {steps} of run {args.run_id} not run{worker}: the run "
                    f"has ended ({status})"
                )
                log.warning(message)
                if run is not None:
                    instance.report_engine_event(message, run, cls=CeleryExecutor)
                return []
        finally:
            instance.dispose()
        return super().__call__(execute_step_args_packed, executable_dict)


def make_worker_app(settings: Settings) -> Celery:
    """The Celery app of a worker: dagster-celery's queues and its step task."""
    app = make_app(
        {
            "broker": settings.celery_broker_url,
            "backend": settings.celery_backend_url,
            "include": [],
            "config_source": celery_config(settings),
        }
    )
    create_task(app, base=StepTask)
    return app
