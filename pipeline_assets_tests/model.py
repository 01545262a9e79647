"""A plain in-memory model of the pipeline, for the stateful test (``test_stateful.py``).

It knows nothing of SQL, files or parsing: every change stamp (``updated_at`` for
``orders``) arrives here together with the instant it means (the test generated the
instant first and rendered the text from it), and the rules are the contract's, written
as directly as possible. It models any declared table: a row is a key (an ``order_id``,
or a tuple for a key of several columns, such as ``payments``' ``(payment_id,
attempt)``) and a version (:class:`Version` for ``orders``, :class:`Payment` for
``payments``) that says what the warehouse stores of it (``stored``), its instant, and
whether it belongs in the table's daily file (``in_view``: paid, captured):

- an incremental load reads every source row with ``updated_at >= W − lookback`` (all of
  them on the first load), upserts it, and moves ``W`` to ``max(W, newest read)``;
- a range load reads exactly ``[start, end)``, deletes the warehouse rows stamped in it
  whose key the source holds nowhere (refusing, with nothing changed, when they are more
  than ``max_delete_share`` of the warehouse rows stamped in it and deletes are not
  allowed), and leaves ``W`` alone; an incremental load never deletes;
- one ledger entry per distinct (kind, window, rows read): a rerun of the same batch is
  recognized and adds nothing;
- a day is committed when the newest manifest listing it vouches for the bytes on disk;
  what it vouches for is the warehouse's rows of the daily file on that day (paid
  orders, captured payments) when it was written.

Other tests use it as their oracle too: :func:`instant_of` and :func:`stored_row` turn a
source row read with the plain driver into the row the warehouse must hold, and
:func:`day_file_bytes` writes a day file as docs/reader-protocol.md describes it
(:func:`parquet_day_rows`: the rows a Parquet one reads back as).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone, tzinfo
from decimal import Decimal

UTC = timezone.utc
PAID = "paid"
CAPTURED = "captured"  # payments' daily file: the rows whose status is captured


def canonical(instant: datetime) -> str:
    """The warehouse's fixed-width UTC text (docs/design.md, "Time")."""
    return instant.astimezone(UTC).isoformat(timespec="microseconds")


def instant_of(text: str, tz: tzinfo) -> datetime:
    """The instant an ``updated_at`` text means (docs/design.md, "Time"): a bare date is
    midnight of that day in ``tz``, a timestamp without offset is read in ``tz``."""
    parsed = datetime.fromisoformat(text.strip())  # 3.11: every ISO-8601 form the app writes
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=tz)


def stored_row(order_id, status, amount, updated_at, tz: tzinfo) -> tuple[int, str, str, str]:
    """A raw source row as the warehouse keeps it: exact plain amount, canonical UTC time."""
    return (
        int(order_id),
        str(status),
        format(Decimal(str(amount).strip()), "f"),
        canonical(instant_of(str(updated_at), tz)),
    )


def day_file_bytes(rows: list[dict], key: tuple[str, ...] = ("order_id",)) -> bytes:
    """A day file (docs/reader-protocol.md): one JSON array sorted by the primary key
    (``order_id``; the columns of ``key`` in order), keys sorted, no spaces, ASCII, a
    newline at the end."""
    ordered = sorted(rows, key=lambda r: tuple(r[k] for k in key))
    return (json.dumps(ordered, sort_keys=True, separators=(",", ":")) + "\n").encode("ascii")


def parquet_day_rows(
    rows: list[dict], types: Mapping[str, str | dict], key: tuple[str, ...] = ("order_id",)
) -> list[dict]:
    """The rows of a Parquet day file (``format: parquet``) as pyarrow reads them back
    (``Table.to_pylist()``), from the same day's rows as its JSON file holds them
    (:func:`day_file_bytes`): sorted by the columns of ``key``, each value of its
    declared type (``types``: a declaration's columns): a ``decimal(P,S)`` as a Decimal
    with its S places, a date as a ``date``, a timestamp as its instant (aware, UTC);
    integers, text, booleans, floats and a plain ``decimal``'s exact text as they are."""

    def typed(kind: str, value):
        if value is None:
            return None
        if kind.startswith("decimal("):
            places = int(kind.rstrip(")").split(",")[1])
            return Decimal(value).quantize(Decimal(1).scaleb(-places))
        if kind == "date":
            return date.fromisoformat(value)
        if kind == "timestamp":
            return datetime.fromisoformat(value).astimezone(UTC)
        return value

    kinds = {name: t if isinstance(t, str) else t["type"] for name, t in types.items()}
    ordered = sorted(rows, key=lambda r: tuple(r[k] for k in key))
    return [{name: typed(kinds[name], value) for name, value in row.items()} for row in ordered]


