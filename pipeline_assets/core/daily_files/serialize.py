"""The bytes of day files, manifests and pointers: deterministic JSON, and its sha256."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal

from .layout import DayFilesError, check_day

ROW_FIELDS = ("order_id", "status", "amount", "updated_at")

_AMOUNT_RE = re.compile(r"^[+-]?\d+(?:\.\d+)?$")


def _row_for_file(day: str, row: Mapping) -> dict:
    if not isinstance(row, Mapping):
        raise DayFilesError(f"day {day}: a row must be a mapping, got {row!r}")
    keys = set(row)
    if keys != set(ROW_FIELDS):
        missing, extra = sorted(set(ROW_FIELDS) - keys), sorted(keys - set(ROW_FIELDS), key=str)
        raise DayFilesError(
            f"day {day}: row {dict(row)!r} must have exactly the fields {', '.join(ROW_FIELDS)}"
            f" (missing: {missing or 'none'}, unexpected: {extra or 'none'})"
        )
    order_id, status, amount, updated_at = (row[name] for name in ROW_FIELDS)
    if isinstance(order_id, bool) or not isinstance(order_id, int):
        raise DayFilesError(f"day {day}: order_id {order_id!r} must be an integer")
    who = f"day {day}, order {order_id}"
    if not isinstance(status, str) or not status:
        raise DayFilesError(f"{who}: status {status!r} must be non-empty text")
    if isinstance(amount, Decimal) and amount.is_finite():
        amount = format(amount, "f")
    if not isinstance(amount, str) or not _AMOUNT_RE.fullmatch(amount):
        raise DayFilesError(
            f"{who}: amount {amount!r} must be exact decimal text such as \"22.00\" "
            "(never a float)"
        )
    if isinstance(updated_at, datetime):
        updated_at = updated_at.isoformat()
    if not isinstance(updated_at, str):
        raise DayFilesError(f"{who}: updated_at {updated_at!r} must be ISO-8601 text")
    try:
        datetime.fromisoformat(updated_at)
    except ValueError:
        raise DayFilesError(f"{who}: updated_at {updated_at!r} is not ISO-8601") from None
    return {"order_id": order_id, "status": status, "amount": amount,
            "updated_at": updated_at}


def serialize_day(day: str, rows: Iterable[Mapping]) -> bytes:
    """The bytes of a day file: rows sorted by ``order_id``; same rows → same bytes."""
    check_day(day)
    clean = sorted((_row_for_file(day, row) for row in rows), key=lambda r: r["order_id"])
    for before, after in zip(clean, clean[1:], strict=False):
        if before["order_id"] == after["order_id"]:
            raise DayFilesError(
                f"day {day}: order {after['order_id']} appears twice; a day holds each "
                "order once"
            )
    return dumps(clean)


class DayFileHashes:
    """The sha256 of the bytes :func:`serialize_day` gives each of ``days``, from Arrow
    tables of stored rows (``order_id``, ``status``, ``amount``, ``updated_at`` canonical
    UTC text, ``day`` as days since 1970-01-01) fed in ``order_id`` order, batch after
    batch: the same bytes, built by Arrow's kernels and hashed as they come (nothing held
    but a hash per day), so ``verify`` checks a year of files at the speed of one scan.

    A day with a row this cannot vouch for (an amount :func:`serialize_day` would refuse)
    gets no hash: the caller builds that day's bytes the slow way, and words the error.
    """

    def __init__(self, days, tz):
        import pyarrow as pa

        self.tz = tz
        self._hashes = {day: [hashlib.sha256(), 0] for day in days}
        self._wanted = pa.array(sorted(self._hashes), pa.int32())
        self._unsure: set[int] = set()

    def add(self, table) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from ..columnar import INSTANT, local_text

        rows = table.filter(pc.and_(pc.equal(table["status"], "paid"),
                                    pc.is_in(table["day"], value_set=self._wanted)))
        if not rows.num_rows:
            return
        rows = rows.sort_by([("day", "ascending"), ("order_id", "ascending")])
        amount = rows["amount"]
        fine = pc.match_substring_regex(amount, _AMOUNT_RE.pattern)
        if not pc.all(fine).as_py():
            self._unsure |= set(pc.unique(rows["day"].filter(pc.invert(fine))).to_pylist())
        text = pc.binary_join_element_wise(
            '{"amount":"', amount, '","order_id":', pc.cast(rows["order_id"], pa.string()),
            ',"status":"paid","updated_at":"',
            local_text(pc.cast(rows["updated_at"], INSTANT), self.tz), '"}', "")
        day = rows["day"].to_numpy()
        cut = np.flatnonzero(np.diff(day)) + 1
        starts = np.concatenate(([0], cut))
        offsets = pa.array(np.concatenate((starts, [len(day)])), pa.int32())
        lists = pa.ListArray.from_arrays(offsets, text.combine_chunks()
                                         if isinstance(text, pa.ChunkedArray) else text)
        counts = np.diff(offsets.to_numpy()).tolist()
        for start, count, joined in zip(starts.tolist(), counts,
                                        pc.binary_join(lists, ",").to_pylist(), strict=True):
            state = self._hashes[int(day[start])]
            state[0].update(("," if state[1] else "[").encode("ascii")
                            + joined.encode("ascii"))
            state[1] += count

    def result(self) -> dict[int, tuple[int, str]]:
        """``{day: (rows, sha256 hex)}`` for every day it can vouch for."""
        out = {}
        for day, (digest, rows) in self._hashes.items():
            if day in self._unsure:
                continue
            digest = digest.copy()
            digest.update(b"]\n" if rows else b"[]\n")
            out[day] = (rows, digest.hexdigest())
        return out


def dumps(value: object) -> bytes:
    """Compact, key-sorted, ASCII JSON and a newline: the form of every file we write."""
    return (json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
            + "\n").encode("ascii")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def json_object(name: str, data: bytes) -> dict:
    """The JSON object in ``data`` (the bytes of ``name``); ValueError when it is not one."""
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"{name.rpartition('/')[2]} is not valid JSON (truncated or corrupt)"
                         ) from None
    if not isinstance(value, dict):
        raise ValueError(f"{name.rpartition('/')[2]} does not hold a JSON object")
    return value
