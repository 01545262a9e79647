"""The Celery app of a worker: ``celery -A pipeline_assets.celery_worker worker``.

``deploy/celery-worker.sh`` starts one. The worker reads the same environment as every
other process of the deployment (``CELERY_BROKER_URL``, ``CELERY_BACKEND_URL``, the
database URLs, ``PAID_ORDERS_URL``, ``DAGSTER_HOME``...), loads the code location once
before it forks its processes (so a worker with a bad setting fails at start, and no
step pays for the import), and runs the steps the run workers hand to the broker.
"""

from __future__ import annotations

from . import definitions  # noqa: F401  (loaded once, before the worker forks)
from .celery_executor import make_worker_app
from .settings import from_env

app = make_worker_app(from_env())
