"""Named crash points, to prove that a crash at any step loses and doubles nothing.

Off unless ``PIPELINE_CRASH_AT`` names a point, or several separated by commas (read
here and nowhere else). Then the process dies there with SIGKILL, as a killed pod would;
with ``PIPELINE_CRASH_MODE=raise`` it raises :class:`SimulatedCrash` instead, and with
``PIPELINE_CRASH_MODE=group`` its whole process group dies with it (a Celery worker and
its pool, as a machine lost in the middle of a step). With
``PIPELINE_CRASH_ONCE_FILE=<path>`` each point crashes only while its marker does not
exist — ``<path>`` itself for a single point, ``<path>.<point>`` for each of several —
and creates it first (one process wins the marker), so the retry runs through.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

POINTS = (
    "load_after_alter",  # a declared change made to the warehouse table, nothing read yet
    "load_after_stage",  # every row read, validated and staged; nothing compared yet
    "load_after_compare",  # every row staged and compared with the warehouse, not merged
    "load_before_delete",  # a range load: what it deletes found and allowed, not deleted
    "load_after_delete",  # a range load: the orders the source lost deleted, not merged
    "load_after_merge",  # the stage merged into orders; watermark and ledger not yet
    "load_after_watermark",  # rows and watermark written, ledger not yet, still open
    "load_before_commit",  # rows, ledger and watermark written, transaction still open
    "load_after_commit",  # committed, but the run has not heard of it (lost ack)
    "day_file_before_rename",  # a day file's temp written and fsynced, not yet renamed
    "manifest_before_rename",  # the manifest's temp written, not yet renamed
    "files_between_days",  # some day files of a range replaced, others not yet
    "files_before_manifest",  # every day file in place, no manifest yet
    "files_after_manifest",  # manifest written, per-day pointers not yet updated
    "files_after_pointers",  # pointers updated, the run's head not yet marked done
)


class SimulatedCrash(RuntimeError):
    """Raised at a crash point when PIPELINE_CRASH_MODE=raise: it stands for the process
    dying there, which is transient (``errors.retryable``): a retry runs through."""

    transient = True


def crash_point(name: str) -> None:
    """Die here if the environment asks for it; one dict lookup otherwise."""
    wanted = os.environ.get("PIPELINE_CRASH_AT")
    if not wanted or name not in wanted.split(","):
        return
    once = os.environ.get("PIPELINE_CRASH_ONCE_FILE")
    if once:
        marker = Path(once) if wanted == name else Path(f"{once}.{name}")
        try:
            with open(marker, "x") as handle:  # exclusive: one crash per marker
                handle.write(name)
        except FileExistsError:
            return
    mode = os.environ.get("PIPELINE_CRASH_MODE")
    if mode == "raise":
        raise SimulatedCrash(f"simulated crash at {name}")
    if mode == "group":
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
