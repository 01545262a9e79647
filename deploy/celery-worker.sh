#!/usr/bin/env sh
# One Celery worker for the pipeline_assets code location, in the foreground.
#
#   deploy/celery-worker.sh [more `celery worker` options]
#
# It runs the steps that runs with PIPELINE_EXECUTOR=celery hand to the broker, with the
# environment it is given: the same variables as every other process of the deployment
# (docs/deployment.md, "The environment every process needs"): CELERY_BROKER_URL,
# CELERY_BACKEND_URL, DAGSTER_HOME (the production instance, deploy/dagster.yaml) and
# DAGSTER_POSTGRES_URL, the database URLs, PAID_ORDERS_URL and the bucket's credentials.
# The code location is loaded once when the worker starts: a bad setting stops it there.
#
# Settings of this script (all optional):
#   PYTHON                     the interpreter with pipeline_assets[celery] installed
#                              (default: python3 on PATH)
#   CELERY_WORKER_NAME         the worker's node name, unique per broker
#                              (default: pipeline-assets-<pid>@<host>)
#   CELERY_WORKER_CONCURRENCY  steps this worker runs at once (default: 1; one process each)
#
# Stop it gracefully with SIGTERM (or Ctrl-C once): it takes no new step, finishes the one
# it runs, and exits. SIGQUIT (or Ctrl-C twice) stops it at once; the step it ran goes back
# to the broker (a step is acknowledged only once finished) for the next worker.
set -eu
PYTHON="${PYTHON:-python3}"
NAME="${CELERY_WORKER_NAME:-pipeline-assets-$$@%h}"
exec "$PYTHON" -m celery -A pipeline_assets.celery_worker worker \
    --hostname "$NAME" \
    --concurrency "${CELERY_WORKER_CONCURRENCY:-1}" \
    --loglevel INFO \
    "$@"
