"""``new_N_sensor``'s cursor (``new_orders_sensor`` for ``orders``): what it saw, and the
load it requested until a run of that load succeeds (:class:`LoadCursor`);
:func:`decide_load` turns the request's outcome and the source's news into one tick's
answer (:class:`LoadTick`), and :func:`check_source` is that tick, with its reads of the
warehouse and the source, for the declared table ``spec`` (``orders`` unless told).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, tzinfo

from sqlalchemy.engine import Engine

from ..commands import DEMO_INIT
from ..db.engines import sqlite_file
from ..errors import DatabaseError
from ..secrets import redact
from ..source.scan import inspect_source
from ..table.spec import TableSpec
from ..warehouse import watermark as wm
from .observation import CURSOR_VERSION, Decision, Observation, check, observe
from .outcomes import Outcome, RunView, request_outcome, retry_delay


def run_key_prefix(spec: TableSpec) -> str:
    """``new-<name>-`` (``_`` as ``-``): the run keys of ``new_<name>_sensor``."""
    return f"new-{spec.name.replace('_', '-')}-"


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
        return json.dumps(
            {
                "v": LOAD_CURSOR_VERSION,
                "seen": None if self.seen is None else asdict(self.seen),
                "pending": None if self.pending is None else asdict(self.pending),
                "last_key": self.last_key,
            },
            sort_keys=True,
            separators=(",", ":"),
        )

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
            return cls(
                seen=None if seen is None else Observation(**seen),
                pending=None if pending is None else Request(**pending),
                last_key=data.get("last_key"),
            )
        except (ValueError, TypeError):
            return cls()


def load_run_key(
    seen: Observation, previous_key: str | None, seed: str = "", *, spec: TableSpec
) -> str:
    """The run key of a new request of ``spec``'s sensor (:func:`run_key_prefix`): never
    one an earlier request used.

    Each key chains the observation to the previous key, so the same observation requested
    again (its run failed) or seen again (after other loads) gets a fresh key — Dagster
    launches a key only once — while a tick repeated from the same cursor asks for the
    same key. A fresh cursor (none yet, or a reset one) starts the chain from ``seed``:
    the number of runs the sensor has launched so far, so that a reset cursor never
    reuses the keys of the one before it.
    """
    previous = previous_key if previous_key is not None else f"start-{seed}"
    chained = f"{seen.to_cursor()}|{previous}".encode()
    return run_key_prefix(spec) + hashlib.sha256(chained).hexdigest()[:20]


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


def decide_load(
    cursor: LoadCursor,
    outcome: Outcome | None,
    decision: Decision | None,
    now: float,
    seed: str = "",
    *,
    spec: TableSpec,
) -> LoadTick:
    """Run or skip from what became of the pending request and what the source says. Pure.

    ``outcome`` is that of ``cursor.pending`` (None without one); ``decision`` compares
    the source with ``cursor.seen`` (:func:`check`), and is not needed while the request
    is busy: nothing is requested then, whatever the source did — the next tick after
    its run ends compares again. A request whose run failed or was canceled is made again
    with a new key, even if the source did not change: its rows have not landed.
    """
    if outcome is not None and outcome.busy:
        pending = cursor.pending
        return LoadTick(
            False,
            cursor,
            f"waiting for the load requested as {pending.key} "
            f"(attempt {pending.attempt}): {outcome.detail}",
        )
    if decision is None:
        raise ValueError("decide_load needs the source's decision unless a run is busy")
    again = outcome is not None and outcome.again
    if again and not decision.run:
        pending = cursor.pending
        resume = (
            outcome.ended_at if outcome.ended_at is not None else pending.requested_at
        ) + retry_delay(pending.attempt)
        if now < resume:
            return LoadTick(
                False,
                cursor,
                (
                    f"{outcome.detail} ({pending.attempt} attempts in a row): backing off, "
                    f"the load is requested again in {resume - now:.0f} s"
                ),
            )
    if decision.run or again:
        key = load_run_key(decision.cursor, cursor.last_key, seed, spec=spec)
        attempt = cursor.pending.attempt + 1 if again and cursor.pending else 1
        reason = decision.reason
        if again:
            reason = (
                f"{outcome.detail}, so what it was to load has not landed: loading "
                f"again (attempt {attempt}); {decision.cursor.describe(spec)}"
            )
        return LoadTick(True, LoadCursor(decision.cursor, Request(key, now, attempt), key), reason)
    reason = decision.reason if outcome is None else f"{outcome.detail}; {decision.reason}"
    return LoadTick(
        False, LoadCursor(decision.cursor, None, cursor.last_key), reason, rebase=decision.rebase
    )


def read_watermark(warehouse: Engine, *, spec: TableSpec) -> datetime | None:
    """The watermark of the declared table ``spec``, without creating a missing SQLite
    warehouse file (a sensor only reads)."""
    if _missing_sqlite_file(warehouse):
        return None
    return wm.current(warehouse, table=spec.name)


def _missing_sqlite_file(engine: Engine) -> bool:
    path = sqlite_file(engine.url)
    return path is not None and not path.exists()


def check_source(
    source: Engine,
    warehouse: Engine,
    *,
    tz: tzinfo,
    lookback_days: int,
    cursor: str | None,
    runs_for: Callable[[str], Iterable[RunView]] | None = None,
    now: float = 0.0,
    seed: str = "",
    spec: TableSpec,
) -> LoadTick:
    """One tick of ``spec``'s new-rows sensor: the pending request's runs (``runs_for`` a
    run key), then watermark → window → observation → decision. ``now`` is POSIX seconds;
    ``seed`` starts the chain of run keys of a fresh cursor (:func:`load_run_key`).

    While the pending request's run is queued or running, the source is not even asked.
    """
    state = LoadCursor.from_cursor(cursor)
    outcome = None
    if state.pending is not None:
        if runs_for is None:
            raise ValueError("a cursor with a pending request needs runs_for to look it up")
        outcome = request_outcome(
            runs_for(state.pending.key), requested_at=state.pending.requested_at, now=now
        )
        if outcome.busy:
            return decide_load(state, outcome, None, now, spec=spec)
    if _missing_sqlite_file(source):
        todo = spec.say("no_source", init=DEMO_INIT)
        raise DatabaseError(f"there is no source database at {redact(source.url)} yet: {todo}")
    current = (  # an append-only table is asked its highest id, whatever the watermark
        None
        if spec.counts_ids
        else wm.window_start(read_watermark(warehouse, spec=spec), lookback_days)
    )
    src = inspect_source(source, spec)
    decision = check(
        state.seen, current, lambda start: observe(source, tz, start, src, spec=spec), spec=spec
    )
    return decide_load(state, outcome, decision, now, seed, spec=spec)
