"""What the sensors see and decide, as plain values (the Dagster layer only unpacks).

``new_orders_sensor`` asks the source one indexed question per tick about the lookback
window of the next incremental read (``updated_at >= watermark − lookback``): how many
rows, the sum of their ``order_id``, the newest ``updated_at`` as stored, and a
fingerprint of every ``(order_id, updated_at)`` pair. That answer — an
:class:`Observation` — is compared with the one kept in the sensor's cursor. The cursor
records only what was *seen*; whether it was loaded is the watermark's business alone.

The observation notices new rows, late rows older than the newest one (the count and
the id sum change), and an app update that re-sets ``updated_at`` of a row already in
the window (the fingerprint changes). It cannot notice a change of ``status`` or
``amount`` that leaves ``updated_at`` alone — no incremental reader can — and, on a
database without a fingerprint (see :func:`_fingerprint`), a re-set ``updated_at`` that
is not the new newest. Such changes are picked up by the next run that reads the
window: the next change the sensor sees, or the daily schedule.

``paid_orders_refresh_sensor`` turns the ``days_touched`` of each ``orders``
materialization into runs over the days that exist as partitions: one run per
contiguous block of touched days (see :func:`day_blocks`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import date, datetime, tzinfo

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import BIT
from sqlalchemy.engine import Engine

from . import watermark as wm
from .commands import DEMO_INIT
from .days import runs, yesterday
from .db import DatabaseError, connect_error, redact, sqlite_file
from .source import SourceTable, inspect_source, select_window
from .times import canonical, from_canonical, parse_day

CURSOR_VERSION = 1
RUN_KEY_PREFIX = "new-orders-"

# --- new_orders_sensor: the observation -----------------------------------------------


@dataclass(frozen=True)
class Observation:
    """One answer of the source about a window; the cursor of ``new_orders_sensor``.

    With ``window_start`` None (no watermark yet: the first load reads everything) only
    the two ends of the indexes are read — ``max(order_id)`` and ``max(updated_at)`` —
    so that even a first look at a large table costs next to nothing.
    """

    window_start: str | None  # canonical UTC text of watermark − lookback; None: no watermark
    rows: int | None = None
    id_sum: int | None = None
    newest: str | None = None  # max(updated_at) as stored: a change detector, not an instant
    fingerprint: int | None = None  # sum of a per-row hash of (order_id, updated_at)
    max_id: int | None = None  # only without a watermark

    @property
    def start(self) -> datetime | None:
        return from_canonical(self.window_start) if self.window_start else None

    def to_cursor(self) -> str:
        return json.dumps({"v": CURSOR_VERSION, **asdict(self)}, sort_keys=True,
                          separators=(",", ":"))

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

    @property
    def run_key(self) -> str:
        """Same observation, same key: Dagster launches one run per key and sensor."""
        return RUN_KEY_PREFIX + hashlib.sha256(self.to_cursor().encode()).hexdigest()[:20]

    def describe(self) -> str:
        if self.window_start is None:
            return (f"no watermark yet (the first load reads everything); highest order_id "
                    f"{self.max_id}, newest updated_at {self.newest!r}")
        return (f"window from {self.window_start}: {self.rows} row(s), order_id sum "
                f"{self.id_sum}, newest updated_at {self.newest!r}, fingerprint "
                f"{'n/a' if self.fingerprint is None else self.fingerprint}")


@dataclass(frozen=True)
class Decision:
    run: bool
    cursor: Observation  # what the sensor keeps: what it saw, never "what was loaded"
    reason: str
    rebase: bool = False  # nothing changed and the watermark moved on: follow it

    @property
    def run_key(self) -> str | None:
        return self.cursor.run_key if self.run else None


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


def decide(cursor: Observation | None, seen: Observation, current: datetime | None
           ) -> Decision:
    """Run or skip, and the new cursor, from the cursor and this tick's observation.

    ``seen`` is the observation of :func:`observation_start`'s window; ``current`` the
    start of the window the next load would read. Pure: no I/O, no clock.
    """
    if cursor is None:
        return Decision(True, seen, f"first look at the source: {seen.describe()}")
    if seen != cursor:
        return Decision(True, seen, f"the source changed: was {cursor.describe()}; "
                                    f"now {seen.describe()}")
    if _before(seen.start, current):
        return Decision(False, seen, rebase=True, reason=(
            f"no change since the last tick ({seen.describe()}); the watermark moved on, "
            f"so the window now starts at {canonical(current)}"))
    return Decision(False, seen, f"no change since the last tick: {seen.describe()}")


# --- new_orders_sensor: the query -----------------------------------------------------

def _fingerprint(dialect: str, order_id, updated_at):
    """Sum over the window of a per-row hash of ``(order_id, updated_at)``, or None.

    PostgreSQL hashes the pair with md5; SQLite has no hash function, so it mixes the
    key with the instant ``julianday`` parses (to the millisecond; NULL, so left out,
    for text it cannot parse). Both cost one expression per row of the window.
    """
    if dialect == "postgresql":
        pair = sa.cast(order_id, sa.Text) + "|" + sa.cast(updated_at, sa.Text)
        word = sa.literal("x") + sa.func.substr(sa.func.md5(pair), 1, 8)
        # 'x' followed by 8 hex digits reads as a bit string, then as a 32-bit integer
        return sa.func.sum(sa.cast(sa.cast(word, BIT(32)), sa.Integer))
    if dialect == "sqlite":
        millis = sa.cast(sa.func.julianday(updated_at) * 86_400_000, sa.BigInteger)
        mixed = ((order_id % 2_147_483_647) * 1_000_003 + millis % 2_147_483_647) \
            % 2_147_483_647
        return sa.func.sum(mixed)
    return None


def observe(source: Engine, tz: tzinfo, start: datetime | None,
            src: SourceTable | None = None) -> Observation:
    """One aggregate query over ``updated_at >= start`` (the index's range), or, without a
    start, the two index ends. Its cost follows the rows of the window, not the table.

    The filter is :func:`~pipeline_assets.core.source.select_window`'s, so a text column
    is bounded by the same safe superset the load uses (a day wider): the observation
    covers at least every row the next load reads.
    """
    src = src or inspect_source(source)
    try:
        with source.connect() as conn:
            if start is None:
                t = src.table
                updated = t.c.updated_at
                if src.updated_at_kind == "text":
                    updated = sa.type_coerce(updated, sa.Text)
                max_id, newest = conn.execute(
                    sa.select(sa.func.max(t.c.order_id), sa.func.max(updated))).one()
                return Observation(None, newest=_text(newest),
                                   max_id=None if max_id is None else int(max_id))
            window = select_window(src, tz, start, None).order_by(None).subquery()
            columns = [sa.func.count(), sa.func.sum(window.c.order_id),
                       sa.func.max(window.c.updated_at)]
            fingerprint = _fingerprint(conn.dialect.name, window.c.order_id,
                                       window.c.updated_at)
            if fingerprint is not None:
                columns.append(fingerprint)
            row = conn.execute(sa.select(*columns)).one()
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        raise connect_error(exc, source, "SOURCE_DATABASE_URL") from None
    rows, id_sum, newest = row[0], row[1], row[2]
    return Observation(
        canonical(start), rows=int(rows), id_sum=int(id_sum or 0), newest=_text(newest),
        fingerprint=int(row[3] or 0) if fingerprint is not None else None,
    )


def _text(value) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return value.isoformat()


def check(cursor: Observation | None, current: datetime | None,
          observe_at: Callable[[datetime | None], Observation]) -> Decision:
    """Observe what :func:`observation_start` says, decide, and follow the watermark.

    When the watermark has moved on, the current window is observed *before* the
    cursor's: a row that arrives between the two queries then shows in the cursor's
    window and requests a run, instead of slipping silently into the new cursor.
    """
    start = observation_start(cursor, current)
    fresh = observe_at(current) if start != current else None
    decision = decide(cursor, observe_at(start), current)
    if decision.rebase:
        decision = replace(decision, cursor=fresh)
    return decision


def read_watermark(warehouse: Engine) -> datetime | None:
    """The watermark, without creating a missing SQLite warehouse file (a sensor only reads)."""
    if _missing_sqlite_file(warehouse):
        return None
    return wm.current(warehouse)


def _missing_sqlite_file(engine: Engine) -> bool:
    path = sqlite_file(engine.url)
    return path is not None and not path.exists()


def check_source(source: Engine, warehouse: Engine, *, tz: tzinfo, lookback_days: int,
                 cursor: str | None) -> Decision:
    """One tick of ``new_orders_sensor``: watermark → window → observation → decision."""
    if _missing_sqlite_file(source):
        raise DatabaseError(
            f"there is no source database at {redact(source.url)} yet: create the demo with "
            f"`{DEMO_INIT}` or set SOURCE_DATABASE_URL"
        )
    current = wm.window_start(read_watermark(warehouse), lookback_days)
    src = inspect_source(source)
    return check(Observation.from_cursor(cursor), current,
                 lambda start: observe(source, tz, start, src))


# --- paid_orders_refresh_sensor -------------------------------------------------------

@dataclass(frozen=True)
class DayBlock:
    """Consecutive touched days, rebuilt by one run (a single-run range backfill)."""

    first: str
    last: str

    @property
    def days(self) -> int:
        return (date.fromisoformat(self.last) - date.fromisoformat(self.first)).days + 1


def partition_days(days_touched: Iterable[str], *, first_day: date, last_day: date
                   ) -> tuple[list[str], list[str]]:
    """``(kept, left out)``: the touched days that exist as daily partitions.

    Partitions run from PARTITIONS_START_DATE to yesterday in PIPELINE_TIMEZONE (today's
    partition exists once the day is over: the daily schedule builds it then).
    """
    kept, left_out = set(), set()
    for text in days_touched:
        day = parse_day(str(text))
        (kept if first_day <= day <= last_day else left_out).add(day.isoformat())
    return sorted(kept), sorted(left_out)


def day_blocks(days: Iterable[str]) -> list[DayBlock]:
    """The days grouped into maximal runs of consecutive days.

    Exactly the touched days are rebuilt — a range over a gap would rewrite days nothing
    touched, and a late row from last year plus today would rebuild the whole year — while
    a long stretch of touched days (a first load, a bulk update) is one run, one manifest
    and one warehouse query instead of a run per day.
    """
    return [DayBlock(first, last) for first, last in runs(days)]


def refresh_run_key(event_id: int, block: DayBlock) -> str:
    """One key per materialization and block: a repeated tick asks again for the same keys."""
    return f"paid-orders-refresh-{event_id}-{block.first}-{block.last}"


last_partition_day = yesterday  # the newest daily partition at ``now``: yesterday in ``tz``
