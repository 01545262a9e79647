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

Both sensors decide from what has *landed*, not from what they asked for. A run can
die at any point (a preempted pod, an OOM kill): so each sensor keeps in its cursor the
requests it made and looks up, on every tick, what became of their runs — the run it
requested, or a retry Dagster launched for it (:func:`request_outcome`). A request is
settled only by a successful run; a run that failed or was canceled is requested again
under a new run key, and while one is queued or running nothing is requested for the
same work. ``new_orders_sensor`` keeps one request (:class:`LoadCursor`);
``paid_orders_refresh_sensor`` keeps the days it owes until a successful run requested
after they became owed has rebuilt them (:class:`RefreshCursor`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, tzinfo

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import BIT
from sqlalchemy.engine import Engine

from . import watermark as wm
from .commands import DEMO_INIT
from .days import days_between, runs
from .db import DatabaseError, guard, redact, sqlite_file
from .source import SourceTable, inspect_source, select_window
from .times import canonical, from_canonical, parse_day

CURSOR_VERSION = 1
RUN_KEY_PREFIX = "new-orders-"

# --- what became of a requested run ---------------------------------------------------

# Statuses of a run that may still do its work (DagsterRunStatus values).
IN_FLIGHT = frozenset({"QUEUED", "NOT_STARTED", "MANAGED", "STARTING", "STARTED",
                       "CANCELING", "SUSPENDED"})
# How long a request may show no run (the daemon creates it right after the tick), and
# how long a failed run marked for a retry may wait for Dagster to launch it, before the
# sensor stops waiting and requests the work again itself.
GRACE_SECONDS = 60.0


@dataclass(frozen=True)
class RunView:
    """What a sensor needs of one run of a request: the requested run, or a retry of it."""

    run_id: str
    status: str  # a DagsterRunStatus value: "QUEUED", "STARTED", "SUCCESS", "FAILURE", …
    created_at: float  # POSIX seconds
    ended_at: float | None = None
    will_retry: bool = False  # Dagster's run retries will launch a retry of this failed run


@dataclass(frozen=True)
class Outcome:
    """Where a request stands: ``state`` is one of the ``Outcome.*`` names below."""

    state: str
    detail: str
    ended_at: float | None = None  # when the newest run ended (failed, canceled)

    SUCCEEDED = "succeeded"
    IN_FLIGHT = "in flight"
    AWAITING_RETRY = "awaiting Dagster's retry"
    FAILED = "failed"
    CANCELED = "canceled"
    LOST = "lost"

    @property
    def landed(self) -> bool:
        return self.state == Outcome.SUCCEEDED

    @property
    def busy(self) -> bool:
        """A run of the request may still do the work: request nothing for it now."""
        return self.state in (Outcome.IN_FLIGHT, Outcome.AWAITING_RETRY)

    @property
    def again(self) -> bool:
        """No run of the request will do the work: request it again, under a new key."""
        return self.state in (Outcome.FAILED, Outcome.CANCELED, Outcome.LOST)


def request_outcome(runs: Iterable[RunView], *, requested_at: float, now: float,
                    grace: float = GRACE_SECONDS) -> Outcome:
    """What became of a request, from the runs that carry its run key. Pure.

    Any successful run settles it (the requested run or a retry of it). Otherwise a run
    still queued or running makes it busy, and so does the newest run having failed with
    Dagster's retry promised (``dagster/will_retry``), for ``grace`` seconds after it
    ended. A request whose runs all failed or were canceled must be requested again —
    with retries exhausted or turned off, the sensor is what heals. So must one that
    still has no run ``grace`` seconds after it was made.
    """
    runs = sorted(runs, key=lambda r: r.created_at)
    for run in runs:
        if run.status == "SUCCESS":
            return Outcome(Outcome.SUCCEEDED, f"run {run.run_id} succeeded")
    live = [r for r in runs if r.status in IN_FLIGHT]
    if live:
        return Outcome(Outcome.IN_FLIGHT, f"run {live[-1].run_id} is {live[-1].status}")
    if not runs:
        waited = now - requested_at
        if waited < grace:
            return Outcome(Outcome.IN_FLIGHT, "its run is not created yet")
        return Outcome(Outcome.LOST, f"no run appeared within {waited:.0f} s")
    last = runs[-1]
    tries = f" after {len(runs)} run(s)" if len(runs) > 1 else ""
    if last.status == "CANCELED":
        return Outcome(Outcome.CANCELED, f"run {last.run_id} was canceled{tries}",
                       last.ended_at)
    if last.will_retry and now - (last.ended_at if last.ended_at is not None else now) < grace:
        return Outcome(Outcome.AWAITING_RETRY,
                       f"run {last.run_id} failed and Dagster will retry it")
    if last.status == "FAILURE":
        return Outcome(Outcome.FAILED, f"run {last.run_id} failed{tries}", last.ended_at)
    return Outcome(Outcome.FAILED, f"run {last.run_id} ended {last.status}{tries}",
                   last.ended_at)


def retry_delay(failures: int) -> float:
    """Seconds to wait before requesting again work whose requests failed ``failures``
    times in a row: at once for the first five (killed runs), then backing off from half a
    minute to 10 minutes (a bad row or a full disk fails every attempt the same way)."""
    if failures <= 5:
        return 0.0
    return min(30.0 * 2 ** (failures - 6), 600.0)


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
    with guard(source, "SOURCE_DATABASE_URL"):
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
                 cursor: str | None,
                 runs_for: Callable[[str], Iterable[RunView]] | None = None,
                 now: float = 0.0, seed: str = "") -> LoadTick:
    """One tick of ``new_orders_sensor``: the pending request's runs (``runs_for`` a run
    key), then watermark → window → observation → decision. ``now`` is POSIX seconds;
    ``seed`` starts the chain of run keys of a fresh cursor (:func:`load_run_key`).

    While the pending request's run is queued or running, the source is not even asked.
    """
    state = LoadCursor.from_cursor(cursor)
    outcome = None
    if state.pending is not None:
        if runs_for is None:
            raise ValueError("a cursor with a pending request needs runs_for to look it up")
        outcome = request_outcome(runs_for(state.pending.key),
                                  requested_at=state.pending.requested_at, now=now)
        if outcome.busy:
            return decide_load(state, outcome, None, now)
    if _missing_sqlite_file(source):
        raise DatabaseError(
            f"there is no source database at {redact(source.url)} yet: create the demo with "
            f"`{DEMO_INIT}` or set SOURCE_DATABASE_URL"
        )
    current = wm.window_start(read_watermark(warehouse), lookback_days)
    src = inspect_source(source)
    decision = check(state.seen, current, lambda start: observe(source, tz, start, src))
    return decide_load(state, outcome, decision, now, seed)


