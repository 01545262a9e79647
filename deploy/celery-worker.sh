#!/usr/bin/env sh
# One Celery worker for a pipeline_assets code location, in the foreground.
#
#   deploy/celery-worker.sh [-m MODULE] [more `celery worker` options]
#
# It runs the steps that runs with PIPELINE_EXECUTOR=celery hand to the broker, with the
# environment it is given: the same variables as every other process of the deployment
# (docs/deployment.md, "The environment every process needs"): CELERY_BROKER_URL,
# CELERY_BACKEND_URL, DAGSTER_HOME (the production instance, deploy/dagster.yaml) and
# DAGSTER_POSTGRES_URL, the database URLs, PAID_ORDERS_URL and the bucket's credentials.
# The code location is loaded once when the worker starts: a bad setting stops it there.
#
# The code location: this project's (pipeline_assets.definitions) unless named, as the
# `dagster` CLI names it: `-m shop.definitions` (first, before the celery options), or
# CELERY_WORKER_MODULE. Run the worker where that module imports: with the project
# installed in the interpreter's environment, or from the project's root folder.
#
# Settings of this script (all optional):
#   CELERY_WORKER_MODULE       the code location's module, as `-m` gives it
#                              (default: pipeline_assets.definitions)
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
case "${1:-}" in
    -m|--module)
        [ $# -ge 2 ] && [ -n "$2" ] || {
            echo "celery-worker.sh: error: $1 needs a module, such as -m shop.definitions" >&2
            exit 2
        }
        CELERY_WORKER_MODULE="$2"
        shift 2 ;;
    -m*)
        CELERY_WORKER_MODULE="${1#-m}"
        shift ;;
esac
CELERY_WORKER_MODULE="${CELERY_WORKER_MODULE:-pipeline_assets.definitions}"
export CELERY_WORKER_MODULE
PYTHON="${PYTHON:-python3}"
NAME="${CELERY_WORKER_NAME:-pipeline-assets-$$@%h}"
exec "$PYTHON" -m celery -A pipeline_assets.celery_worker worker \
    --hostname "$NAME" \
    --concurrency "${CELERY_WORKER_CONCURRENCY:-1}" \
    --loglevel INFO \
    "$@"
