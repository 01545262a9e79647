"""Reconciliation (``pipeline-assets verify``; see docs/verify.md): source vs warehouse
per day, and every day file vs its manifest and vs the warehouse.

How the parts fit, in the order a run of ``verify`` uses them:

Every part takes the declared table (``spec``, a
:class:`~pipeline_assets.core.table.spec.TableSpec`), whose words name its rows in the
report (``orders`` keeps the ones it always had: ``spec.legacy``).

- :mod:`.sides` reads the source (through the load's own scan) and the warehouse table
  as Arrow batches; :mod:`.compare` matches them by the primary key
  (:mod:`~pipeline_assets.core.rows.keys`: one column or several): per day a count, a checksum and
  what differs (:class:`DayCounts`).
- :mod:`.stored`: the SQL that reads the warehouse table's stored rows in one dialect, and
  the typed Arrow table of what it read (for :mod:`.sides`).
- :mod:`.merge`: what compared rows say per day, counted into :class:`DayCounts` (for
  :mod:`.compare`).
- :mod:`.files` checks each day file of each of the table's daily files against its
  manifest and the warehouse's rows of that file's view (:class:`FileCheck`).
- :mod:`.report` turns both into problems, each naming the table (or file) and the rows'
  keys, with the commands that repair it (built by :mod:`pipeline_assets.core.commands`,
  through :class:`Repairs`), and renders them (:class:`VerifyResult`).
- :mod:`.reconcile` puts them together (:func:`verify`, a function per kind of
  problem). The ``N_match_source`` asset check compares per-day totals only
  (:func:`compare_days`, :func:`differing_days`); on the days that differ it tells the
  rows the source deleted from those that moved by asking the source about only the
  keys that left those days, by key (:mod:`.lost`). Its days are :mod:`.horizon`'s; the
  days a full comparison still owes (touched since the last one) are :mod:`.pending`'s.

Plain Python, no Dagster: the caller passes the engines, the folder, the time zone and
``today`` (from its clock), and prints the :class:`VerifyResult`.
"""

from ..errors import VerifyError
from .compare import compare_days, compare_rows, differing_days
from .counts import DayCounts
from .files import FileCheck, check_files
from .reconcile import verify
from .report import (
    DIFFERS_FROM_SOURCE,
    FILE_DIFFERS,
    FILE_NOT_BUILT,
    FILE_STALE,
    FILE_UNCOMMITTED,
    LACKS_COLUMN,
    Problem,
    Repairs,
    VerifyResult,
)

__all__ = [
    "DIFFERS_FROM_SOURCE",
    "FILE_DIFFERS",
    "FILE_NOT_BUILT",
    "FILE_STALE",
    "FILE_UNCOMMITTED",
    "LACKS_COLUMN",
    "DayCounts",
    "FileCheck",
    "Problem",
    "Repairs",
    "VerifyError",
    "VerifyResult",
    "check_files",
    "compare_days",
    "compare_rows",
    "differing_days",
    "verify",
]