@dataclass(frozen=True)
class Version:
    """One version of an order as the app wrote it, and the instant its text means."""

    status: str
    amount: str  # exact decimal text, already in plain form ("12.50", "-3", "0.005")
    updated_at: str  # the text exactly as the app stored it
    instant: datetime  # aware

    def stored(self, order_id: int) -> tuple[int, str, str, str]:
        return (order_id, self.status, self.amount, canonical(self.instant))

    def day(self, tz: tzinfo) -> date:
        return self.instant.astimezone(tz).date()

    @property
    def in_view(self) -> bool:
        """Whether the order belongs in ``paid_orders``."""
        return self.status == PAID


@dataclass(frozen=True)
class Payment:
    """One version of a payment attempt as the app wrote it (``tables.PAYMENTS``): every
    type, NULLs in the nullable columns, and the instant its ``modified_at`` means."""

    status: str
    amount_cents: int
    fee: Decimal  # decimal(10,2): the exact value, whatever the source's spelling
    rate: float | None  # finite
    note: str | None  # any Unicode
    refundable: bool
    settle_on: date | None
    modified_at: str  # the text the app wrote (SQLite), or the instant's ISO text
    instant: datetime  # aware

    def stored(self, key: tuple[int, int]) -> tuple:
        """The row as the warehouse keeps it: the fee with its 2 places, the date as
        ``YYYY-MM-DD``, the stamp as canonical UTC text."""
        return (
            *key,
            self.status,
            self.amount_cents,
            format(self.fee.quantize(Decimal("0.01")), "f"),
            self.rate,
            self.note,
            self.refundable,
            self.settle_on and self.settle_on.isoformat(),
            canonical(self.instant),
        )

    def day(self, tz: tzinfo) -> date:
        return self.instant.astimezone(tz).date()

    @property
    def in_view(self) -> bool:
        """Whether the attempt belongs in ``captured_payments``."""
        return self.status == CAPTURED

    def file_row(self, key: tuple[int, int], tz: tzinfo) -> dict:
        """The attempt as ``captured_payments`` holds it: its columns, JSON-ready, the
        stamp in ``tz``."""
        payment_id, attempt = key
        return {
            "payment_id": payment_id,
            "attempt": attempt,
            "amount_cents": self.amount_cents,
            "fee": format(self.fee.quantize(Decimal("0.01")), "f"),
            "note": self.note,
            "refundable": self.refundable,
            "settle_on": self.settle_on and self.settle_on.isoformat(),
            "modified_at": self.instant.astimezone(tz).isoformat(),
        }


@dataclass(frozen=True)
class LoadPrediction:
    kind: str
    window_start: datetime | None
    window_end: datetime | None
    read: dict[Hashable, Version | Payment]  # by key, ascending
    inserted: int
    updated: int
    unchanged: int
    newest: datetime | None
    watermark_before: datetime | None
    watermark_after: datetime | None
    skipped: bool
    key: tuple
    needed_days: frozenset[str]  # days whose daily-file rows (paid orders) this load changes
    possible_days: frozenset[str]  # old and new day of every row it changes
    deleted: tuple = ()  # range loads: the keys it deletes, ascending
    refused: bool = False  # range loads: it would delete too many, and may not


