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
