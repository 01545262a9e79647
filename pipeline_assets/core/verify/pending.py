"""The days the full comparison still owes: those touched since it last ran.

A load's own check compares the window and the days that load read whole, which costs
what the load read (:mod:`.horizon`). A day a batch touched outside both (a row left it
for a newer day) is left to the full comparison, which the daily schedule's run makes:
it compares the window plus every day touched by the table's batches committed since the
last full comparison that passed, and then records the last of those batches
(``pipeline_comparisons``). A comparison that fails records nothing, so its days stay
owed until one passes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..db.engines import guard, has_table, writing
from ..db.state import batches, comparisons, of_table
from ..table.spec import TableSpec
from ..times import canonical, parse_day

_ENV = "WAREHOUSE_DATABASE_URL"


@dataclass(frozen=True)
class Owed:
    """The days touched since the last full comparison, and the ledger row they run to."""

    days: tuple[date, ...]
    through_id: int | None  # None: no batch since (nothing to record)


def owed_days(warehouse: Engine, spec: TableSpec) -> Owed:
    """The days ``spec``'s batches touched after its last full comparison (all of its
    batches, when none has run), read in one transaction; nothing before a load of this
    release made the state tables (every check follows a load)."""
    if not has_table(warehouse, comparisons.name, _ENV):  # made with the state tables
        return Owed((), None)
    b = batches.c
    with guard(warehouse, _ENV), warehouse.connect() as conn:
        since = conn.execute(
            sa.select(comparisons.c.through_id).where(comparisons.c.table_name == spec.name)
        ).scalar()
        query = sa.select(b.id, b.days_touched).where(of_table(b.table_name, spec))
        if since is not None:
            query = query.where(b.id > since)
        days: set[str] = set()
        through = None
        for row_id, text in conn.execute(query):
            days.update(json.loads(text))
            through = row_id if through is None else max(through, row_id)
    return Owed(tuple(sorted(parse_day(d) for d in days)), through)


def record_compared(warehouse: Engine, spec: TableSpec, owed: Owed, at: datetime) -> None:
    """Record that the days of ``owed`` were compared and agreed (nothing, when no batch
    was owed). The table exists: the load before the check made it (``ensure_schema``)."""
    if owed.through_id is None:
        return
    row = {"through_id": owed.through_id, "compared_at": canonical(at)}
    c = comparisons.c
    with guard(warehouse, _ENV), writing(warehouse).begin() as conn:
        done = conn.execute(
            sa.update(comparisons)
            .where(c.table_name == spec.name, c.through_id < owed.through_id)
            .values(**row)
        ).rowcount
        known = conn.execute(sa.select(c.table_name).where(c.table_name == spec.name)).first()
        if not done and known is None:
            conn.execute(sa.insert(comparisons).values(table_name=spec.name, **row))
