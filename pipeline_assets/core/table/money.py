"""Exact money: amounts are ``Decimal`` parsed from text, never binary floats.

The rules are the ``decimal`` column type's (:func:`.codecs.decimals.parse_decimal`,
:func:`.codecs.decimals.format_decimal`: one home per type); this module keeps the names and the
:class:`AmountError` its callers know, with the same messages.
"""

from __future__ import annotations

from decimal import Decimal

from ..errors import AmountError, TypeValueError
from .codecs.decimals import format_decimal, parse_decimal


def parse_amount(value: object) -> Decimal:
    """``"40.00"`` → ``Decimal("40.00")``; the scale is kept so it writes back as the same text.

    A float (or a bool) is refused: it has already lost exactness; the reader casts
    amounts to text in SQL."""
    try:
        return parse_decimal(value)
    except TypeValueError as exc:
        raise AmountError(exc.reason) from None


def format_amount(amount: Decimal) -> str:
    """Plain positional text: ``Decimal("40.00")`` → ``"40.00"`` (no exponent)."""
    return format_decimal(amount)
