"""``new_orders_sensor``'s question to the source, and what it makes of the answer.

One indexed aggregate per tick over the lookback window of the next incremental read
(:func:`observe`) gives an :class:`Observation`; :func:`decide` compares it with the one
kept in the cursor and says whether to load; :func:`check` does both, following the
watermark as it moves on. The cursor records only what was *seen*; whether it was loaded
is the watermark's business alone.

Each takes the declared table (``spec``; ``orders`` unless told): the question is asked of
its source table, key and cursor (quoted for the source's dialect), and the words name its
columns. For ``orders`` the SQL and the words are the ones they always were.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, tzinfo

from sqlalchemy.engine import Engine

from ..db.engines import MYSQL, dialect_of, guard
from ..db.quoting import quote, through_sqlalchemy
from ..source.scan import inspect_source
from ..source.sql import SourceTable, table_sql, window_filter
from ..table.spec import TableSpec
from ..times import canonical, from_canonical

CURSOR_VERSION = 1


@dataclass(frozen=True)
class Observation:
    """One answer of the source about a window; the cursor of ``new_orders_sensor``.

    With ``window_start`` None (no watermark yet: the first load reads everything) only
    the two ends of the indexes are read — ``max(order_id)`` and ``max(updated_at)``, the
    key's first column and the cursor — so that even a first look at a large table costs
    next to nothing. ``id_sum`` sums the key's first column when it is an integer.
    """

    window_start: str | None  # canonical UTC text of watermark − lookback; None: no watermark
    rows: int | None = None
    id_sum: int | None = None
    newest: str | None = None  # max(updated_at) as stored: a change detector, not an instant
    fingerprint: int | None = None  # sum of a per-row hash of (order_id, updated_at)
    max_id: int | str | None = None  # only without a watermark

    @property
    def start(self) -> datetime | None:
        return from_canonical(self.window_start) if self.window_start else None

    def to_cursor(self) -> str:
        return json.dumps(
            {"v": CURSOR_VERSION, **asdict(self)}, sort_keys=True, separators=(",", ":")
        )

    @classmethod
    def from_cursor(cls, text: str | None) -> Observation | None:
        """The observation kept in a cursor; None for no cursor or one this code can't read
        (an unreadable cursor counts as a first look: it requests a run, which is harmless)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.pop("v", None) != CURSOR_VERSION:
                return None
            return cls(**data)
        except (ValueError, TypeError):
            return None

    def describe(self, spec: TableSpec) -> str:
        key, cursor = spec.primary_key[0], spec.stamp
        if spec.counts_ids:
            return f"highest {spec.cursor} {self.max_id}"
        if spec.compares_whole:
            total = "" if self.id_sum is None else f", {key} sum {self.id_sum}"
            return (
                f"the whole table (no change stamp): {self.rows} row(s){total}, newest "
                f"{cursor} {self.newest!r}, content fingerprint {self.fingerprint}"
            )
        if self.window_start is None:
            return (
                f"no watermark yet (the first load reads everything); highest {key} "
                f"{self.max_id}, newest {cursor} {self.newest!r}"
            )
        total = "" if self.id_sum is None else f", {key} sum {self.id_sum}"
        return (
            f"window from {self.window_start}: {self.rows} row(s){total}, newest "
            f"{cursor} {self.newest!r}, fingerprint "
            f"{'n/a' if self.fingerprint is None else self.fingerprint}"
        )


@dataclass(frozen=True)
class Decision:
    run: bool
    cursor: Observation  # what the sensor keeps: what it saw, never "what was loaded"
    reason: str
    rebase: bool = False  # nothing changed and the watermark moved on: follow it


def _before(a: datetime | None, b: datetime | None) -> bool:
    """``a`` starts an earlier window than ``b`` (None, "everything", is the earliest)."""
    if b is None:
        return False
    return a is None or a < b


def observation_start(cursor: Observation | None, current: datetime | None) -> datetime | None:
    """Which window to look at: the cursor's while the watermark has moved on past it.

    Comparing like with like: after a load the current window starts later and holds
    fewer rows, which says nothing about new rows. So the tick asks about the cursor's
    window again; once that is unchanged the cursor follows the watermark (a rebase).
    A window that starts earlier than the cursor's (a rewind, an emptied warehouse) is
    looked at directly, and differs from the cursor, so it requests a run.
    """
    if cursor is not None and _before(cursor.start, current):
        return cursor.start
    return current


