"""A day files' pool never sticks: a slot freed as a writer is queued is handed on.

Dagster 1.13 asks whether a pool has an unassigned slot, then queues the step, assigned
only if the answer was yes; a slot freed between the two is handed to no one, and the
step's run waits for ever (found by the soak: a run STARTED for minutes, its pool free).
This builds that state with Dagster's own calls on a real SQLite instance, in the order
the race takes, then ticks the refresh sensor as the daemon would.
"""

from __future__ import annotations

from dagster import DagsterInstance

from pipeline_assets.pools import pool_name

from .test_automation import setup, tick  # noqa: F401  (setup is a fixture)

POOL = pool_name("paid_orders")


def stuck(storage) -> None:
    """Run a holds the pool's one slot; run b asks for it (none free); a frees it (no
    step queued yet to hand it to); b is queued, unassigned."""
    storage.set_concurrency_slots(POOL, 1)
    assert storage.claim_concurrency_slot(POOL, "run-a", "paid_orders").is_claimed
    assert not storage.has_unassigned_slots(POOL)
    storage.free_concurrency_slot_for_step("run-a", "paid_orders")
    storage.add_pending_step(
        concurrency_key=POOL, run_id="run-b", step_key="paid_orders", should_assign=False
    )


def test_a_slot_freed_as_a_writer_is_queued_is_handed_on_by_the_next_tick(setup, tmp_path):  # noqa: F811
    _, defs, _, _ = setup
    (tmp_path / "home").mkdir()
    with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        storage = instance.event_log_storage
        stuck(storage)
        # Dagster alone: the slot is free, and the step is told to wait, however often
        for _ in range(3):
            assert not storage.claim_concurrency_slot(POOL, "run-b", "paid_orders").is_claimed
        assert storage.get_concurrency_info(POOL).claimed_slots == []

        tick(defs, "paid_orders_refresh_sensor", instance)

        assert storage.claim_concurrency_slot(POOL, "run-b", "paid_orders").is_claimed
        # and a writer that holds the slot is left alone: the next one waits its turn
        storage.add_pending_step(
            concurrency_key=POOL, run_id="run-c", step_key="paid_orders", should_assign=False
        )
        tick(defs, "paid_orders_refresh_sensor", instance)
        assert not storage.claim_concurrency_slot(POOL, "run-c", "paid_orders").is_claimed
        storage.free_concurrency_slot_for_step("run-b", "paid_orders")
        assert storage.claim_concurrency_slot(POOL, "run-c", "paid_orders").is_claimed
