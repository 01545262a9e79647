"""``paid_orders_refresh_sensor``: the days each ``orders`` materialization touched become
runs over the days that exist as partitions, one run per block of consecutive days
(:func:`day_blocks`); its cursor (:class:`RefreshCursor`) keeps the days it owes until a
successful run requested after they became owed has rebuilt them, and asks for one round
of runs at a time (:func:`refresh_tick`).

When the file set's declaration changes (its shape: columns, types, filter), every
committed day written in another shape is owed too, once: the cursor keeps the shape it
last owed them for (``declaration``), and the Dagster layer looks for such days only
when the declared shape differs from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import date

from ..days import days_between, runs
from ..times import parse_day
from .outcomes import Outcome, request_outcome, retry_delay

REFRESH_CURSOR_VERSION = 2


@dataclass(frozen=True)
class DayBlock:
    """Consecutive touched days, rebuilt by one run (a single-run range backfill)."""

    first: str
    last: str

    @property
    def days(self) -> int:
        return (date.fromisoformat(self.last) - date.fromisoformat(self.first)).days + 1


def partition_days(
    days_touched: Iterable[str], *, first_day: date, last_day: date
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


def refresh_run_key(epoch: str, number: int, block: DayBlock, files: str) -> str:
    """The key of the ``number``-th request of a cursor started at ``epoch`` (the number of
    runs the sensor had launched then): a tick repeated from the same cursor asks for the
    same keys; a block requested again (its run failed, or a later load touched it again)
    gets a new one, and so does every request of a cursor that was reset. ``files``: the
    file set's name, ``_`` written ``-``."""
    return f"{files.replace('_', '-')}-refresh-{epoch}.{number}-{block.first}-{block.last}"


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
    declaration: str = ""  # the file set's shape the stale days were last owed for

    def to_cursor(self) -> str:
        return json.dumps(
            {
                "v": REFRESH_CURSOR_VERSION,
                "after": self.after,
                "owed": {day: list(mark) for day, mark in sorted(self.owed.items())},
                "pending": [asdict(r) for r in self.pending],
                "requests": self.requests,
                "failures": {day: list(f) for day, f in sorted(self.failures.items())},
                "epoch": self.epoch,
                "declaration": self.declaration,
            },
            sort_keys=True,
            separators=(",", ":"),
        )

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
            return cls(
                after=data["after"],
                owed={day: (int(mark[0]), str(mark[1])) for day, mark in data["owed"].items()},
                pending=tuple(RefreshRequest(**r) for r in data["pending"]),
                requests=int(data["requests"]),
                failures={
                    day: (int(f[0]), float(f[1])) for day, f in data.get("failures", {}).items()
                },
                epoch=str(data.get("epoch", "")),
                declaration=str(data.get("declaration", "")),
            )
        except (ValueError, TypeError, KeyError, IndexError):
            return cls()


@dataclass(frozen=True)
class Touched:
    """One ``orders`` materialization, as the refresh sensor reads it."""

    storage_id: int
    days: tuple[str, ...]  # its days_touched that exist as partitions
    batch: str = "unknown"
    moves: tuple[tuple[str, str], ...] = ()  # its days_moved (old day, new day)


@dataclass(frozen=True)
class RefreshTick:
    cursor: RefreshCursor
    requests: list[RefreshRequest]
    notes: list[str]


def refresh_tick(
    cursor: RefreshCursor,
    touched: Iterable[Touched],
    outcomes: Mapping[str, Outcome],
    now: float,
    seed: str = "0",
    *,
    files: str,
    declaration: str | None = None,
    stale: Iterable[str] = (),
) -> RefreshTick:
    """Owe the days of new materializations, settle requests, ask for free owed days. Pure.

    ``declaration`` (the file set's shape now) with ``stale`` (its committed days written
    in another shape, looked up because ``declaration`` differs from the cursor's): those
    days are owed, once; the cursor then keeps ``declaration``.

    ``outcomes`` holds what became of each pending request (by run key); a request it
    has nothing on is taken as one whose run never appeared (:func:`.request_outcome` of
    no run): pending for :data:`.outcomes.GRACE_SECONDS`, then lost, dropped with a note,
    and its days requested again, so a run deleted from the instance, or one that never
    appeared, never stops the file set's rebuilds. A request whose run succeeded pays the
    days it covers — unless a later load touched one of them
    again meanwhile: that day stays owed. A request whose run failed or was canceled is
    dropped, so its days are requested again (new key). While any request is still
    busy nothing is requested: the owed days go in the next round, once every request
    of this one has ended. So never two runs over the same day, and never more runs
    waiting than one round's blocks, however fast loads come.
    ``seed`` starts the run keys of a fresh cursor (:func:`refresh_run_key`).
    """
    owed, after, shape = _owe(cursor, touched, declaration, stale)
    owed, failures, pending, notes = _settle(cursor.pending, outcomes, now, owed, cursor.failures)
    cooling = {day for day, (count, ended) in failures.items() if now < ended + retry_delay(count)}
    if cooling & set(owed):
        notes.append(f"backing off after repeated failures: {sorted(cooling & set(owed))}")
    # One round at a time: while a request is in flight, the days owed meanwhile wait,
    # then go in the next round together. The file set's writers run one at a time (its
    # pool), so a run asked for now would only queue behind it; and under a steady stream
    # of loads, one run per load queues faster than runs end.
    free = set() if pending else set(owed) - cooling
    epoch = cursor.epoch or seed
    new = _round(
        free,
        owed,
        numbered_after=cursor.requests,
        epoch=epoch,
        files=files,
        covers=after if after is not None else 0,
        now=now,
    )
    count = cursor.requests + len(new)
    failures = {day: f for day, f in failures.items() if day in owed}
    return RefreshTick(
        RefreshCursor(after, owed, tuple(pending + new), count, failures, epoch, shape), new, notes
    )


