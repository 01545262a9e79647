"""``PIPELINE_EXECUTOR=celery``: every step a task on a real broker, run by real workers.

1. The setting: which executor every job gets, the implicit job of a UI backfill too; a
   broker that does not answer is named (host and port, never its password) within
   seconds.
2. The daily job and a range backfill on the Celery executor, with two workers of
   ``deploy/celery-worker.sh`` over RabbitMQ (a virtual host of the test's own), the
   instance of ``deploy/dagster.yaml`` on PostgreSQL, source and warehouse on PostgreSQL
   and the files in the bucket, give the same day files and warehouse as in-process
   execution. The workers have a home and a data folder of their own: nothing reaches
   them through a shared local disk.
3. The broker goes down (a private ``redis-server`` with a password): the run whose step
   waits in it fails within seconds, runs launched meanwhile fail before handing out any
   step, each naming the broker's host and port and never its password; once the broker
   and a worker are back, the sensors' requests bring the pipeline back with nothing done
   by hand.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from pipeline_assets import demo
from pipeline_assets.core import broker
from pipeline_assets.core.daily_files import open_store
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.errors import SettingsError
from pipeline_assets.core.sensing import read_watermark
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC
from pipeline_assets.definitions import build_definitions
from pipeline_assets.settings import from_env

from .brokers import CeleryWorker, RedisServer
from .devserver import (
    QUIET_INSTANCE,
    ROOT,
    clean_env,
    committed_ids,
    idle,
    location_loaded,
    running,
    start_dagster_dev,
)
from .stores import all_files
from .support import free_port
from .worlds import (
    BACKFILL,
    CALLERS,
    DAILY,
    demo_world,
    execute_job,
    in_process,
    psycopg2_url,
    warehouse_tables,
)

SECRET = "broker-secret-" + uuid.uuid4().hex


# --- 1. the setting --------------------------------------------------------------------


def _executors(env: dict[str, str]) -> set[str]:
    defs = build_definitions(from_env(env))
    jobs = [defs.resolve_job_def(name) for name in ("orders_job", "daily_files_job", "daily_job")]
    jobs.append(defs.resolve_implicit_global_asset_job_def())  # what a UI backfill runs
    return {job.executor_def.name for job in jobs}


def test_pipeline_executor_gives_every_job_its_executor(tmp_path):
    base = {"PIPELINE_DATA_DIR": str(tmp_path)}
    assert _executors(base) == {"multi_or_in_process_executor"}
    assert _executors(base | {"PIPELINE_EXECUTOR": "default"}) == {"multi_or_in_process_executor"}
    assert _executors(base | {"PIPELINE_EXECUTOR": "celery"}) == {"celery"}
    with pytest.raises(SettingsError, match="PIPELINE_EXECUTOR='k8s' must be one of"):
        from_env(base | {"PIPELINE_EXECUTOR": "k8s"})


@pytest.mark.parametrize(
    "template",
    ["redis://:{secret}@127.0.0.1:{port}/0", "pyamqp://guest:{secret}@127.0.0.1:{port}//"],
    ids=["redis", "rabbitmq"],
)
def test_an_unreachable_broker_is_named_without_its_password_within_seconds(template):
    url = template.format(secret=SECRET, port=free_port())  # nothing listens there
    started = time.monotonic()
    with pytest.raises(broker.BrokerUnreachable) as caught:
        broker.check_reachable(url)
    assert time.monotonic() - started < 30  # a bound, not a speed: never minutes of retries
    message = str(caught.value)
    assert f"127.0.0.1:{sa.engine.make_url(url.replace('pyamqp', 'amqp')).port}" in message
    assert "CELERY_BROKER_URL" in message
    assert SECRET not in message
    assert caught.value.retryable


# --- 2. the same files and warehouse as in process -------------------------------------


def _settings_for_workers(env: dict[str, str], root: Path, instance: str) -> dict[str, str]:
    """The workers' environment: the run's, with a home (``instance`` its dagster.yaml)
    and a data folder of their own."""
    home = root / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(instance)
    return env | {"DAGSTER_HOME": str(home), "PIPELINE_DATA_DIR": str(root / "data")}


def _steps_done(workers: list[CeleryWorker]) -> int:
    return sum(w.log.read_text(errors="replace").count("succeeded in") for w in workers)


@pytest.mark.e2e
@pytest.mark.postgres
@pytest.mark.s3
@pytest.mark.celery
def test_the_celery_executor_gives_the_same_files_and_warehouse(tmp_path, postgres, bucket, rabbit):
    files, tables = in_process(tmp_path / "in_process")

    url = f"{bucket}/paid_orders"
    source, warehouse = postgres.url("source"), postgres.url("warehouse")
    home = tmp_path / "run" / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text((ROOT / "deploy" / "dagster.yaml").read_text())
    env = {key: value for key, value in os.environ.items() if not key.startswith(CALLERS)}
    env |= demo_world(tmp_path / "run" / "data", source, warehouse, url)
    env |= {
        "DAGSTER_HOME": str(home),
        "DAGSTER_POSTGRES_URL": psycopg2_url(postgres.url("instance")),
        "PIPELINE_EXECUTOR": "celery",
        "CELERY_BROKER_URL": rabbit.url,
    }
    production = (ROOT / "deploy" / "dagster.yaml").read_text()
    workers = [
        CeleryWorker(
            f"w{n}",
            _settings_for_workers(env, tmp_path / f"worker{n}", production),
            tmp_path / f"worker{n}.log",
        )
        for n in (1, 2)
    ]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.wait_ready()
        for job, tags in (DAILY, BACKFILL):
            done = execute_job(job, tags, env, tmp_path)
            assert "Executing steps using multiprocess executor" not in done.stderr
            assert 'Submitting celery task for step "paid_orders"' in done.stderr
    finally:
        for worker in workers:
            worker.stop()
    # five steps (orders, then paid_orders and daily_revenue twice), each run by a worker
    assert _steps_done(workers) == 5

    remote = all_files(open_store(url).path())
    assert {name: data for name, data in remote.items() if name.startswith("2026-")} == files
    assert warehouse_tables(warehouse) == tables


# --- 3. the broker goes down ---------------------------------------------------------


def _dev_instance_without_retries() -> str:
    """make dev's instance with run retries off: only the sensors may bring it back."""
    config = yaml.safe_load((ROOT / "deploy" / "dagster-dev.yaml").read_text())
    config["run_retries"]["enabled"] = False
    return yaml.safe_dump(config)


