"""Reconciliation (``pipeline-assets verify``; see docs/verify.md): source vs warehouse
per day, and every day file vs its manifest and vs the warehouse.

How the parts fit, in the order a run of ``verify`` uses them:

- :mod:`.sides` reads the source (through the load's own scan) and the warehouse
  ``orders`` as Arrow batches; :mod:`.compare` matches them by ``order_id``: per day a
  count, a checksum and what differs (:class:`DayCounts`).
- :mod:`.files` checks each day file against its manifest and the warehouse's paid
  orders (:class:`FileCheck`).
- :mod:`.report` turns both into problems, each with the commands that repair it
  (built by :mod:`pipeline_assets.core.commands`), and renders them (:class:`VerifyResult`).
- :mod:`.reconcile` puts them together (:func:`verify`, a function per kind of
  problem). The ``orders_match_source`` asset check compares per-day totals only
  (:func:`compare_days`, :func:`differing_days`); on the days that differ it tells the
  orders the source deleted from those that moved by asking the source about only the
  keys that left those days, by key (:mod:`.lost`).

Plain Python, no Dagster: the caller passes the engines, the folder, the time zone and
``today`` (from its clock), and prints the :class:`VerifyResult`.
"""

from ..commands import orders_range_command, rebuild_command, repair_commands
from ..days import runs
from .compare import DayCounts, compare_days, compare_orders, differing_days
from .files import FileCheck, check_files
from .reconcile import verify
from .report import (
    DIFFERS_FROM_SOURCE,
    FILE_DIFFERS,
    FILE_NOT_BUILT,
    FILE_UNCOMMITTED,
    Problem,
    VerifyResult,
)
from .sides import VerifyError

__all__ = [
    "DIFFERS_FROM_SOURCE", "FILE_DIFFERS", "FILE_NOT_BUILT",
    "FILE_UNCOMMITTED", "DayCounts", "FileCheck", "Problem", "VerifyError", "VerifyResult",
    "check_files", "compare_days", "compare_orders", "differing_days",
    "orders_range_command", "rebuild_command", "repair_commands", "runs",
    "verify",
]
