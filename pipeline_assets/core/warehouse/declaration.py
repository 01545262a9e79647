"""What a declaration was when a batch was written: its fingerprint, and the record of it.

A declaration's **stable JSON** holds what defines its stored rows, and nothing else:
``name``, ``table``, ``primary_key`` (a list, in key order), ``cursor``, ``columns`` (an
object of column name to ``{"type", "nullable"}``) and ``daily_files`` (an object of file
name to ``{"where", "columns"}``: ``where`` an object of column to the sorted list of its
allowed values as the warehouse stores them, ``columns`` sorted). It is written with
sorted keys, no whitespace and ASCII escapes, so the order a ``defs.yaml`` lists columns,
filters or files in changes nothing, while a key's column order does. Sources, lookback,
delete share, file URLs and totals are settings of a run, not of the rows: not in it.
The **fingerprint** is the first 16 hex digits of the SHA-256 of that JSON.

Each batch row of ``pipeline_batches`` records the fingerprint of the declaration it was
written with (``declaration``), and ``pipeline_declarations`` holds one row per distinct
declaration of a table (``table_name``, ``fingerprint``, the JSON, the first batch
written under it, when): both in the batch's own transaction (:func:`record`).

A warehouse made before declarations were recorded has batches with no ``declaration``;
those of ``orders`` (whose spec carries a ``legacy``: ``table_name`` NULL or its name)
count as written under its declaration, the only one that release knew
(:func:`declaration_of_batch`, :func:`latest`).

:func:`check_unchanged` refuses a load whose ``primary_key`` or ``cursor`` differ from
the latest recorded declaration's (:class:`~pipeline_assets.core.errors.DeclarationChanged`); every
other change is followed by the warehouse table (:mod:`.evolve`).

A daily file set's bytes depend on less: :func:`describe_files` (the table, key and change
stamp, the file's columns and types, its filter) and its :func:`files_fingerprint`, which
each manifest records, so a reader and ``verify`` tell a day written under another shape.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

import sqlalchemy as sa

from ..db.state import UNNAMED_ROWS_TABLE, batches, declarations, of_table
from ..errors import DeclarationChanged
from ..table import ORDERS
from ..table.spec import DailyFiles, TableSpec
from ..times import canonical


def describe(spec: TableSpec) -> dict:
    """What defines ``spec``'s stored rows, as plain JSON values (see the module)."""
    return {
        "name": spec.name,
        "table": spec.table,
        "primary_key": list(spec.primary_key),
        "cursor": spec.cursor,
        **({"day_column": spec.day_column} if spec.day_column is not None else {}),
        "columns": {c.name: {"type": str(c.type), "nullable": c.nullable} for c in spec.columns},
        "daily_files": {
            f.name: {
                "where": {  # a NULL beside texts: sorted by each value's JSON
                    column: sorted({spec.column(column).type.stored(v) for v in values}, key=_json)
                    for column, values in f.where
                },
                "columns": sorted(f.columns),
            }
            for f in spec.daily_files
        },
    }


def describe_files(spec: TableSpec, files: DailyFiles) -> dict:
    """What defines the bytes of ``spec``'s day files ``files``: the table, its key and
    change stamp and day column (the rows' order and day), the file's columns with their
    types, its filter and its format. A manifest records its :func:`files_fingerprint`: a
    changed ``day_column`` or ``format`` makes every committed day stale."""
    whole = describe(spec)
    return {
        "table": spec.name,
        "primary_key": list(spec.primary_key),
        "cursor": spec.cursor,
        **({"day_column": spec.day_column} if spec.day_column is not None else {}),
        "columns": {name: whole["columns"][name]["type"] for name in files.columns},
        "where": whole["daily_files"][files.name]["where"],
        # JSON, the first format, is left unsaid: a JSON file set's fingerprint is the one
        # it had before formats existed (its days stay fresh), and a changed format makes
        # every committed day stale
        **({"format": files.format} if files.format != "json" else {}),
    }


def files_fingerprint(spec: TableSpec, files: DailyFiles) -> str:
    """The first 16 hex digits of the SHA-256 of :func:`describe_files`' stable JSON."""
    return _hash(_json(describe_files(spec, files)))


def implied_files_fingerprint(spec: TableSpec, files: DailyFiles) -> str | None:
    """What a manifest that records no fingerprint (written before manifests did) was
    written with: ``paid_orders`` as the release before declarations wrote it (ORDERS');
    None, unknown, for any other file set, whose days then count as stale."""
    if spec.legacy and files.name == spec.daily_files[0].name:
        return files_fingerprint(spec, spec.daily_files[0])
    return None


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def stable_json(spec: TableSpec) -> str:
    """The declaration's stable JSON: sorted keys, no whitespace, ASCII."""
    return _json(describe(spec))