def _run_text(instance: DagsterInstance, run_id: str) -> str:
    """Every message and error of a run's events, as one text."""
    out = []
    for entry in instance.all_logs(run_id):
        out.append(entry.user_message or "")
        event = entry.dagster_event
        error = getattr(event.event_specific_data, "error", None) if event else None
        if error is not None:
            out.append(error.to_string())
    return "\n".join(out)


def _loads(instance: DagsterInstance, *statuses) -> list:
    return instance.get_run_records(RunsFilter(job_name="orders_job", statuses=list(statuses)))


def _stored_ids(warehouse: sa.Engine) -> set[int]:
    with warehouse.connect() as conn:
        return {row[0] for row in conn.execute(sa.text("SELECT order_id FROM orders"))}


def _paid_by_day(source: sa.Engine) -> dict[str, list[int]]:
    with source.connect() as conn:
        found = conn.execute(
            sa.text("SELECT order_id, updated_at FROM orders WHERE status = 'paid'")
        )
        out: dict[str, list[int]] = {}
        for order_id, updated_at in found:
            out.setdefault(str(updated_at)[:10], []).append(order_id)
    return {day: sorted(ids) for day, ids in out.items()}


@pytest.mark.e2e
@pytest.mark.celery
@pytest.mark.xdist_group("stack-2")
def test_a_broker_down_fails_runs_in_seconds_and_the_sensors_bring_the_pipeline_back(tmp_path):
    redis = RedisServer(tmp_path / "redis", SECRET)
    host_port = f"127.0.0.1:{redis.port}"
    data = tmp_path / "data"
    data.mkdir()
    source = make_engine(f"sqlite:///{data / 'app.db'}", role="app")
    demo.init(source)  # the chapter's orders 101-106, dated in January 2026
    settings = {"PIPELINE_EXECUTOR": "celery", "CELERY_BROKER_URL": redis.url}
    # one machine: the worker reaches the SQLite files and the folder where the runs do
    worker = CeleryWorker(
        "w1",
        _settings_for_workers(clean_env(CALLERS) | settings, tmp_path / "worker", QUIET_INSTANCE)
        | {
            "SOURCE_DATABASE_URL": f"sqlite:///{data / 'app.db'}",
            "WAREHOUSE_DATABASE_URL": f"sqlite:///{data / 'warehouse.db'}",
            "PAID_ORDERS_URL": str(data / "paid_orders"),
        },
        tmp_path / "worker.log",
    )
    worker.start()
    server = start_dagster_dev(
        tmp_path, instance=_dev_instance_without_retries(), settings=settings
    )
    instance = None
    try:
        with running(server):
            worker.wait_ready()
            server.wait(
                "code location loaded", lambda: location_loaded(server), 120, no_failed_runs=False
            )
            instance = DagsterInstance.from_config(str(server.home))
            warehouse = make_engine(f"sqlite:///{data / 'warehouse.db'}", role="warehouse")
            server.wait(
                "the first load, on the Celery worker",
                lambda: read_watermark(warehouse, spec=ORDERS) is not None,
                180,
            )
            server.wait(
                "its days rebuilt",
                lambda: all(
                    committed_ids(data, day) == ids for day, ids in _paid_by_day(source).items()
                ),
                180,
            )
            server.wait("no run in progress", lambda: idle(server), 120)

            # no worker: the next load's step waits in the broker; then the broker dies
            worker.stop()
            demo.set_order(
                source, 901, status="paid", amount="9.01", updated_at="2026-01-26T10:00:00", tz=UTC
            )
            queued = server.wait(
                "a load whose step waits in the broker",
                lambda: [
                    r
                    for r in _loads(instance, DagsterRunStatus.STARTED)
                    if "Submitting celery task" in _run_text(instance, r.dagster_run.run_id)
                ],
                120,
                no_failed_runs=False,
            )[0].dagster_run.run_id
            redis.stop()
            stopped = time.monotonic()
            server.wait(
                "that load failed",
                lambda: instance.get_run_by_id(queued).status == DagsterRunStatus.FAILURE,
                120,
                no_failed_runs=False,
            )
            waited = time.monotonic() - stopped
            assert waited < 60  # a bound, not a speed: never minutes of silent retries
            # while the broker is down, the sensor asks again: those loads fail at once
            server.wait(
                "a load launched while the broker was down, failed",
                lambda: [
                    r
                    for r in _loads(instance, DagsterRunStatus.FAILURE)
                    if r.dagster_run.run_id != queued
                ],
                120,
                no_failed_runs=False,
            )
            failures = _loads(instance, DagsterRunStatus.FAILURE)
            for record in failures:
                text = _run_text(instance, record.dagster_run.run_id)
                assert host_port in text and "Celery broker" in text, text[-2000:]
                assert SECRET not in text
            fast = [r for r in failures if r.dagster_run.run_id != queued]
            assert all(r.end_time - r.start_time < 30 for r in fast), [
                r.end_time - r.start_time for r in fast
            ]

            # the broker and a worker back: nothing done by hand from here
            back = time.monotonic()
            redis.start()
            worker.start()
            worker.wait_ready()
            server.wait(
                "order 901 loaded", lambda: 901 in _stored_ids(warehouse), 240, no_failed_runs=False
            )
            server.wait(
                "every day file equal to the source",
                lambda: all(
                    committed_ids(data, day) == ids for day, ids in _paid_by_day(source).items()
                ),
                240,
                no_failed_runs=False,
            )
            assert _loads(instance, DagsterRunStatus.SUCCESS)[0].end_time > max(
                r.end_time for r in failures
            )
            first_line = _run_text(instance, queued).split("the Celery broker", 1)[1]
            print(
                f"\nbroker down: the waiting load failed {waited:.1f} s after the broker "
                f"stopped; {len(fast)} load(s) launched meanwhile failed in "
                f"{', '.join(f'{r.end_time - r.start_time:.1f}' for r in fast)} s; "
                f"converged {time.monotonic() - back:.1f} s after the broker came back."
                f"\nthe message: the Celery broker{first_line.splitlines()[0]}"
            )
            warehouse.dispose()
        for log in (server.log, worker.log, tmp_path / "redis" / "redis.log"):
            assert SECRET not in log.read_text(errors="replace"), log
    finally:
        worker.stop()
        redis.stop()
        source.dispose()
        if instance is not None:
            instance.dispose()


