"""What became of a run a sensor requested: the runs that carry its run key, read as
plain values (:class:`RunView`), judged by :func:`request_outcome`; and how long to wait
before asking again for work whose runs keep failing (:func:`retry_delay`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Statuses of a run that may still do its work (DagsterRunStatus values).
IN_FLIGHT = frozenset(
    {"QUEUED", "NOT_STARTED", "MANAGED", "STARTING", "STARTED", "CANCELING", "SUSPENDED"}
)
# How long a request may show no run (the daemon creates it right after the tick), and
# how long a failed run marked for a retry may wait for Dagster to launch it, before the
# sensor stops waiting and requests the work again itself.
GRACE_SECONDS = 60.0


@dataclass(frozen=True)
class RunView:
    """What a sensor needs of one run of a request: the requested run, or a retry of it."""

    run_id: str
    status: str  # a DagsterRunStatus value: "QUEUED", "STARTED", "SUCCESS", "FAILURE", …
    created_at: float  # POSIX seconds
    ended_at: float | None = None
    will_retry: bool = False  # Dagster's run retries will launch a retry of this failed run


@dataclass(frozen=True)
class Outcome:
    """Where a request stands: ``state`` is one of the ``Outcome.*`` names below."""

    state: str
    detail: str
    ended_at: float | None = None  # when the newest run ended (failed, canceled)

    SUCCEEDED = "succeeded"
    IN_FLIGHT = "in flight"
    AWAITING_RETRY = "awaiting Dagster's retry"
    FAILED = "failed"
    CANCELED = "canceled"
    LOST = "lost"

    @property
    def landed(self) -> bool:
        return self.state == Outcome.SUCCEEDED

    @property
    def busy(self) -> bool:
        """A run of the request may still do the work: request nothing for it now."""
        return self.state in (Outcome.IN_FLIGHT, Outcome.AWAITING_RETRY)

    @property
    def again(self) -> bool:
        """No run of the request will do the work: request it again, under a new key."""
        return self.state in (Outcome.FAILED, Outcome.CANCELED, Outcome.LOST)


def request_outcome(
    runs: Iterable[RunView], *, requested_at: float, now: float, grace: float = GRACE_SECONDS
) -> Outcome:
    """What became of a request, from the runs that carry its run key. Pure.

    Any successful run settles it (the requested run or a retry of it). Otherwise a run
    still queued or running makes it busy, and so does the newest run having failed with
    Dagster's retry promised (``dagster/will_retry``), for ``grace`` seconds after it
    ended. A request whose runs all failed or were canceled must be requested again —
    with retries exhausted or turned off, the sensor is what heals. So must one that
    still has no run ``grace`` seconds after it was made.
    """
    runs = sorted(runs, key=lambda r: r.created_at)
    for run in runs:
        if run.status == "SUCCESS":
            return Outcome(Outcome.SUCCEEDED, f"run {run.run_id} succeeded")
    live = [r for r in runs if r.status in IN_FLIGHT]
    if live:
        return Outcome(Outcome.IN_FLIGHT, f"run {live[-1].run_id} is {live[-1].status}")
    if not runs:
        waited = now - requested_at
        if waited < grace:
            return Outcome(Outcome.IN_FLIGHT, "its run is not created yet")
        return Outcome(Outcome.LOST, f"no run appeared within {waited:.0f} s")
    last = runs[-1]
    tries = f" after {len(runs)} run(s)" if len(runs) > 1 else ""
    if last.status == "CANCELED":
        return Outcome(Outcome.CANCELED, f"run {last.run_id} was canceled{tries}", last.ended_at)
    if last.will_retry and now - (last.ended_at if last.ended_at is not None else now) < grace:
        return Outcome(
            Outcome.AWAITING_RETRY, f"run {last.run_id} failed and Dagster will retry it"
        )
    if last.status == "FAILURE":
        return Outcome(Outcome.FAILED, f"run {last.run_id} failed{tries}", last.ended_at)
    return Outcome(Outcome.FAILED, f"run {last.run_id} ended {last.status}{tries}", last.ended_at)


def retry_delay(failures: int) -> float:
    """Seconds to wait before requesting again work whose requests failed ``failures``
    times in a row: at once for the first five (killed runs), then backing off from half a
    minute to 10 minutes (a bad row or a full disk fails every attempt the same way)."""
    if failures <= 5:
        return 0.0
    return min(30.0 * 2 ** (failures - 6), 600.0)