def _owe(
    cursor: RefreshCursor,
    touched: Iterable[Touched],
    declaration: str | None,
    stale: Iterable[str],
) -> tuple[dict[str, tuple[int, str]], int | None, str]:
    """``(owed, after, shape)``: the cursor's owed days plus the days of the new
    materializations (each marked by the newest that touched it) and, when ``declaration``
    differs from the cursor's, the ``stale`` days; the storage id read up to; the shape
    the cursor keeps."""
    owed = dict(cursor.owed)
    after = cursor.after
    for event in touched:
        for day in (*event.days, *joining(event)):
            owed[day] = max(
                owed.get(day, (event.storage_id, event.batch)), (event.storage_id, event.batch)
            )
        after = event.storage_id if after is None else max(after, event.storage_id)
    shape = cursor.declaration
    if declaration is not None and declaration != shape:
        mark = (after if after is not None else 0, f"declaration {declaration}")
        for day in stale:
            owed[day] = max(owed.get(day, mark), mark)
        shape = declaration
    return owed, after, shape


# The widest span of days a moved row's two days are rebuilt in as one run: the days
# between are rebuilt with them (unchanged, so written as the same bytes). Farther apart,
# the two days are two runs, each committed on its own.
JOINED_DAYS = 31


def joining(event: Touched) -> list[str]:
    """The days between the two days of each of ``event``'s moves (both partitions, at
    most :data:`JOINED_DAYS` apart): owed with them, they make one block of consecutive
    days, one run and one manifest, so no reader sees a moved row on both days or on
    neither."""
    partitions = set(event.days)
    out = set()
    for old, new in event.moves:
        if old not in partitions or new not in partitions:
            continue
        first, last = sorted((parse_day(old), parse_day(new)))
        if (last - first).days < JOINED_DAYS:
            out.update(days_between(first, last))
    return sorted(out - partitions)


def _settle(
    requests: Iterable[RefreshRequest],
    outcomes: Mapping[str, Outcome],
    now: float,
    owed: Mapping[str, tuple[int, str]],
    failures: Mapping[str, tuple[int, float]],
) -> tuple[
    dict[str, tuple[int, str]], dict[str, tuple[int, float]], list[RefreshRequest], list[str]
]:
    """``(owed, failures, pending, notes)`` once the pending ``requests`` are settled: a
    busy one stays pending; a landed one pays the days it covers (a day touched again
    since stays owed); a failed, canceled or lost one counts a failure on each of its
    days, which stay owed."""
    owed, failures = dict(owed), dict(failures)
    pending, notes = [], []
    for request in requests:
        # a request nothing is known of reads as one with no run: waited for during the
        # grace a run takes to appear, then lost, and its days asked for again
        outcome = outcomes.get(request.key) or request_outcome(
            (), requested_at=request.requested_at, now=now
        )
        if outcome.busy:
            pending.append(request)
            continue
        span = (
            request.first if request.first == request.last else f"{request.first}...{request.last}"
        )
        if outcome.landed:
            paid = [d for d in request.days if d in owed and owed[d][0] <= request.covers]
            for day in paid:
                del owed[day]
            for day in request.days:
                failures.pop(day, None)
            again = [d for d in request.days if d in owed]
            if again:
                notes.append(
                    f"{span}: {outcome.detail}, but {again} were touched again "
                    "since: rebuilding them again"
                )
        else:
            ended = outcome.ended_at if outcome.ended_at is not None else request.requested_at
            for day in request.days:
                failures[day] = (failures.get(day, (0, 0.0))[0] + 1, ended)
            notes.append(
                f"{span}: {outcome.detail}, so those files were not rebuilt: requesting them again"
            )
    return owed, failures, pending, notes


def _round(
    free: Iterable[str],
    owed: Mapping[str, tuple[int, str]],
    *,
    numbered_after: int,
    epoch: str,
    files: str,
    covers: int,
    now: float,
) -> list[RefreshRequest]:
    """One request per block of consecutive ``free`` days, numbered on from
    ``numbered_after``, each naming the batch of the newest load that touched its block."""
    new = []
    for number, block in enumerate(day_blocks(free), start=numbered_after + 1):
        batch = max(owed[d] for d in days_between(parse_day(block.first), parse_day(block.last)))[1]
        new.append(
            RefreshRequest(
                refresh_run_key(epoch, number, block, files),
                block.first,
                block.last,
                covers=covers,
                requested_at=now,
                batch=batch,
            )
        )
    return new
