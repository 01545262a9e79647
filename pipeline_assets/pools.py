"""The day files' pools (``<F>_files``, one writer at a time), kept from sticking.

Dagster 1.13 registers a step waiting for a pool's slot in two steps: it asks whether a
slot is unassigned, then adds the step as pending, assigned only if the answer was yes.
A slot freed between the two (the previous writer finishing) is handed to no one: the
freeing side found no pending step yet. The new step then waits for a slot that is free,
for ever, its run STARTED, and every later writer queues behind it. Each tick of a
refresh sensor hands such a slot to the oldest waiting step, as Dagster's own freeing
would have (``assign_pending_steps``). The claim itself still takes a slot row as a
semaphore, so a step handed a slot at the same moment by Dagster waits its turn.
"""

from __future__ import annotations


def pool_name(files_name: str) -> str:
    """The pool of the day files ``files_name``: one step writes them at a time."""
    return f"{files_name}_files"


def unstick_pool(instance, pool: str) -> str | None:
    """Hands a free slot of ``pool`` to its oldest waiting step when no step holds or was
    handed it; what it did, for the sensor's log, or None when nothing was stuck."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return None
    info = storage.get_concurrency_info(pool)
    waiting = [s for s in info.pending_steps if s.assigned_timestamp is None]
    handed = len(info.pending_steps) - len(waiting)
    if not waiting or handed >= info.slot_count:
        return None
    storage.assign_pending_steps([pool])
    oldest = min(waiting, key=lambda s: (-(s.priority or 0), s.enqueued_timestamp))
    return (
        f"pool {pool}: a slot was free while step {oldest.step_key} of run "
        f"{oldest.run_id} waited for it (a slot freed as the step was queued); handed it on"
    )
