"""``orders``' own row rules, kept from before tables were declared.

The chapter's ``orders`` (:data:`~pipeline_assets.core.table.orders.ORDERS`) is read by
:func:`.orders.validate`, whose messages name ``order 105`` and whose ``status`` may not be blank
("the status is missing"), where a declared text column takes any text, blank included, as it is.
Its warehouse, day files and tests were built on these rules, so they stay; any other
declaration takes the rules of its column types alone.
"""

from __future__ import annotations

from datetime import tzinfo

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidRowError
from ..table import working
from ..table.orders import ORDERS
from ..table.spec import TableSpec
from ..times import EPOCH, day_of
from .fast import text_column
from .orders import validate

STORED = ORDERS.column_names  # the warehouse row of orders, in order


def orders_rules(spec: TableSpec) -> bool:
    """Whether ``spec`` is the chapter's ``orders`` table (its name, key, cursor and
    columns as :data:`~pipeline_assets.core.table.orders.ORDERS` declares them): its rows keep the
    rules and messages of :func:`.orders.validate` (``order 105: …``; a blank ``status`` is
    "missing"), which its warehouse, day files and tests were built on. Any other declaration takes
    the rules of its column types alone."""
    return spec is ORDERS or (
        spec.name == ORDERS.name
        and spec.primary_key == ORDERS.primary_key
        and spec.cursor == ORDERS.cursor
        and spec.columns == ORDERS.columns
    )


def fast_status(values) -> tuple[pa.Array, pa.Array]:
    """(status, ok) of orders' ``status`` column on the fast path: a blank status is
    missing (:func:`.orders.validate`), so it is left to the exact parser."""
    stored = text_column(values, "status")
    return stored, pc.fill_null(pc.not_equal(pc.utf8_trim_whitespace(stored), ""), False)


def parse_orders(raw, tz: tzinfo, schema: pa.Schema) -> pa.Table:
    """The exact parser of ``orders``, row by row (:func:`.orders.validate`), into
    ``schema`` (its NORMAL table)."""
    cols = {name: raw.column(name).to_pylist() for name in STORED}
    out = {name: [] for name in schema.names}
    for order_id, status, amount, updated_at in zip(
        cols["order_id"], cols["status"], cols["amount"], cols["updated_at"], strict=True
    ):
        order = validate(order_id, status, amount, updated_at, tz)
        for name, value in zip(STORED, order.stored, strict=True):
            out[name].append(value)
        out[working.INSTANT].append(order.updated_at)
        out[working.DAY].append((day_of(order.updated_at, tz) - EPOCH).days)
    return pa.table(out, schema=schema)


def orders_tie(first: dict, second: dict) -> InvalidRowError:
    """Two rows of one order with one ``updated_at`` and different values, as
    ``orders`` has always named them."""
    return InvalidRowError(
        first["order_id"],
        "updated_at",
        first["updated_at"],
        "the source holds two rows of this order with this updated_at and different "
        f"values ({first['status']} {first['amount']} and {second['status']} "
        f"{second['amount']}), so neither can win; keep one",
    )
