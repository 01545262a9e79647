"""Exact money: amounts are ``Decimal`` parsed from text, never binary floats."""

from __future__ import annotations

import re
from decimal import Decimal

from .errors import AmountError

_AMOUNT_RE = re.compile(r"[+-]?\d+(?:\.\d+)?")


def parse_amount(value: object) -> Decimal:
    """``"40.00"`` → ``Decimal("40.00")``; the scale is kept so it writes back as the same text."""
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise AmountError(f"{value!r} is not a finite number")
        return value
    if isinstance(value, bool) or isinstance(value, float):
        # A float has already lost exactness; the reader casts amounts to text in SQL.
        raise AmountError(f"{value!r} is a binary float, not an exact decimal")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, str) and _AMOUNT_RE.fullmatch(value.strip()):
        return Decimal(value.strip())
    raise AmountError(f"{value!r} is not a decimal number such as 40.00")


def format_amount(amount: Decimal) -> str:
    """Plain positional text: ``Decimal("40.00")`` → ``"40.00"`` (no exponent)."""
    return format(amount, "f")
