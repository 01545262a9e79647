"""The declaration each batch was written with (``core/warehouse/declaration.py``), and the refusal
of a changed key or change stamp, on a SQLite and a PostgreSQL warehouse.

Each batch row carries the fingerprint of its declaration; ``pipeline_declarations``
holds one row per distinct declaration of a table, written in the batch's transaction.
A load whose ``primary_key`` or ``cursor`` differ from the latest recorded declaration's
is refused before it reads or writes anything, a dry run too; other changes (a column
added) only record a new declaration.
"""

from __future__ import annotations

import copy
import hashlib
import json

import pytest
import sqlalchemy as sa

from pipeline_assets import demo
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.db.schema import warehouse_table
from pipeline_assets.core.db.state import batches, declarations, watermark_state
from pipeline_assets.core.errors import DeclarationChanged
from pipeline_assets.core.load.batch import load_table
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.table.orders import ORDERS_ATTRIBUTES
from pipeline_assets.core.times import UTC, canonical
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets.core.warehouse.declaration import (
    declaration_of_batch,
    fingerprint,
    latest,
    stable_json,
)

from .conftest import NOW
from .support import database_urls
from .tables import PAYMENTS, PAYMENTS_ATTRIBUTES, make_payments, put_payments

ROWS = [  # payment_id, attempt, status, cents, fee, rate, note, refundable, settle_on, stamp
    (7, 9, "failed", 1999, "0.00", None, None, False, None, "2026-01-20 09:00:00"),
    (7, 10, "captured", 1999, "1.10", 0.5, "Grüße", True, "2026-01-21", "2026-01-20 10:00:00"),
]
LATER = (8, 1, "captured", 500, "0.05", None, "later", True, None, "2026-01-21 08:00:00")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def engines(request, tmp_path):
    """(source, warehouse) with the app's payments in the source, on one backend."""
    urls = database_urls(request.param, tmp_path, request)
    source = make_engine(urls["source"], role="app")
    warehouse = make_engine(urls["warehouse"], role="warehouse")
    make_payments(source, rows=ROWS)
    yield source, warehouse
    source.dispose()
    warehouse.dispose()


def run(engines, spec=PAYMENTS, **kw):
    source, warehouse = engines
    return load_table(source, warehouse, spec=spec, tz=UTC, lookback_days=2, now=NOW, **kw)


def redeclared(base: dict = PAYMENTS_ATTRIBUTES, **changes):
    attributes = copy.deepcopy(base)
    attributes.update(changes)
    return declare(attributes)


def recorded(warehouse) -> list[tuple]:
    d = declarations.c
    with warehouse.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sa.select(d.table_name, d.fingerprint, d.declaration, d.first_batch_id).order_by(
                    d.recorded_at, d.first_batch_id
                )
            )
        ]


def ledger(warehouse) -> dict[str, str | None]:
    with warehouse.connect() as conn:
        return dict(conn.execute(sa.select(batches.c.batch_id, batches.c.declaration)).all())


def test_the_fingerprint_is_the_hash_of_a_stable_json():
    text = stable_json(PAYMENTS)
    assert fingerprint(PAYMENTS) == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    described = json.loads(text)
    assert list(described) == sorted(described)
    assert described["primary_key"] == ["payment_id", "attempt"]
    assert described["columns"]["fee"] == {"type": "decimal(10,2)", "nullable": False}
    assert described["columns"]["note"] == {"type": "text", "nullable": True}
    assert described["daily_files"]["captured_payments"]["where"] == {"status": ["captured"]}
    # what is not about stored rows (sources, lookback, totals) changes nothing; the
    # order columns are listed in changes nothing; a key's column order does
    columns = dict(reversed(list(PAYMENTS_ATTRIBUTES["columns"].items())))
    assert fingerprint(redeclared(columns=columns, lookback_days=9, source_url="x")) == (
        fingerprint(PAYMENTS)
    )
    key = fingerprint(redeclared(primary_key=["attempt", "payment_id"]))
    assert key != fingerprint(PAYMENTS)