# --- new_orders_sensor: the request and what became of it ------------------------------

LOAD_CURSOR_VERSION = 2


@dataclass(frozen=True)
class Request:
    """A run a sensor asked for: its run key, when (the sensor's clock), which attempt."""

    key: str
    requested_at: float  # POSIX seconds
    attempt: int = 1


@dataclass(frozen=True)
class LoadCursor:
    """The cursor of ``new_orders_sensor``: what it saw, and the request not yet landed.

    ``pending`` is the load requested for ``seen`` until a run of it succeeds; ``last_key``
    the newest run key used, from which the next one is derived (:func:`load_run_key`).
    """

    seen: Observation | None = None
    pending: Request | None = None
    last_key: str | None = None

    def to_cursor(self) -> str:
        return json.dumps({
            "v": LOAD_CURSOR_VERSION,
            "seen": None if self.seen is None else asdict(self.seen),
            "pending": None if self.pending is None else asdict(self.pending),
            "last_key": self.last_key,
        }, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_cursor(cls, text: str | None) -> LoadCursor:
        """The state kept in a cursor. A cursor of the first version (an observation only,
        with nothing known about its request) reads as settled; one this code can't read
        counts as a first look, which requests a run — harmless."""
        if not text:
            return cls()
        try:
            data = json.loads(text)
            if isinstance(data, dict) and data.get("v") == CURSOR_VERSION:
                return cls(seen=Observation.from_cursor(text))
            if not isinstance(data, dict) or data.get("v") != LOAD_CURSOR_VERSION:
                return cls()
            seen, pending = data.get("seen"), data.get("pending")
            return cls(seen=None if seen is None else Observation(**seen),
                       pending=None if pending is None else Request(**pending),
                       last_key=data.get("last_key"))
        except (ValueError, TypeError):
            return cls()


def load_run_key(seen: Observation, previous_key: str | None, seed: str = "") -> str:
    """The run key of a new request: never one an earlier request used.

    Each key chains the observation to the previous key, so the same observation requested
    again (its run failed) or seen again (after other loads) gets a fresh key — Dagster
    launches a key only once — while a tick repeated from the same cursor asks for the
    same key. A fresh cursor (none yet, or a reset one) starts the chain from ``seed``:
    the number of runs the sensor has launched so far, so that a reset cursor never
    reuses the keys of the one before it.
    """
    previous = previous_key if previous_key is not None else f"start-{seed}"
    chained = f"{seen.to_cursor()}|{previous}".encode()
    return RUN_KEY_PREFIX + hashlib.sha256(chained).hexdigest()[:20]


@dataclass(frozen=True)
class LoadTick:
    """One tick's answer: run or not, the cursor to keep, and why."""

    run: bool
    cursor: LoadCursor
    reason: str
    rebase: bool = False

    @property
    def run_key(self) -> str | None:
        return self.cursor.pending.key if self.run else None

    @property
    def observation(self) -> Observation | None:
        return self.cursor.seen


def decide_load(cursor: LoadCursor, outcome: Outcome | None, decision: Decision | None,
                now: float, seed: str = "") -> LoadTick:
    """Run or skip from what became of the pending request and what the source says. Pure.

    ``outcome`` is that of ``cursor.pending`` (None without one); ``decision`` compares
    the source with ``cursor.seen`` (:func:`check`), and is not needed while the request
    is busy: nothing is requested then, whatever the source did — the next tick after
    its run ends compares again. A request whose run failed or was canceled is made again
    with a new key, even if the source did not change: its rows have not landed.
    """
    if outcome is not None and outcome.busy:
        pending = cursor.pending
        return LoadTick(False, cursor, f"waiting for the load requested as {pending.key} "
                                       f"(attempt {pending.attempt}): {outcome.detail}")
    if decision is None:
        raise ValueError("decide_load needs the source's decision unless a run is busy")
    again = outcome is not None and outcome.again
    if again and not decision.run:
        pending = cursor.pending
        resume = (outcome.ended_at if outcome.ended_at is not None
                  else pending.requested_at) + retry_delay(pending.attempt)
        if now < resume:
            return LoadTick(False, cursor, (
                f"{outcome.detail} ({pending.attempt} attempts in a row): backing off, "
                f"the load is requested again in {resume - now:.0f} s"))
    if decision.run or again:
        key = load_run_key(decision.cursor, cursor.last_key, seed)
        attempt = cursor.pending.attempt + 1 if again and cursor.pending else 1
        reason = decision.reason
        if again:
            reason = (f"{outcome.detail}, so what it was to load has not landed: loading "
                      f"again (attempt {attempt}); {decision.cursor.describe()}")
        return LoadTick(True, LoadCursor(decision.cursor, Request(key, now, attempt), key),
                        reason)
    reason = decision.reason if outcome is None else f"{outcome.detail}; {decision.reason}"
    return LoadTick(False, LoadCursor(decision.cursor, None, cursor.last_key), reason,
                    rebase=decision.rebase)


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


def refresh_run_key(epoch: str, number: int, block: DayBlock) -> str:
    """The key of the ``number``-th request of a cursor started at ``epoch`` (the number of
    runs the sensor had launched then): a tick repeated from the same cursor asks for the
    same keys; a block requested again (its run failed, or a later load touched it again)
    gets a new one, and so does every request of a cursor that was reset."""
    return f"paid-orders-refresh-{epoch}.{number}-{block.first}-{block.last}"


# --- paid_orders_refresh_sensor: the days owed ------------------------------------------

REFRESH_CURSOR_VERSION = 2


@dataclass(frozen=True)
class RefreshRequest:
    """A rebuild of a block of days, and the newest ``orders`` materialization (storage id)
    the sensor had read when it asked: the run reads the warehouse after that load."""

    key: str
    first: str
    last: str
    covers: int
    requested_at: float  # POSIX seconds
    batch: str = "unknown"  # the batch id of the newest load that touched the block

    @property
    def days(self) -> list[str]:
        return days_between(parse_day(self.first), parse_day(self.last))


@dataclass(frozen=True)
class RefreshCursor:
    """The cursor of ``paid_orders_refresh_sensor``.

    ``owed`` maps each day to rebuild to the ``orders`` materialization (storage id,
    batch id) that last touched it; a day leaves it only when a successful run requested
    at or after that point has rebuilt it. ``pending`` are the requests not yet landed;
    ``requests`` counts every request made, numbering the run keys; ``failures`` counts,
    per day, the rebuilds that failed in a row and when the last one ended (for
    :func:`retry_delay`).
    """

    after: int | None = None  # storage id of the last orders materialization read
    owed: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    pending: tuple[RefreshRequest, ...] = ()
    requests: int = 0
    failures: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    epoch: str = ""  # where the cursor's run keys start (see refresh_run_key); "" fresh

    def to_cursor(self) -> str:
        return json.dumps({
            "v": REFRESH_CURSOR_VERSION, "after": self.after,
            "owed": {day: list(mark) for day, mark in sorted(self.owed.items())},
            "pending": [asdict(r) for r in self.pending], "requests": self.requests,
            "failures": {day: list(f) for day, f in sorted(self.failures.items())},
            "epoch": self.epoch,
        }, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_cursor(cls, text: str | None) -> RefreshCursor:
        """The state kept in a cursor; the first version's cursor (a bare storage id) reads
        as nothing owed after that id. An unreadable one starts over from the first
        materialization: every day touched is rebuilt once more, which is harmless."""
        if not text:
            return cls()
        try:
            data = json.loads(text)
            if isinstance(data, int):
                return cls(after=data)
            if not isinstance(data, dict) or data.get("v") != REFRESH_CURSOR_VERSION:
                return cls()
            return cls(after=data["after"],
                       owed={day: (int(mark[0]), str(mark[1]))
                             for day, mark in data["owed"].items()},
                       pending=tuple(RefreshRequest(**r) for r in data["pending"]),
                       requests=int(data["requests"]),
                       failures={day: (int(f[0]), float(f[1]))
                                 for day, f in data.get("failures", {}).items()},
                       epoch=str(data.get("epoch", "")))
        except (ValueError, TypeError, KeyError, IndexError):
            return cls()


@dataclass(frozen=True)
class Touched:
    """One ``orders`` materialization, as the refresh sensor reads it."""

    storage_id: int
    days: tuple[str, ...]  # its days_touched that exist as partitions
    batch: str = "unknown"


@dataclass(frozen=True)
class RefreshTick:
    cursor: RefreshCursor
    requests: list[RefreshRequest]
    notes: list[str]


def refresh_tick(cursor: RefreshCursor, touched: Iterable[Touched],
                 outcomes: Mapping[str, Outcome], now: float, seed: str = "0") -> RefreshTick:
    """Owe the days of new materializations, settle requests, ask for free owed days. Pure.

    ``outcomes`` holds what became of each pending request (by run key). A request whose
    run succeeded pays the days it covers — unless a later load touched one of them
    again meanwhile: that day stays owed. A request whose run failed or was canceled is
    dropped, so its days are requested again (new key). Days of a request that is still
    busy are not requested again until it ends: never two runs over the same day.
    ``seed`` starts the run keys of a fresh cursor (:func:`refresh_run_key`).
    """
    owed = dict(cursor.owed)
    after = cursor.after
    for event in touched:
        for day in event.days:
            owed[day] = max(owed.get(day, (event.storage_id, event.batch)),
                            (event.storage_id, event.batch))
        after = event.storage_id if after is None else max(after, event.storage_id)
    failures = dict(cursor.failures)
    pending, notes = [], []
    for request in cursor.pending:
        outcome = outcomes.get(request.key)
        if outcome is None or outcome.busy:
            pending.append(request)
            continue
        span = request.first if request.first == request.last \
            else f"{request.first}...{request.last}"
        if outcome.landed:
            paid = [d for d in request.days if d in owed and owed[d][0] <= request.covers]
            for day in paid:
                del owed[day]
            for day in request.days:
                failures.pop(day, None)
            stale = [d for d in request.days if d in owed]
            if stale:
                notes.append(f"{span}: {outcome.detail}, but {stale} were touched again "
                             "since: rebuilding them again")
        else:
            ended = outcome.ended_at if outcome.ended_at is not None else request.requested_at
            for day in request.days:
                failures[day] = (failures.get(day, (0, 0.0))[0] + 1, ended)
            notes.append(f"{span}: {outcome.detail}, so those files were not rebuilt: "
                         "requesting them again")
    busy = {day for request in pending for day in request.days}
    cooling = {day for day, (count, ended) in failures.items()
               if now < ended + retry_delay(count)}
    if cooling & set(owed):
        notes.append(f"backing off after repeated failures: {sorted(cooling & set(owed))}")
    count, new, epoch = cursor.requests, [], cursor.epoch or seed
    for block in day_blocks(set(owed) - busy - cooling):
        count += 1
        batch = max(owed[d] for d in days_between(parse_day(block.first),
                                                  parse_day(block.last)))[1]
        new.append(RefreshRequest(refresh_run_key(epoch, count, block), block.first,
                                  block.last,
                                  covers=after if after is not None else 0,
                                  requested_at=now, batch=batch))
    failures = {day: f for day, f in failures.items() if day in owed}
    return RefreshTick(RefreshCursor(after, owed, tuple(pending + new), count, failures,
                                     epoch), new, notes)
