"""An append-only table's holes: ids missing below what a run read, read again later.

An id is handed out when the app inserts a row and seen when its transaction commits, so
a run can read ids 7 and 9 while 8's transaction is still open. ``lookback_ids`` reads 8
again if it commits soon enough; a hole remembers it beyond that. Each incremental run of
a table with an integer cursor:

- reads, besides its window, the remembered ids below the window's start, by key (one
  ``IN`` list: at most :data:`HOLES_KEPT` ids, through the cursor's index);
- then, in the batch's transaction, finds the ids missing between
  ``max(the watermark it started from + 1, newest − HOLE_SPAN × lookback_ids)`` (on a
  first run, the table's lowest id) and the newest id read (below, the runs before have
  looked), adds them to those still missing, forgets those found, and those first
  missed more than :data:`HOLE_HOURS` ago (an id rolled back never fills; a transaction
  open for a day is an incident: ``verify`` names its row's day), and keeps the
  :data:`HOLES_KEPT` highest.

A late commit within those bounds is loaded by the next run without a repair; beyond
them, ``verify`` finds it as before. ``pipeline_id_holes`` holds them, per table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import sqlalchemy as sa

from ..db.schema import warehouse_table
from ..db.state import id_holes, of_table
from ..table.spec import TableSpec
from ..times import canonical

HOLES_KEPT = 1_000  # per table, the highest ids kept
HOLE_HOURS = 24  # a hole not filled within a day is forgotten
HOLE_SPAN = 10  # holes are looked for within this many lookbacks below the newest id
MAX_SPAN = 100_000  # and never across more ids than this (a lookback_ids of millions)
_CHUNK = 500  # ids per IN list when asking the warehouse which it holds


@dataclass(frozen=True)
class Holes:
    """What a run did with its table's holes: how many it keeps, how many it filled."""

    remembered: int = 0
    filled: int = 0


def remembered(conn: sa.Connection, spec: TableSpec, below: int | None) -> tuple[int, ...]:
    """The table's remembered holes below ``below`` (the window's start), ascending."""
    if below is None:
        return ()
    query = (
        sa.select(id_holes.c.id)
        .where(of_table(id_holes.c.table_name, spec), id_holes.c.id < below)
        .order_by(id_holes.c.id)
    )
    return tuple(int(n) for n in conn.execute(query).scalars())


def update(
    conn: sa.Connection, spec: TableSpec, before: int | None, newest: int | None, now: datetime
) -> Holes:
    """Remember the ids missing up to ``newest`` (see the module docstring); in the
    batch's transaction, after its merge. Up to ``before`` (the watermark the run started
    from) the runs before have looked already: only the ids above it are searched."""
    c = id_holes.c
    old = {
        int(n): seen
        for n, seen in conn.execute(
            sa.select(c.id, c.seen_at).where(of_table(c.table_name, spec))
        ).all()
    }
    if newest is None and not old:
        return Holes()
    column = warehouse_table(spec).c[spec.cursor]
    held = set(_held(conn, column, sorted(old)))
    missing = {}
    if newest is not None and (before is None or newest > before):
        span = min(HOLE_SPAN * spec.lookback_ids, MAX_SPAN)
        if before is None:  # the first run: from the table's lowest id
            lowest = conn.execute(sa.select(sa.func.min(column))).scalar()
            low = max(newest - span, int(lowest if lowest is not None else newest))
        else:
            low = max(newest - span, before + 1)
        present = conn.execute(sa.select(column).where(column >= low, column <= newest)).scalars()
        ids = np.fromiter((int(n) for n in present), np.int64)
        gaps = np.setdiff1d(np.arange(low, newest + 1), ids)[-HOLES_KEPT:]  # the highest
        missing = {int(n): canonical(now) for n in gaps}
    forget = canonical(now - timedelta(hours=HOLE_HOURS))
    kept = {n: seen for n, seen in old.items() if n not in held and seen >= forget}
    # a hole keeps the time it was first missed; one this run forgets, it does not add back
    kept |= {n: seen for n, seen in missing.items() if n not in old}
    kept = dict(sorted(kept.items())[-HOLES_KEPT:])
    if kept != old:
        conn.execute(id_holes.delete().where(of_table(c.table_name, spec)))
        if kept:
            conn.execute(
                id_holes.insert(),
                [{"table_name": spec.name, "id": n, "seen_at": s} for n, s in kept.items()],
            )
    return Holes(remembered=len(kept), filled=len(held))


def _held(conn: sa.Connection, column: sa.Column, ids: list[int]) -> list[int]:
    """Which of ``ids`` the warehouse table holds now."""
    found: list[int] = []
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        found += [
            int(n) for n in conn.execute(sa.select(column).where(column.in_(chunk))).scalars()
        ]
    return found