def test_the_first_batch_records_its_declaration_and_the_next_adds_none(engines):
    first = run(engines)
    put_payments(engines[0], [LATER])
    second = run(engines)

    fp = fingerprint(PAYMENTS)
    assert recorded(engines[1]) == [("payments", fp, stable_json(PAYMENTS), first.batch_id)]
    assert ledger(engines[1]) == {first.batch_id: fp, second.batch_id: fp}
    with engines[1].connect() as conn:
        assert conn.execute(sa.select(declarations.c.recorded_at)).scalar() == canonical(NOW)
        of_second = declaration_of_batch(conn, second.batch_id, PAYMENTS)
    assert of_second.fingerprint == fp and of_second.first_batch_id == first.batch_id
    assert of_second.primary_key == PAYMENTS.primary_key


def test_a_nullable_column_added_records_a_new_declaration_and_loads(engines):
    first = run(engines)
    added = redeclared(
        columns={
            **PAYMENTS_ATTRIBUTES["columns"],
            "legacy_code": {"type": "text", "nullable": True},
        }
    )
    # the warehouse column itself is another task's (schema changes); added here by hand
    with engines[1].begin() as conn:
        conn.exec_driver_sql("ALTER TABLE payments ADD COLUMN legacy_code TEXT")
    put_payments(engines[0], [LATER])

    second = run(engines, spec=added)

    assert second.inserted == 1 and not second.skipped
    assert recorded(engines[1]) == [
        ("payments", fingerprint(PAYMENTS), stable_json(PAYMENTS), first.batch_id),
        ("payments", fingerprint(added), stable_json(added), second.batch_id),
    ]
    assert ledger(engines[1])[second.batch_id] == fingerprint(added)
    with engines[1].connect() as conn:
        assert latest(conn, PAYMENTS).fingerprint == fingerprint(added)
        codes = conn.execute(sa.select(warehouse_table(added).c.legacy_code)).scalars().all()
    assert set(codes) == {"x"}


def everything(warehouse) -> dict[str, list]:
    """Every row of the payments table and of the state tables, the lock holder included."""
    with warehouse.connect() as conn:
        return {
            t.name: sorted(map(tuple, conn.execute(sa.select(t))), key=repr)
            for t in (warehouse_table(PAYMENTS), batches, declarations, watermark_state)
        } | {"history": wm.history(warehouse, spec=PAYMENTS)}


@pytest.mark.parametrize(
    "changed, attribute, stored, declared",
    [
        (
            # settle_on required, so it may be the change stamp
            {
                "cursor": "settle_on",
                "columns": {**PAYMENTS_ATTRIBUTES["columns"], "settle_on": "date"},
            },
            "cursor",
            "modified_at",
            "settle_on",
        ),
        ({"primary_key": ["payment_id"]}, "primary_key", "[payment_id, attempt]", "[payment_id]"),
    ],
    ids=["cursor", "primary_key"],
)
def test_a_changed_key_or_cursor_is_refused_and_writes_nothing(
    engines, changed, attribute, stored, declared
):
    run(engines)
    put_payments(engines[0], [LATER])  # a load would have something to write
    before = everything(engines[1])
    spec = redeclared(**changed)

    for dry_run in (True, False):
        with pytest.raises(DeclarationChanged) as refused:
            run(engines, spec=spec, dry_run=dry_run)
        assert everything(engines[1]) == before

    error = refused.value
    assert (error.table, error.attribute) == ("payments", attribute) and not error.retryable
    message = str(error)
    assert f"{attribute} is {declared} in the declaration but {stored} in what is stored" in (
        message
    )
    for words in ("table payments", "nothing was written", "a new name", "load it", "retire"):
        assert words in message
    assert "drop the table payments" in message and "pipeline_declarations" in message
    # the declaration as it was still loads
    assert run(engines).inserted == 1


def test_orders_batches_from_before_the_record_count_as_orders_declaration(engines):
    source, warehouse = engines
    demo.init(source)  # the chapter's orders, beside the payments
    loaded = run(engines, spec=ORDERS)
    with warehouse.begin() as conn:  # as the release before declarations left them
        conn.execute(batches.update().values(declaration=None, table_name=None))
        conn.execute(declarations.delete())
    with warehouse.connect() as conn:
        assert declaration_of_batch(conn, loaded.batch_id, spec=ORDERS).fingerprint == fingerprint(
            ORDERS
        )
        assert latest(conn, ORDERS).first_batch_id is None

    keyed = redeclared(ORDERS_ATTRIBUTES, primary_key=["order_id", "status"])
    with pytest.raises(DeclarationChanged, match=r"primary_key is \[order_id, status\]"):
        run(engines, spec=keyed)
    assert recorded(warehouse) == []