@dataclass
class Model:
    tz: tzinfo
    lookback_days: int
    # by key: an order_id, or a tuple for a key of several columns
    source: dict[Hashable, Version | Payment] = field(default_factory=dict)
    warehouse: dict[Hashable, Version | Payment] = field(default_factory=dict)
    # False while the row's latest version has not been read by any committed load.
    picked_up: dict[Hashable, bool] = field(default_factory=dict)
    watermark: datetime | None = None
    watermark_changes: list[tuple[datetime | None, datetime]] = field(default_factory=list)
    # (kind, window start, window end, rows read) → ledger columns other than the id
    ledger: dict[tuple, dict] = field(default_factory=dict)
    batch_ids: dict[tuple, str] = field(default_factory=dict)  # as seen in results
    vouched: dict[str, list[dict]] = field(default_factory=dict)  # newest manifest's rows
    on_disk: dict[str, list[dict]] = field(default_factory=dict)  # the day file's rows
    last_days_touched: tuple[str, ...] = ()
    stats: Counter = field(default_factory=Counter)

    # --- the app ---------------------------------------------------------------------

    def set_row(self, key: Hashable, version: Version | Payment) -> None:
        self.source[key] = version
        current = self.warehouse.get(key)
        self.picked_up[key] = current is not None and current.stored(key) == version.stored(key)

    def stale(self) -> set:
        """Keys whose latest version no committed load has read (yet)."""
        return {oid for oid, ok in self.picked_up.items() if not ok}

    def delete_row(self, key: Hashable) -> None:
        """The app deletes a row: stale while the warehouse still holds it."""
        self.source.pop(key, None)
        self.picked_up[key] = key not in self.warehouse

    set_order = set_row  # orders' words
    delete_order = delete_row

    # --- loads -----------------------------------------------------------------------

    def predict_load(
        self,
        start: datetime | None = None,
        end: datetime | None = None,
        *,
        max_delete_share: float = 0.5,
        allow_deletes: bool = False,
    ) -> LoadPrediction:
        kind = "incremental" if start is None else "range"
        before = self.watermark
        if kind == "incremental" and before is not None:
            start = before - timedelta(days=self.lookback_days)
        read = {
            oid: v
            for oid, v in sorted(self.source.items())
            if (start is None or v.instant >= start) and (end is None or v.instant < end)
        }
        inserted = updated = unchanged = 0
        needed: set[str] = set()
        possible: set[str] = set()
        for oid, v in read.items():
            old = self.warehouse.get(oid)
            if old is None:
                inserted += 1
            elif old.stored(oid) == v.stored(oid):
                unchanged += 1
                continue
            else:
                updated += 1
                possible.add(old.day(self.tz).isoformat())
                if old.in_view:
                    needed.add(old.day(self.tz).isoformat())
            possible.add(v.day(self.tz).isoformat())
            if v.in_view:
                needed.add(v.day(self.tz).isoformat())
        deleted: tuple = ()
        refused = False
        if kind == "range":
            in_range = {oid for oid, v in self.warehouse.items() if start <= v.instant < end}
            deleted = tuple(sorted(oid for oid in in_range if oid not in self.source))
            refused = len(deleted) > max_delete_share * len(in_range) and not allow_deletes
            for oid in deleted:
                old = self.warehouse[oid]
                possible.add(old.day(self.tz).isoformat())
                if old.in_view:
                    needed.add(old.day(self.tz).isoformat())
        newest = max((v.instant for v in read.values()), default=None)
        after = before
        if kind == "incremental" and newest is not None:
            after = newest if before is None else max(before, newest)
        key = (
            kind,
            start and canonical(start),
            end and canonical(end),
            tuple(v.stored(oid) for oid, v in read.items()),
        )
        return LoadPrediction(
            kind=kind,
            window_start=start,
            window_end=end,
            read=read,
            inserted=inserted,
            updated=updated,
            unchanged=unchanged,
            newest=newest,
            watermark_before=before,
            watermark_after=after,
            skipped=key in self.ledger and inserted + updated + len(deleted) == 0,
            key=key,
            needed_days=frozenset(needed),
            possible_days=frozenset(possible),
            deleted=deleted,
            refused=refused,
        )

    def commit_load(self, p: LoadPrediction) -> None:
        if p.kind == "incremental" and p.window_start is not None:
            # Changes this load could not see: older than its window (too late).
            self.stats["late_missed"] += sum(
                1
                for oid in self.stale()
                if oid not in p.read
                and oid in self.source
                and self.source[oid].instant < p.window_start
            )
            self.stats["late_caught"] += sum(
                1
                for oid, v in p.read.items()
                if not self.picked_up.get(oid, True) and v.instant < p.watermark_before
            )
        for oid, v in p.read.items():
            self.warehouse[oid] = v
            self.picked_up[oid] = True
        for oid in p.deleted:
            del self.warehouse[oid]
            self.picked_up[oid] = True
        if p.watermark_after != p.watermark_before:
            self.watermark_changes.append((p.watermark_before, p.watermark_after))
        self.watermark = p.watermark_after
        if p.key not in self.ledger:
            self.ledger[p.key] = dict(
                kind=p.kind,
                window_start=p.key[1],
                window_end=p.key[2],
                rows_read=len(p.read),
                inserted=p.inserted,
                updated=p.updated,
                unchanged=p.unchanged,
                watermark_before=p.watermark_before and canonical(p.watermark_before),
                watermark_after=p.watermark_after and canonical(p.watermark_after),
                rows_deleted=len(p.deleted) if p.kind == "range" else None,
            )

    # --- day files -------------------------------------------------------------------

    def paid_by_day(self, days) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {d: [] for d in sorted(set(days))}
        for oid, v in sorted(self.warehouse.items()):
            local = v.instant.astimezone(self.tz)
            if v.status == PAID and local.date().isoformat() in out:
                out[local.date().isoformat()].append(
                    {
                        "order_id": oid,
                        "status": PAID,
                        "amount": v.amount,
                        "updated_at": local.isoformat(),
                    }
                )
        return out

    def view_by_day(self, days) -> dict[str, list[dict]]:
        """The warehouse's rows of the table's daily file on each of ``days``, by key (a
        version's ``file_row``: payments)."""
        out: dict[str, list[dict]] = {d: [] for d in sorted(set(days))}
        for key, v in sorted(self.warehouse.items()):
            day = v.day(self.tz).isoformat()
            if v.in_view and day in out:
                out[day].append(v.file_row(key, self.tz))
        return out

    def day_state(self, day: str) -> tuple[str, list[dict] | None]:
        vouched, on_disk = self.vouched.get(day), self.on_disk.get(day)
        if vouched is None:
            return ("not built" if on_disk is None else "uncommitted"), None
        if on_disk == vouched:
            return "committed", vouched
        return "uncommitted", None

    def files_replaced(self, rows_by_day: dict[str, list[dict]], days) -> None:
        for day in days:
            self.on_disk[day] = rows_by_day[day]

    def manifest_written(self, rows_by_day: dict[str, list[dict]]) -> None:
        for day, rows in rows_by_day.items():
            self.vouched[day] = rows
