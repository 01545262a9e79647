"""The Celery broker, as plain values: its settings, where it is, and whether it answers.

``PIPELINE_EXECUTOR=celery`` runs every step as a task on the broker at
``CELERY_BROKER_URL``. Everything here is shared by the two sides that must agree: the
run worker that submits the tasks and waits for their results, and the Celery workers
that run them (``pipeline_assets.celery_worker``). Nothing imports Dagster; Celery and
kombu are imported where they run, so the code location loads without them.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from .errors import BrokerUnreachable
from .secrets import scrub

DEFAULT_BROKER_URL = "pyamqp://guest:guest@127.0.0.1:5672//"
DEFAULT_BACKEND_URL = "rpc://"
# How long the run worker tries to reach the broker before the run fails: a down broker
# fails a run in seconds, never after minutes of silent retries.
CONNECT_TIMEOUT_SECONDS = 4.0
CONNECT_ATTEMPTS = 3
# A worker that vanishes without closing its connection (a machine gone, a network cut)
# is noticed by the broker after two missed heartbeats.
HEARTBEAT_SECONDS = 10
# kombu's own name of each scheme, for the default port of the message
_DEFAULT_PORTS = {"amqp": 5672, "pyamqp": 5672, "amqps": 5671, "redis": 6379, "rediss": 6379}


def where(url: str) -> str:
    """``scheme host:port`` of a broker URL, never its user or password."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+")[0] or "?"
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:  # a port that is not a number: still say where, without secrets
        port = None
    host = parts.hostname or "localhost"
    return f"{scheme} {host}:{port}" if port else f"{scheme} {host}"


def celery_settings(backend_url: str) -> dict:
    """The Celery settings both sides use, over dagster-celery's defaults (its queue, one
    task at a time per worker process: a worker never holds a step it is not running,
    and short publish retries).

    - ``task_acks_late``: a task is acknowledged when it has finished, not when a worker
      takes it, so a worker lost in the middle of a step (SIGKILL, a machine gone) gives
      the step back to the broker, which hands it to the next worker. With the default
      (acknowledged on receipt) the step is lost with the worker and the run waits for
      its result forever.
    - ``task_reject_on_worker_lost`` stays off: when only the process running a step dies
      (an OOM kill) while its worker lives, Celery reports the task failed
      (``WorkerLostError``); the step fails and Dagster's run retry runs it again, a
      bounded number of times, instead of handing a step that kills its process back to
      the queue forever.
    - ``worker_cancel_long_running_tasks_on_connection_loss``: a worker cut from the
      broker stops the steps it runs, since the broker gives them to another worker;
      never two copies of one step at once.
    """
    settings = {
        "task_acks_late": True,
        "task_reject_on_worker_lost": False,
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "broker_connection_timeout": CONNECT_TIMEOUT_SECONDS,
        # a worker waits for a broker that is down, however long, and reconnects
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        "broker_heartbeat": HEARTBEAT_SECONDS,
        # the run worker's publish retries: as few and short as its transport's
        "task_publish_retry_policy": {
            "max_retries": 3,
            "interval_start": 0,
            "interval_step": 0.2,
            "interval_max": 0.5,
        },
        "worker_hijack_root_logger": False,
    }
    if backend_url.startswith("redis"):
        settings["redis_socket_connect_timeout"] = CONNECT_TIMEOUT_SECONDS
        settings["redis_backend_health_check_interval"] = HEARTBEAT_SECONDS
    return settings


def check_reachable(
    broker_url: str, attempts: int = CONNECT_ATTEMPTS, timeout: float = CONNECT_TIMEOUT_SECONDS
) -> None:
    """Connect to the broker once, or raise :class:`BrokerUnreachable` naming where it is
    (never its password) within about ``attempts`` × ``timeout`` seconds."""
    from kombu import Connection

    connection = Connection(
        broker_url, connect_timeout=timeout, transport_options={"socket_connect_timeout": timeout}
    )
    try:
        connection.ensure_connection(
            max_retries=max(attempts - 1, 0),
            interval_start=0.5,
            interval_step=0.5,
            interval_max=1.0,
            timeout=timeout,
        )
    except Exception as exc:  # kombu, amqp, redis and socket errors alike
        raise unreachable(broker_url, exc) from None
    finally:
        connection.release()


def connection_errors(broker_url: str) -> tuple[type[BaseException], ...]:
    """What the broker's client raises when the broker goes away (no connection made)."""
    from kombu import Connection
    from kombu.exceptions import OperationalError

    connection = Connection(broker_url)
    return (
        *connection.connection_errors,
        *connection.recoverable_connection_errors,
        OperationalError,
        ConnectionError,
    )


def unreachable(broker_url: str, exc: BaseException) -> BrokerUnreachable:
    """The one message of a broker that does not answer, from whatever the client raised."""
    detail = scrub(f"{type(exc).__name__}: {exc}".strip(), broker_url)
    return BrokerUnreachable(
        f"the Celery broker ({where(broker_url)}, CELERY_BROKER_URL) did not answer: "
        f"{detail.splitlines()[0].rstrip('.') if detail else 'no reason given'}. Start the "
        "broker (or fix CELERY_BROKER_URL); the sensors request the "
        "run again once it answers."
    )