def decide(
    cursor: Observation | None,
    seen: Observation,
    current: datetime | None,
    *,
    spec: TableSpec,
) -> Decision:
    """Run or skip, and the new cursor, from the cursor and this tick's observation.

    ``seen`` is the observation of :func:`observation_start`'s window; ``current`` the
    start of the window the next load would read. Pure: no I/O, no clock.
    """
    now = seen.describe(spec)
    if cursor is None:
        return Decision(True, seen, f"first look at the source: {now}")
    if seen != cursor:
        return Decision(True, seen, f"the source changed: was {cursor.describe(spec)}; now {now}")
    if _before(seen.start, current):
        return Decision(
            False,
            seen,
            rebase=True,
            reason=(
                f"no change since the last tick ({now}); the watermark moved on, "
                f"so the window now starts at {canonical(current)}"
            ),
        )
    return Decision(False, seen, f"no change since the last tick: {now}")


_P = 2147483647  # SQLite's mix: a prime below 2**31, so products stay within 64 bits


def _fingerprint(dialect: str, spec: TableSpec) -> str | None:
    """SQL for the sum over the window of a per-row hash of the key and the cursor
    (``(order_id, updated_at)``), or None.

    PostgreSQL and MySQL hash them, joined by ``|``, with md5; SQLite has no hash
    function, so it mixes the integer key columns with the instant ``julianday`` parses
    (to the millisecond; NULL, so left out, for text it cannot parse); a text key column
    is left out of its mix. Both cost one expression per row of the window.
    """
    columns = [quote(c, dialect) for c in (*spec.primary_key, spec.stamp)]
    if dialect == "postgresql":
        joined = " || '|' || ".join(f"CAST({c} AS TEXT)" for c in columns)
        # 'x' followed by 8 hex digits reads as a bit string, then as a 32-bit integer
        return f"sum(CAST(CAST('x' || substr(md5({joined}), 1, 8) AS BIT(32)) AS INTEGER))"
    if dialect == "sqlite":
        return (
            f"sum((({_sqlite_key_mix(spec)} * 1000003) + (CAST(julianday({columns[-1]}) "
            f"* 86400000 AS BIGINT) % {_P})) % {_P})"
        )
    if dialect == MYSQL:  # the first 8 hex digits of md5 as a number, as on PostgreSQL
        joined = ", '|', ".join(f"CAST({c} AS CHAR)" for c in columns)
        return f"sum(conv(substr(md5(concat({joined})), 1, 8), 16, 10))"
    return None


def _sqlite_key_mix(spec: TableSpec) -> str:
    """The integer key columns mixed into one number below :data:`_P` (``0``: none)."""
    mix = None
    for name in spec.primary_key:
        if not spec.column(name).type.codec.orders_numerically:
            continue
        term = f"({quote(name, 'sqlite')} % {_P})"
        mix = term if mix is None else f"(({mix} * 1000003 + {term}) % {_P})"
    return mix or "0"


def _text(value) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return value.isoformat()


def observe(
    source: Engine,
    tz: tzinfo,
    start: datetime | None,
    src: SourceTable | None = None,
    *,
    spec: TableSpec,
) -> Observation:
    """One aggregate query over ``cursor >= start`` (the index's range), or, without a
    start, the two index ends. Its cost follows the rows of the window, not the table.

    The filter is :func:`~pipeline_assets.core.source.scan.window_filter`'s, the one every
    reader of the source uses, so a text column is bounded by the same safe superset the
    load reads (a day wider): the observation covers at least every row the next load
    reads. ``src``: the table as reflected (default: ``spec``'s, reflected here).
    """
    src = src or inspect_source(source, spec)
    spec = src.spec
    dialect = dialect_of(source)
    key, cursor = quote(spec.primary_key[0], dialect), quote(spec.stamp, dialect)
    table = table_sql(spec, dialect)
    summed = spec.column(spec.primary_key[0]).type.codec.orders_numerically
    if spec.compares_whole:
        return _observe_whole(source, src)
    if spec.counts_ids:
        return _observe_ids(source, src)
    with guard(source, "SOURCE_DATABASE_URL"):
        with source.connect() as conn:
            if start is None:
                max_id, newest = conn.exec_driver_sql(
                    through_sqlalchemy(f"SELECT max({key}), max({cursor}) FROM {table}", dialect)
                ).one()
                return Observation(None, newest=_text(newest), max_id=_max_key(max_id, summed))
            fingerprint = _fingerprint(dialect, spec)
            columns = ["count(*)", f"sum({key})" if summed else "NULL", f"max({cursor})"] + (
                [fingerprint] if fingerprint else []
            )
            row = conn.exec_driver_sql(
                through_sqlalchemy(
                    f"SELECT {', '.join(columns)} FROM {table}"
                    f"{window_filter(src, dialect, tz, start, None)}",
                    dialect,
                )
            ).one()
    rows, id_sum, newest = row[0], row[1], row[2]
    return Observation(
        canonical(start),
        rows=int(rows),
        id_sum=int(id_sum or 0) if summed else None,
        newest=_text(newest),
        fingerprint=int(row[3] or 0) if fingerprint is not None else None,
    )


