"""One order, validated: the unit every other rule works on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from decimal import Decimal

from ..errors import AmountError, InvalidRowError, TimeValueError
from ..table.money import format_amount, parse_amount
from ..times import UTC, canonical, day_of, to_instant

COLUMNS = ("order_id", "status", "amount", "updated_at")
PAID = "paid"


@dataclass(frozen=True, slots=True)
class Order:
    order_id: int
    status: str
    amount: Decimal
    updated_at: datetime  # aware, in UTC so that equality is plain instant equality

    @property
    def stored(self) -> tuple[int, str, str, str]:
        """The row as the warehouse keeps it: exact amount text, canonical UTC timestamp."""
        return (self.order_id, self.status, format_amount(self.amount), canonical(self.updated_at))

    def day(self, tz: tzinfo) -> date:
        return day_of(self.updated_at, tz)

    @property
    def is_paid(self) -> bool:
        return self.status == PAID


def validate(
    order_id: object, status: object, amount: object, updated_at: object, tz: tzinfo
) -> Order:
    """Check one raw source row and return it normalized, or raise :class:`InvalidRowError`."""
    if order_id is None or isinstance(order_id, bool):
        raise InvalidRowError(None, "order_id", order_id, "every order needs an integer key")
    if not isinstance(order_id, int):
        text = str(order_id).strip()
        if not text.lstrip("-").isdigit():
            raise InvalidRowError(order_id, "order_id", order_id, "the key is not an integer")
        order_id = int(text)
    if status is None or not str(status).strip():
        raise InvalidRowError(order_id, "status", status, "the status is missing")
    if amount is None:
        raise InvalidRowError(order_id, "amount", amount, "the amount is missing")
    try:
        exact = parse_amount(amount)
    except AmountError as exc:
        raise InvalidRowError(order_id, "amount", amount, str(exc)) from None
    if updated_at is None:
        raise InvalidRowError(order_id, "updated_at", updated_at, "the timestamp is missing")
    try:
        instant = to_instant(updated_at, tz)
    except TimeValueError as exc:
        raise InvalidRowError(order_id, "updated_at", updated_at, str(exc)) from None
    return Order(order_id, str(status), exact, instant.astimezone(UTC))