# --- a step handed back after its run has ended is not run -----------------------------


def test_a_worker_does_not_run_a_step_of_a_run_that_has_ended(tmp_path, monkeypatch):
    """A step the broker hands back after its run has failed (its run worker killed, the
    run retried by a new one) must not run beside the new run's: the worker's task looks
    at the run first, reports why it skips, and runs nothing. Called in this process, as
    the worker calls it (no broker needed)."""
    from dagster._core.definitions.reconstruct import ReconstructableRepository
    from dagster._grpc.types import ExecuteStepArgs
    from dagster._serdes import pack_value

    from pipeline_assets.celery_executor import make_worker_app

    env = demo_world(tmp_path / "data")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = from_env(env | {"PIPELINE_EXECUTOR": "celery"})
    job = ReconstructableRepository.for_module(
        "pipeline_assets.definitions",
        "defs",
        working_directory=str(ROOT),
    ).get_reconstructable_job("orders_job")
    (tmp_path / "home").mkdir()
    with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        run = instance.create_run_for_job(job_def=job.get_definition(), job_code_origin=None)
        instance.report_run_failed(run)
        args = ExecuteStepArgs(
            job_origin=job.get_python_origin(),
            run_id=run.run_id,
            step_keys_to_execute=["orders"],
            instance_ref=instance.get_ref(),
        )
        task = make_worker_app(settings).tasks["execute_plan"]
        assert task(pack_value(args), job.to_dict()) == []
        messages = [e.message for e in instance.all_logs(run.run_id)]
        assert any("the run has ended (FAILURE)" in m for m in messages), messages
        assert not any(
            e.dagster_event.is_step_event for e in instance.all_logs(run.run_id) if e.dagster_event
        )
    assert not (tmp_path / "data" / "warehouse.db").exists()  # nothing loaded
