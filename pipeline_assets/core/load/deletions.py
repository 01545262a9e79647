"""Rows deleted in the app: the delete step of a range load, and its guard.

A range load replaces its range by key (docs/guarantees.md, "Orders deleted in the app"):
the warehouse rows stamped in its range whose key (``order_id`` for orders) the source
holds nowhere any more are deleted in the load's own transaction — unless they are more
than the policy's share of the range, which is what a source answering with missing rows
looks like (a wrong URL, a replica being rebuilt): then the load refuses, writing nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, tzinfo

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy.engine import Engine

from ..crash import crash_point
from ..errors import DeleteRefused
from ..source.scan import scan_keys
from ..source.sql import SourceTable
from ..table import working
from ..times.arrays import days_of
from ..warehouse.staging import Stage

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
    """The rows a range load deletes: stamped in its range in the warehouse, and held
    nowhere in the source any more (``keys``: values of a one-column key, else tuples)."""

    keys: tuple = ()
    days: frozenset[str] = frozenset()  # their days in the pipeline's zone
    in_range: int = 0  # warehouse rows stamped in the range before the load
    mass: bool = False  # more than the policy's share: let through by allow_deletes

    @property
    def digest(self) -> str | None:
        """SHA-256 of the deleted keys, ascending, one per line, a key of several columns
        as its values joined by a tab (None: nothing deleted)."""
        if not self.keys:
            return None
        return hashlib.sha256(
            "".join(
                ("\t".join(map(str, k)) if isinstance(k, tuple) else str(k)) + "\n"
                for k in self.keys
            ).encode()
        ).hexdigest()


def delete_lost(
    source: Engine,
    src: SourceTable,
    stage: Stage,
    start: datetime | None,
    end: datetime | None,
    tz: tzinfo,
    policy: DeletePolicy,
    dry_run: bool,
) -> Deletions:
    """The delete step of a range load: delete the range's warehouse rows the source lost
    (``start`` None: of a table without a change stamp, compared whole every run).

    Candidates are the warehouse rows stamped in the range whose key the stage does not
    hold (one join, in SQL); only when there are some is the source asked which of them it
    still holds anywhere (a scan of its keys: a row stamped outside the range now is the
    next load's to move, not to delete). Called inside the load's transaction, after
    its compare step and before its merge; a refusal rolls the whole batch back.
    """
    spec = src.spec
    in_range, unmatched = stage.unmatched(start, end, tz)
    gone = unmatched
    # a whole table's comparison (start None) staged every source row: what it lacks is gone
    if unmatched.num_rows and start is not None:
        gone = unmatched.filter(pc.invert(_held(source, src, unmatched)))
    mass = gone.num_rows > policy.max_share * in_range
    if mass and not policy.allow:
        raise DeleteRefused(
            gone.num_rows,
            in_range,
            start,
            end,
            policy.max_share,
            rows=spec.say("rows_counted"),
            those=spec.say("those_rows"),
            by=f"whose {spec.day} is in it" if spec.day_apart else "stamped in it",
        )
    if len(spec.primary_key) == 1:
        keys = tuple(gone[spec.primary_key[0]].to_pylist())
    else:
        keys = tuple(zip(*(gone[k].to_pylist() for k in spec.primary_key), strict=True))
    stamps = gone[spec.day].to_pylist()
    is_date = spec.column(spec.day).type.codec.is_day
    days = frozenset(stamps if is_date else days_of(stamps, tz))
    crash_point("load_before_delete")
    if not dry_run:
        stage.delete(list(keys))
    crash_point("load_after_delete")
    return Deletions(keys, days, in_range, mass and bool(keys))


def _held(source: Engine, src: SourceTable, unmatched: pa.Table) -> pa.Array:
    """Which ``unmatched`` rows' keys some source row holds, whatever its stamp: every key
    of the source, streamed (:func:`~pipeline_assets.core.source.scan.scan_keys`), compared by
    value; a key of several columns compared as the text of each column (integers as digits, dates
    as ``YYYY-MM-DD``, as both sides store them)."""
    keys = src.spec.primary_key
    held = pa.array([False] * unmatched.num_rows)
    if len(keys) == 1:  # by value (an integer), else as text, as the key of several is
        integer = src.spec.column(keys[0]).type.codec.orders_numerically
        mine = unmatched[keys[0]] if integer else _as_text(unmatched[keys[0]])
        for found in scan_keys(source, src):
            values = found.column(0)
            if isinstance(values, pa.ChunkedArray):
                values = values.combine_chunks()
            held = pc.or_(held, pc.is_in(mine, value_set=values if integer else _as_text(values)))
        return held
    # joined on positional names: Arrow reads a key name such as ".a" or "[0]" as a path
    apart = [f"{working.PREFIX}key{i}" for i in range(len(keys))]
    wanted = pa.table({a: _as_text(unmatched[k]) for a, k in zip(apart, keys, strict=True)})
    wanted = wanted.append_column(working.ROW, pa.array(range(unmatched.num_rows), pa.int64()))
    rows: set[int] = set()
    for found in scan_keys(source, src):
        found = pa.table({a: _as_text(found[k]) for a, k in zip(apart, keys, strict=True)})
        rows.update(wanted.join(found, apart, join_type="left semi")[working.ROW].to_pylist())
    if rows:
        held = pa.array([i in rows for i in range(unmatched.num_rows)])
    return held


def _as_text(values) -> pa.Array:
    """A key column as text, the same on both sides: integers as digits, dates and text as
    they are stored."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_date(values.type):
        return pc.strftime(pc.cast(values, pa.timestamp("s")), "%Y-%m-%d")
    return pc.cast(values, pa.string())
