"""Orders deleted in the app: the delete step of a range load, and its guard.

A range load replaces its range by key (docs/guarantees.md, "Orders deleted in the app"):
the warehouse rows stamped in its range whose ``order_id`` the source holds nowhere any
more are deleted in the load's own transaction — unless they are more than the policy's
share of the range, which is what a source answering with missing rows looks like (a
wrong URL, a replica being rebuilt): then the load refuses, writing nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, tzinfo

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy.engine import Engine

from .columnar import days_of
from .crash import crash_point
from .errors import DeleteRefused
from .source import SourceTable, scan_keys
from .staging import Stage

MAX_DELETE_SHARE = 0.5  # the default of the setting of the same name


@dataclass(frozen=True)
class DeletePolicy:
    """What a range load may delete: at most ``max_share`` of the warehouse rows stamped in
    its range (MAX_DELETE_SHARE), unless ``allow`` (run config ``allow_deletes: true``)."""

    max_share: float = MAX_DELETE_SHARE
    allow: bool = False


GUARDED = DeletePolicy()  # the default: at most MAX_DELETE_SHARE, never more


@dataclass(frozen=True)
class Deletions:
    """The orders a range load deletes: stamped in its range in the warehouse, and held
    nowhere in the source any more."""

    keys: tuple[int, ...] = ()
    days: frozenset[str] = frozenset()  # their days in the pipeline's zone
    in_range: int = 0  # warehouse rows stamped in the range before the load
    mass: bool = False  # more than the policy's share: let through by allow_deletes

    @property
    def digest(self) -> str | None:
        """SHA-256 of the deleted keys, ascending, one per line (None: nothing deleted)."""
        if not self.keys:
            return None
        return hashlib.sha256("".join(f"{k}\n" for k in self.keys).encode()).hexdigest()


def delete_lost(source: Engine, src: SourceTable, stage: Stage, start: datetime,
                end: datetime, tz: tzinfo, policy: DeletePolicy, dry_run: bool) -> Deletions:
    """The delete step of a range load: delete the range's warehouse orders the source lost.

    Candidates are the warehouse rows stamped in the range whose key the stage does not
    hold (one join, in SQL); only when there are some is the source asked which of them it
    still holds anywhere (a scan of its keys: an order stamped outside the range now is
    the next load's to move, not to delete). Called inside the load's transaction, after
    its compare step and before its merge; a refusal rolls the whole batch back.
    """
    in_range, unmatched = stage.unmatched(start, end)
    gone = unmatched
    if unmatched.num_rows:
        held = pa.array([False] * unmatched.num_rows)
        for keys in scan_keys(source, src):
            held = pc.or_(held, pc.is_in(unmatched["order_id"], value_set=keys))
        gone = unmatched.filter(pc.invert(held))
    mass = gone.num_rows > policy.max_share * in_range
    if mass and not policy.allow:
        raise DeleteRefused(gone.num_rows, in_range, start, end, policy.max_share)
    keys = tuple(gone["order_id"].to_pylist())
    days = frozenset(days_of(gone["updated_at"].to_pylist(), tz))
    crash_point("load_before_delete")
    if not dry_run:
        stage.delete(list(keys))
    crash_point("load_after_delete")
    return Deletions(keys, days, in_range, mass and bool(keys))
