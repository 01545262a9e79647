"""What became of a sensor's requests: their runs, read from the Dagster instance as the
plain values the decisions of :mod:`.core.sensing` take (:mod:`.automation` asks)."""

from dagster import RunsFilter

from .core import sensing

# Dagster's own tags, read to find the runs of a request and whether a retry is coming.
SENSOR_TAG, RUN_KEY_TAG = "dagster/sensor_name", "dagster/run_key"
WILL_RETRY_TAG = "dagster/will_retry"


def run_views(records, retries: bool = False) -> dict[str, list[sensing.RunView]]:
    """Run records as the plain values the decisions take, by run key.

    A retry Dagster launches for a failed run keeps its tags, run key included, so it is
    found under the key of the request it retries. Whether Dagster will retry a failed
    run is its tag ``dagster/will_retry``, which Dagster writes just after the run's
    failure: with run retries on (``retries``), a failed run without the tag yet counts
    as one whose retry may come (a tick between the two writes once asked for the work
    again while Dagster's retry was launched too: two loads at once).
    """
    found: dict[str, list[sensing.RunView]] = {}
    for record in records:
        run = record.dagster_run
        found.setdefault(run.tags.get(RUN_KEY_TAG, ""), []).append(
            sensing.RunView(
                run_id=run.run_id,
                status=run.status.value,
                created_at=record.create_timestamp.timestamp(),
                ended_at=record.end_time,
                will_retry=_will_retry(run, retries),
            )
        )
    return found


def _will_retry(run, retries: bool) -> bool:
    tag = run.tags.get(WILL_RETRY_TAG)
    if tag is None:  # not decided yet: Dagster tags a failed run right after failing it
        return retries and run.status.value == "FAILURE"
    return tag == "true"


def runs_with_keys(instance, sensor_name: str, keys) -> dict[str, list[sensing.RunView]]:
    """The runs of the sensor's requests ``keys``, by key: one query for them all.

    Filtered by the run key alone (its index finds the few runs of those keys) and then by
    the sensor's name here: with the sensor's tag in the query too, the database began with
    every run the sensor ever launched, a tick costing more each month (a year of runs:
    2.3x a fresh instance's tick, benchmarks/bench_history.py)."""
    keys = sorted(set(keys))
    if not keys:
        return {}
    return run_views(
        (
            record
            for record in instance.get_run_records(filters=RunsFilter(tags={RUN_KEY_TAG: keys}))
            if record.dagster_run.tags.get(SENSOR_TAG) == sensor_name
        ),
        retries=instance.run_retries_enabled,
    )


def key_seed(instance, sensor_name: str) -> str:
    """Where a fresh cursor starts its run keys: the number of runs the sensor launched so
    far, so a reset cursor never reuses the keys of the one before it."""
    return str(instance.get_runs_count(filters=RunsFilter(tags={SENSOR_TAG: sensor_name})))
