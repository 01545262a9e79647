"""The ledger's side of a batch: its id, and the days of batches a run has not announced."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

import sqlalchemy as sa

from ..db.state import batches, of_table
from ..table.spec import TableSpec
from ..times import canonical
from ..warehouse import watermark as wm


def batch_id_for(
    kind: str, start: datetime | None, end: datetime | None, digest: str, table: str
) -> str:
    """Same table, same window and same rows → same id, so a retry of a committed batch
    is recognized (``<table>-`` and 24 hex digits).

    Derived from content only: never from the wall clock or the run id.
    """
    key = json.dumps([kind, wm.stored(start), end and canonical(end), digest])
    return f"{table}-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def days_committed_after(
    conn: sa.Connection, spec: TableSpec, announced: str | None, current: str
) -> set[str]:
    """Days touched by ``spec``'s batches committed after ``announced`` (all, if None),
    not ``current``."""
    b = batches.c
    query = sa.select(b.days_touched).where(b.batch_id != current, of_table(b.table_name, spec))
    if announced is not None:
        mark = conn.execute(sa.select(b.id).where(b.batch_id == announced)).scalar()
        if mark is None:  # unknown to this warehouse (reset, or another one): nothing owed
            return set()
        query = query.where(b.id > mark)
    days: set[str] = set()
    for (text,) in conn.execute(query):
        days.update(json.loads(text))
    return days