def _observe_ids(source: Engine, src: SourceTable) -> Observation:
    """An append-only table (an integer cursor): its highest id, one index lookup. A new
    row changes it; a row committed below it is the next load's lookback's to find."""
    spec, dialect = src.spec, dialect_of(source)
    sql = f"SELECT max({quote(spec.cursor, dialect)}) FROM {table_sql(spec, dialect)}"
    with guard(source, "SOURCE_DATABASE_URL"), source.connect() as conn:
        highest = conn.exec_driver_sql(through_sqlalchemy(sql, dialect)).scalar()
    return Observation(None, max_id=None if highest is None else int(highest))


def _observe_whole(source: Engine, src: SourceTable) -> Observation:
    """A table without a change stamp (``cursor: null``): one aggregate over the whole
    table — its rows, the sum of its key, its newest day and the sum of a hash of every
    declared column of each row — so that an insert, a delete or a change of any value
    shows. A scan of the table per tick, in the database; nothing is transferred."""
    spec = src.spec
    dialect = dialect_of(source)
    key, day = quote(spec.primary_key[0], dialect), quote(spec.day, dialect)
    summed = spec.column(spec.primary_key[0]).type.codec.orders_numerically
    columns = [
        "count(*)",
        f"sum({key})" if summed else "NULL",
        f"max({day})",
        _content_fingerprint(dialect, spec),
    ]
    sql = f"SELECT {', '.join(columns)} FROM {table_sql(spec, dialect)}"
    with guard(source, "SOURCE_DATABASE_URL"):
        with source.connect() as conn:
            if dialect == "sqlite":  # SQLite has no hash function: this process lends one
                conn.connection.driver_connection.create_function(
                    _ROW_HASH, -1, _row_hash, deterministic=True
                )
            rows, id_sum, newest, fingerprint = conn.exec_driver_sql(
                through_sqlalchemy(sql, dialect)
            ).one()
    return Observation(
        None,
        rows=int(rows),
        id_sum=int(id_sum or 0) if summed else None,
        newest=_text(newest),
        fingerprint=int(fingerprint or 0),
    )


_ROW_HASH = "pipeline_row_hash"


def _row_hash(*values) -> int:
    """The first 32 bits of the MD5 of a row's values (SQLite's stand-in for ``md5``)."""
    text = "|".join("\\N" if v is None else str(v) for v in values)
    return int(hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()[:8], 16)


def _content_fingerprint(dialect: str, spec: TableSpec) -> str:
    """SQL for the sum over a table of a per-row hash of every declared column: MD5 on
    PostgreSQL and MySQL, :func:`_row_hash` on SQLite."""
    columns = [quote(c.name, dialect) for c in spec.columns]
    if dialect == "postgresql":
        joined = " || '|' || ".join(f"coalesce(CAST({c} AS TEXT), '\\N')" for c in columns)
        return f"sum(CAST(CAST('x' || substr(md5({joined}), 1, 8) AS BIT(32)) AS INTEGER))"
    if dialect == MYSQL:
        joined = ", ".join(f"coalesce(CAST({c} AS CHAR), '\\\\N')" for c in columns)
        return f"sum(conv(substr(md5(concat_ws('|', {joined})), 1, 8), 16, 10))"
    return f"sum({_ROW_HASH}({', '.join(columns)}))"


def _max_key(value, integer: bool) -> int | str | None:
    """The highest key as the cursor keeps it: an integer key as an integer, any other
    as its text."""
    if value is None:
        return None
    if integer:
        return int(value)
    return _text(value) if hasattr(value, "isoformat") else str(value)


def check(
    cursor: Observation | None,
    current: datetime | None,
    observe_at: Callable[[datetime | None], Observation],
    *,
    spec: TableSpec,
) -> Decision:
    """Observe what :func:`observation_start` says, decide, and follow the watermark.

    When the watermark has moved on, the current window is observed *before* the
    cursor's: a row that arrives between the two queries then shows in the cursor's
    window and requests a run, instead of slipping silently into the new cursor.
    """
    start = observation_start(cursor, current)
    fresh = observe_at(current) if start != current else None
    decision = decide(cursor, observe_at(start), current, spec=spec)
    if decision.rebase:
        decision = replace(decision, cursor=fresh)
    return decision
