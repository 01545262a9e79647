"""Step 1 of a batch: what it reads. Under the lock of the table's watermark row, the
declaration is checked and the table brought to it, and the window is decided from the
watermark (an incremental load) or given (a range load).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, tzinfo

import sqlalchemy as sa

from ..crash import crash_point
from ..db.state import ensure_schema
from ..table.spec import TableSpec
from ..warehouse import declaration, evolve
from ..warehouse import watermark as wm
from . import holes


@dataclass(frozen=True)
class Window:
    """What a batch reads: ``[start, end)`` (None: open), and the watermark it found."""

    kind: str  # "incremental" or "range"
    start: datetime | None
    end: datetime | None
    before: datetime | None  # the watermark when the batch began
    evolution: evolve.Evolution  # what changed in the declaration, done to the table
    also: tuple[int, ...] = ()  # an id cursor's remembered holes below start, read too


def window_for(
    conn: sa.Connection,
    spec: TableSpec,
    kind: str,
    start: datetime | None,
    end: datetime | None,
    lookback_days: int,
    dry_run: bool,
    tz: tzinfo,
) -> Window:
    """Step 1: lock the table's watermark row, refuse a changed key or change stamp, bring
    the table to its declaration (core/warehouse/evolve.py), read the watermark, decide what to
    read."""
    if dry_run:
        ensure_schema(conn, spec)  # rolled back at the end: a dry run writes nothing
    else:
        wm.lock(conn, kind, table=spec.name)
    # under the lock: the latest declaration is the one the last committed batch used
    stored = declaration.latest(conn, spec)
    declaration.check_unchanged(conn, spec, stored)
    evolution = evolve.evolve(conn, spec, stored, tz)
    before = wm.read(conn, table=spec.name)
    also: tuple[int, ...] = ()
    if kind == "incremental":  # an integer cursor looks back in ids, its declaration's
        start = wm.window_start(before, spec.lookback_ids if spec.counts_ids else lookback_days)
        if spec.counts_ids:
            also = holes.remembered(conn, spec, below=start)
    if evolution.altered:
        crash_point("load_after_alter")
    return Window(kind, start, end, before, evolution, also)
