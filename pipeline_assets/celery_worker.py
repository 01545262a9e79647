"""The Celery app of a worker: ``celery -A pipeline_assets.celery_worker worker``.

``deploy/celery-worker.sh`` starts one. The worker reads the same environment as every
other process of the deployment (``CELERY_BROKER_URL``, ``CELERY_BACKEND_URL``, the
database URLs, ``PAID_ORDERS_URL``, ``DAGSTER_HOME``...), loads the code location once
before it forks its processes (so a worker with a bad setting or a bad declaration fails
at start, and no step pays for the import), and runs the steps the run workers hand to
the broker.

The code location is the module ``CELERY_WORKER_MODULE`` names (the script's ``-m``;
default this project's, ``pipeline_assets.definitions``): a user's project
(``shop.definitions``) is served the same way. Each step still names its own code
location; the module loaded here is the one whose steps cost no import.
"""

from __future__ import annotations

import importlib
import os

from .celery_executor import make_worker_app
from .core.commands import DEFINITIONS_MODULE
from .settings import from_env

MODULE = os.environ.get("CELERY_WORKER_MODULE") or DEFINITIONS_MODULE
try:
    importlib.import_module(MODULE)  # loaded once, before the worker forks
except ModuleNotFoundError as exc:
    if not exc.name or not (MODULE + ".").startswith(exc.name + "."):
        raise  # the module itself imports something missing: its own traceback says what
    raise ModuleNotFoundError(
        f"the code location {MODULE} (CELERY_WORKER_MODULE, or the worker script's -m) "
        f"does not import: {exc}; start the worker in the project's root folder, or "
        "install the project in the worker's environment",
        name=exc.name,
    ) from None

app = make_worker_app(from_env())