@lru_cache(maxsize=64)
def fingerprint(spec: TableSpec) -> str:
    """The first 16 hex digits of the SHA-256 of :func:`stable_json` (once per spec: every
    load asks)."""
    return _hash(stable_json(spec))


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Recorded:
    """A declaration a table's batches were written with."""

    fingerprint: str
    declaration: dict  # the stable JSON, read back
    first_batch_id: str | None  # None: orders', for batches written before the record
    recorded_at: str | None

    @property
    def primary_key(self) -> tuple[str, ...]:
        return tuple(self.declaration["primary_key"])

    @property
    def cursor(self) -> str:
        return self.declaration["cursor"]


def _before() -> Recorded:
    """The declaration of the batches written before the record: the chapter's orders,
    the one table that release wrote."""
    text = stable_json(ORDERS)
    return Recorded(_hash(text), json.loads(text), None, None)


def _recorded(conn: sa.Connection, table: str, fp: str) -> Recorded | None:
    d = declarations.c
    row = conn.execute(
        sa.select(d.fingerprint, d.declaration, d.first_batch_id, d.recorded_at).where(
            d.table_name == table, d.fingerprint == fp
        )
    ).first()
    if row is None:
        return None
    return Recorded(
        row.fingerprint, json.loads(row.declaration), row.first_batch_id, row.recorded_at
    )


def _of(conn: sa.Connection, spec: TableSpec, fp: str | None) -> Recorded | None:
    if fp is None:  # written before declarations were recorded: orders' only
        return _before() if spec.name == UNNAMED_ROWS_TABLE else None
    return _recorded(conn, spec.name, fp)


def _totals_before(spec: TableSpec) -> str | None:
    """``orders``' totals table, whose state began before declarations."""
    if (
        spec.name != UNNAMED_ROWS_TABLE
        or not spec.daily_files
        or spec.daily_files[0].totals is None
    ):
        return None
    return spec.daily_files[0].totals.name


def declaration_of_batch(conn: sa.Connection, batch_id: str, spec: TableSpec) -> Recorded | None:
    """The declaration ``spec``'s batch ``batch_id`` was written with; None for a batch
    it has not written, or one of another table than ``orders`` written before the
    record."""
    b = batches.c
    row = conn.execute(
        sa.select(b.declaration).where(b.batch_id == batch_id, of_table(b.table_name, spec))
    ).first()
    return None if row is None else _of(conn, spec, row.declaration)


def latest(conn: sa.Connection, spec: TableSpec) -> Recorded | None:
    """The declaration ``spec``'s latest batch was written with (``orders``' batches of
    before the record: its own); None when it has no batch, or none known."""
    b = batches.c
    row = conn.execute(
        sa.select(b.declaration).where(of_table(b.table_name, spec)).order_by(b.id.desc()).limit(1)
    ).first()
    return None if row is None else _of(conn, spec, row.declaration)


_NOT_READ = object()


def check_unchanged(
    conn: sa.Connection, spec: TableSpec, stored: Recorded | None | object = _NOT_READ
) -> None:
    """Refuse ``spec`` when its ``primary_key`` or ``cursor`` differ from the latest
    recorded declaration of its table (``stored``, read here unless given:
    :class:`DeclarationChanged`); a table with no batch, or with other changes (columns,
    files: core/warehouse/evolve.py), passes."""
    if stored is _NOT_READ:
        stored = latest(conn, spec)
    if stored is None:
        return
    changes = []
    if stored.primary_key != spec.primary_key:
        changes.append(("primary_key", list(stored.primary_key), list(spec.primary_key)))
    if stored.cursor != spec.cursor:
        changes.append(("cursor", stored.cursor, spec.cursor))
    if changes:
        raise DeclarationChanged(spec.name, changes, totals_before=_totals_before(spec))


def record(conn: sa.Connection, spec: TableSpec, batch_id: str, at: datetime) -> str:
    """Record ``spec`` for the batch ``batch_id`` about to be written, in ``conn``'s
    transaction (the batch's own: under its watermark lock, so no other load of the
    table records at the same time): its row of ``pipeline_declarations`` if it is new.
    Returns the fingerprint, for the batch's ``declaration``."""
    text = stable_json(spec)
    fp = _hash(text)
    if _recorded(conn, spec.name, fp) is None:
        conn.execute(
            declarations.insert().values(
                table_name=spec.name,
                fingerprint=fp,
                declaration=text,
                first_batch_id=batch_id,
                recorded_at=canonical(at),
            )
        )
    return fp
