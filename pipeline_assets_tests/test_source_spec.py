"""The one reader of the source, for any declared table (issue 23).

``orders`` keeps its SQL byte for byte (the plans the benchmarks measured depend on it:
``+updated_at``, ``+orders.order_id``); the strings pinned below were produced by the
reader before it took a declaration. ``payments`` (composite key, every type, NULLs,
Unicode) is read from real SQLite, PostgreSQL and MariaDB sources, and a table with a
mixed-case, reserved-word name and columns proves the quoting.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.errors import DatabaseError
from pipeline_assets.core.source import scan as source
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.table.declare import declare

from .tables import PAYMENTS, PAYMENTS_ATTRIBUTES, make_payments

BERLIN = ZoneInfo("Europe/Berlin")
UTC = timezone.utc
S, E = datetime(2026, 1, 20, tzinfo=UTC), datetime(2026, 1, 27, 6, tzinfo=UTC)


# --- orders: today's SQL, pinned ----------------------------------------------------------


def _orders(key_type, updated_type, kind) -> source.SourceTable:
    table = sa.Table(
        "orders",
        sa.MetaData(),
        sa.Column("order_id", key_type),
        sa.Column("status", sa.Text()),
        sa.Column("amount", sa.Numeric(12, 2)),
        sa.Column("updated_at", updated_type),
    )
    return source.SourceTable(table, kind, spec=ORDERS)


_SQLITE_COLUMNS = (
    "SELECT CAST(order_id AS TEXT) AS order_id, CAST(status AS TEXT) AS status, "
    "CAST(amount AS TEXT) AS amount, CAST(updated_at AS TEXT) AS updated_at "
    "FROM orders"
)
PINNED = [  # (dialect, key type, updated_at type, kind, tz, start, end, by_index, SQL)
    (
        "sqlite",
        sa.Integer(),
        sa.Text(),
        "text",
        BERLIN,
        S,
        E,
        False,
        _SQLITE_COLUMNS + " WHERE +updated_at >= '2026-01-19' AND +updated_at < '2026-01-29' "
        "ORDER BY orders.order_id",
    ),
    (
        "sqlite",
        sa.Integer(),
        sa.Text(),
        "text",
        BERLIN,
        S,
        None,
        True,
        _SQLITE_COLUMNS + " WHERE updated_at >= '2026-01-19' ORDER BY +orders.order_id",
    ),
    (
        "sqlite",
        sa.Integer(),
        sa.Text(),
        "text",
        UTC,
        None,
        None,
        False,
        _SQLITE_COLUMNS + " ORDER BY orders.order_id",
    ),
    (
        "sqlite",
        sa.Text(),
        sa.Text(),
        "text",
        UTC,
        S,
        E,
        True,
        _SQLITE_COLUMNS + " WHERE updated_at >= '2026-01-19' AND updated_at < '2026-01-29' "
        "ORDER BY CAST(orders.order_id AS INTEGER), orders.order_id",
    ),
    (
        "postgresql",
        sa.Integer(),
        sa.DateTime(timezone=True),
        "timestamptz",
        BERLIN,
        S,
        E,
        False,
        "SELECT order_id, CAST(status AS TEXT) AS status, CAST(amount AS TEXT) AS amount, "
        "updated_at FROM orders WHERE updated_at >= '2026-01-20T00:00:00+00:00'::timestamptz "
        "AND updated_at < '2026-01-27T06:00:00+00:00'::timestamptz ORDER BY orders.order_id",
    ),
    (
        "postgresql",
        sa.Integer(),
        sa.DateTime(),
        "timestamp",
        BERLIN,
        S,
        E,
        False,
        "SELECT order_id, CAST(status AS TEXT) AS status, CAST(amount AS TEXT) AS amount, "
        "updated_at FROM orders WHERE updated_at >= '2026-01-19T01:00:00'::timestamp "
        "AND updated_at < '2026-01-28T07:00:00'::timestamp ORDER BY orders.order_id",
    ),
    (
        "postgresql",
        sa.Integer(),
        sa.Date(),
        "date",
        BERLIN,
        S,
        E,
        False,
        "SELECT order_id, CAST(status AS TEXT) AS status, CAST(amount AS TEXT) AS amount, "
        "updated_at FROM orders WHERE updated_at >= '2026-01-20'::date "
        "AND updated_at < '2026-01-28'::date ORDER BY orders.order_id",
    ),
    (
        "postgresql",
        sa.Text(),
        sa.Text(),
        "text",
        BERLIN,
        S,
        None,
        False,
        "SELECT CAST(order_id AS TEXT) AS order_id, CAST(status AS TEXT) AS status, "
        "CAST(amount AS TEXT) AS amount, CAST(updated_at AS TEXT) AS updated_at FROM orders "
        "WHERE updated_at >= '2026-01-19' ORDER BY CASE WHEN trim(CAST(orders.order_id AS TEXT)) "
        "~ '^-?[0-9]{1,18}$' THEN CAST(trim(CAST(orders.order_id AS TEXT)) AS BIGINT) END, "
        "orders.order_id",
    ),
    (
        "mysql",
        sa.Integer(),
        sa.TIMESTAMP(),
        "timestamptz",
        BERLIN,
        S,
        E,
        False,
        "SELECT order_id, CAST(status AS CHAR) AS status, CAST(amount AS CHAR) AS amount, "
        "CONCAT(CAST(updated_at AS CHAR), '+00:00') AS updated_at FROM orders "
        "WHERE updated_at >= '2026-01-20 00:00:00' AND updated_at < '2026-01-27 06:00:00' "
        "ORDER BY orders.order_id",
    ),
    (
        "mysql",
        sa.Integer(),
        sa.DateTime(),
        "timestamp",
        BERLIN,
        S,
        E,
        False,
        "SELECT order_id, CAST(status AS CHAR) AS status, CAST(amount AS CHAR) AS amount, "
        "CAST(updated_at AS CHAR) AS updated_at FROM orders "
        "WHERE updated_at >= '2026-01-19 01:00:00' AND updated_at < '2026-01-28 07:00:00' "
        "ORDER BY orders.order_id",
    ),
    (
        "mysql",
        sa.Text(),
        sa.Text(),
        "text",
        UTC,
        None,
        E,
        False,
        "SELECT CAST(order_id AS CHAR) AS order_id, CAST(status AS CHAR) AS status, "
        "CAST(amount AS CHAR) AS amount, CAST(updated_at AS CHAR) AS updated_at FROM orders "
        "WHERE updated_at < '2026-01-29' ORDER BY CAST(orders.order_id AS SIGNED), "
        "orders.order_id",
    ),
    (
        "mysql",
        sa.Integer(),
        sa.Date(),
        "date",
        BERLIN,
        S,
        E,
        False,
        "SELECT order_id, CAST(status AS CHAR) AS status, CAST(amount AS CHAR) AS amount, "
        "CAST(updated_at AS CHAR) AS updated_at FROM orders "
        "WHERE updated_at >= '2026-01-20' AND updated_at < '2026-01-28' ORDER BY orders.order_id",
    ),
]


@pytest.mark.parametrize("dialect, key, updated, kind, tz, start, end, by_index, sql", PINNED)
def test_orders_sql_is_byte_identical(dialect, key, updated, kind, tz, start, end, by_index, sql):
    src = _orders(key, updated, kind)
    assert source.scan_sql(src, dialect, tz, start, end, by_index=by_index) == sql
    where = sql.partition(" FROM orders")[2].partition(" ORDER BY ")[0]
    assert source.window_filter(src, dialect, tz, start, end) == where.replace(
        "+updated_at", "updated_at"
    )


@pytest.mark.parametrize(
    "dialect, key, sql",
    [
        ("sqlite", sa.Integer(), "SELECT CAST(order_id AS TEXT) AS order_id FROM orders"),
        ("postgresql", sa.Integer(), "SELECT order_id FROM orders"),
        ("postgresql", sa.Text(), "SELECT CAST(order_id AS TEXT) AS order_id FROM orders"),
        ("mysql", sa.Integer(), "SELECT order_id FROM orders"),
        ("mysql", sa.Text(), "SELECT CAST(order_id AS CHAR) AS order_id FROM orders"),
    ],
)
def test_orders_keys_sql_is_todays(dialect, key, sql):
    assert source.keys_sql(_orders(key, sa.Text(), "text"), dialect) == sql


def test_the_source_table_knows_its_cursor_kind():
    src = _orders(sa.Integer(), sa.Date(), "date")
    assert (src.cursor_kind, src.spec, src.undeclared) == (
        "date",
        ORDERS,
        [],
    )


# --- payments, and a table whose names need quoting: the SQL -------------------------------

# "Order" (mixed case), "user" (reserved on PostgreSQL), "select" (reserved everywhere),
# "Amount Due" (a space): a text key, sorted by code point whatever the collation.
QUOTED = declare(
    {
        "table": "Order",
        "primary_key": "user",
        "cursor": "select",
        "columns": {"user": "text", "select": "timestamp", "Amount Due": "decimal"},
    }
)
SHOP_PAYMENTS = declare({**PAYMENTS_ATTRIBUTES, "table": "shop.payments"})


def _reflected(spec, types: dict) -> source.SourceTable:
    table = sa.Table(
        spec.source_name,
        sa.MetaData(),
        *(sa.Column(c, types.get(c, sa.Text())) for c in spec.column_names),
    )
    kind = source._kind("postgresql", table.c[spec.cursor].type)
    return source.SourceTable(table, kind, spec)


def test_payments_sql_per_dialect():
    pg_types = {
        "payment_id": sa.BigInteger(),
        "attempt": sa.Integer(),
        "amount_cents": sa.BigInteger(),
        "fee": sa.Numeric(10, 2),
        "rate": sa.Float(),
        "refundable": sa.Boolean(),
        "settle_on": sa.Date(),
        "modified_at": sa.DateTime(timezone=True),
    }
    src = _reflected(SHOP_PAYMENTS, pg_types)
    assert source.scan_sql(src, "postgresql", UTC, S, E) == (
        "SELECT payment_id, attempt, CAST(status AS TEXT) AS status, amount_cents, "
        "CAST(fee AS TEXT) AS fee, CAST(rate AS TEXT) AS rate, CAST(note AS TEXT) AS note, "
        "refundable, settle_on, modified_at FROM shop.payments "
        "WHERE modified_at >= '2026-01-20T00:00:00+00:00'::timestamptz "
        "AND modified_at < '2026-01-27T06:00:00+00:00'::timestamptz "
        "ORDER BY shop.payments.payment_id, shop.payments.attempt"
    )
    assert source.keys_sql(src, "postgresql") == "SELECT payment_id, attempt FROM shop.payments"
    # SQLite: all text; the nullable columns with their NULL flags after the declared ones
    sqlite = source.SourceTable(src.table, "text", PAYMENTS)
    assert source.scan_sql(sqlite, "sqlite", UTC, S, None, by_index=True) == (
        "SELECT CAST(payment_id AS TEXT) AS payment_id, CAST(attempt AS TEXT) AS attempt, "
        "CAST(status AS TEXT) AS status, CAST(amount_cents AS TEXT) AS amount_cents, "
        "CAST(fee AS TEXT) AS fee, ifnull(CAST(rate AS TEXT), '') AS rate, "
        "ifnull(CAST(note AS TEXT), '') AS note, CAST(refundable AS TEXT) AS refundable, "
        "ifnull(CAST(settle_on AS TEXT), '') AS settle_on, "
        "CAST(modified_at AS TEXT) AS modified_at, rate IS NULL AS __pipeline_null_5, "
        "note IS NULL AS __pipeline_null_6, settle_on IS NULL AS __pipeline_null_8 "
        "FROM payments WHERE modified_at >= '2026-01-19' "
        "ORDER BY +payments.payment_id, +payments.attempt"
    )
    mysql_types = {**pg_types, "refundable": sa.SmallInteger(), "modified_at": sa.TIMESTAMP()}
    src = _reflected(PAYMENTS, mysql_types)
    mysql = source.SourceTable(src.table, "timestamptz", PAYMENTS)
    assert source.scan_sql(mysql, "mysql", UTC, None, E) == (
        "SELECT payment_id, attempt, CAST(status AS CHAR) AS status, amount_cents, "
        "CAST(fee AS CHAR) AS fee, CAST(rate AS CHAR) AS rate, CAST(note AS CHAR) AS note, "
        "CAST(refundable AS CHAR) AS refundable, CAST(settle_on AS CHAR) AS settle_on, "
        "CONCAT(CAST(modified_at AS CHAR), '+00:00') AS modified_at FROM payments "
        "WHERE modified_at < '2026-01-27 06:00:00' "
        "ORDER BY payments.payment_id, payments.attempt"
    )


def test_names_are_quoted_for_each_dialect():
    src = source.SourceTable(_reflected(QUOTED, {}).table, "text", QUOTED)
    assert source.scan_sql(src, "postgresql", UTC, S, None) == (
        'SELECT CAST("user" AS TEXT) AS "user", CAST("select" AS TEXT) AS "select", '
        'CAST("Amount Due" AS TEXT) AS "Amount Due" FROM "Order" '
        'WHERE "select" >= \'2026-01-19\' ORDER BY CAST("Order"."user" AS TEXT) '
        'COLLATE "C"'
    )
    assert source.scan_sql(src, "mysql", UTC, S, None) == (
        "SELECT CAST(user AS CHAR) AS user, CAST(`select` AS CHAR) AS `select`, "
        "CAST(`Amount Due` AS CHAR) AS `Amount Due` FROM `Order` "
        "WHERE `select` >= '2026-01-19' ORDER BY CAST(`Order`.user AS BINARY)"
    )
    assert source.scan_sql(src, "sqlite", UTC, S, None) == (
        'SELECT CAST(user AS TEXT) AS user, CAST("select" AS TEXT) AS "select", '
        'CAST("Amount Due" AS TEXT) AS "Amount Due" FROM "Order" '
        'WHERE +"select" >= \'2026-01-19\' ORDER BY "Order".user COLLATE BINARY'
    )
    assert source.window_filter(src, "sqlite", UTC, None, E) == " WHERE \"select\" < '2026-01-29'"


# --- payments on real sources ----------------------------------------------------------------

# (payment_id, attempt, status, amount_cents, fee, rate, note, refundable, settle_on,
#  modified_at in UTC). Inserted out of key order; the last two are outside [S, E) on
# every backend (SQLite's text bound is a day wider below and two above).
PAYMENT_ROWS = [
    (12, 1, "captured", 250000, "12345678.99", 2.5, "", True, "2026-01-22", "2026-01-22 23:59:59"),
    (
        7,
        10,
        "captured",
        1999,
        "1.10",
        0.1 + 0.2,
        "Grüße ☕ 𝄞",
        True,
        "2026-01-21",
        "2026-01-20 10:00:00",
    ),
    (
        3,
        1,
        "refunded",
        -500,
        "-0.50",
        -1e-07,
        "naïve 'quoted' \"twice\"",
        False,
        None,
        "2026-01-21 12:00:00",
    ),
    (7, 9, "failed", 1999, "0.00", None, None, False, None, "2026-01-20 09:00:00"),
    (5, 1, "captured", 100, "1.00", 1.0, "old", True, "2026-01-10", "2026-01-10 08:00:00"),
    (6, 2, "captured", 100, "1.00", 1.0, "new", True, "2026-01-30", "2026-01-30 08:00:00"),
]
IN_WINDOW = [(3, 1), (7, 9), (7, 10), (12, 1)]  # key order: 12 after 7, 10 after 9


def _engine(backend: str, request, tmp_path):
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'app.db'}"
    elif backend == "postgresql":
        url = request.getfixturevalue("postgres").url("source")
    else:
        url = request.getfixturevalue("mysql").url("source")
    return make_engine(url, role="app")


def _raw(engine, src, start=S, end=E, batch_rows=source.SCAN_BATCH) -> list[dict]:
    batches = list(source.scan_window(engine, src, UTC, start, end, batch_rows))
    assert all(b.schema.names == list(src.spec.column_names) for b in batches)
    return [row for b in batches for row in b.to_pylist()]


def _parsed(spec, rows: list[dict]) -> list[dict]:
    """The raw rows read by the declared types' own parser: one answer whatever the
    database, which is what every backend's raw spelling must come to."""
    return [
        {
            c.name: None if row[c.name] is None else c.type.parse(row[c.name], UTC)
            for c in spec.columns
        }
        for row in rows
    ]


def _expected_parsed() -> list[dict]:
    by_key = {(r[0], r[1]): r for r in PAYMENT_ROWS}
    out = []
    for key in IN_WINDOW:
        values = dict(zip(PAYMENTS.column_names, by_key[key], strict=True))
        values["modified_at"] = values["modified_at"].replace(" ", "T") + "+00:00"
        out.append(
            {
                c.name: None if values[c.name] is None else c.type.parse(values[c.name], UTC)
                for c in PAYMENTS.columns
            }
        )
    return out


def _raw_spelling(backend: str, rows: list[dict]) -> list[tuple]:
    """What each backend hands over for the columns whose spelling is its own."""
    return [(r["fee"], r["refundable"], r["settle_on"], r["modified_at"]) for r in rows]


RAW = {  # fee, refundable, settle_on, modified_at of the rows IN_WINDOW, per backend
    "sqlite": [
        ("-0.5", "0", None, "2026-01-21T12:00:00+00:00"),
        ("0", "0", None, "2026-01-20T09:00:00+00:00"),
        ("1.1", "1", "2026-01-21", "2026-01-20T10:00:00+00:00"),
        ("12345678.99", "1", "2026-01-22", "2026-01-22T23:59:59+00:00"),
    ],
    "postgresql": [
        ("-0.50", False, None, datetime(2026, 1, 21, 12, tzinfo=UTC)),
        ("0.00", False, None, datetime(2026, 1, 20, 9, tzinfo=UTC)),
        ("1.10", True, date(2026, 1, 21), datetime(2026, 1, 20, 10, tzinfo=UTC)),
        ("12345678.99", True, date(2026, 1, 22), datetime(2026, 1, 22, 23, 59, 59, tzinfo=UTC)),
    ],
    "mysql": [
        ("-0.50", "0", None, "2026-01-21 12:00:00+00:00"),
        ("0.00", "0", None, "2026-01-20 09:00:00+00:00"),
        ("1.10", "1", "2026-01-21", "2026-01-20 10:00:00+00:00"),
        ("12345678.99", "1", "2026-01-22", "2026-01-22 23:59:59+00:00"),
    ],
}
BACKENDS = [
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_window_of_payments_read_raw(backend, request, tmp_path):
    """Every type, NULLs (and '' beside NULL), Unicode beyond the BMP, a composite key in
    numeric order; PostgreSQL's table in a schema of its own (shop.payments)."""
    spec = SHOP_PAYMENTS if backend == "postgresql" else PAYMENTS
    engine = _engine(backend, request, tmp_path)
    try:
        make_payments(engine, backend, spec.table, rows=PAYMENT_ROWS)
        src = source.inspect_source(engine, spec)
        assert src.undeclared == ["legacy_code"]
        assert (
            src.cursor_kind
            == {"sqlite": "text", "postgresql": "timestamptz", "mysql": "timestamptz"}[backend]
        )
        rows = _raw(engine, src)
        assert [(r["payment_id"], r["attempt"]) for r in rows] == [
            tuple(map(_as_raw_int[backend], k)) for k in IN_WINDOW
        ]
        assert [r["note"] for r in rows] == ["naïve 'quoted' \"twice\"", None, "Grüße ☕ 𝄞", ""]
        assert [r["status"] for r in rows] == ["refunded", "failed", "captured", "captured"]
        assert _raw_spelling(backend, rows) == RAW[backend]
        assert _parsed(spec, rows) == _expected_parsed()
        assert rows[1]["rate"] is None and rows[3]["settle_on"] is not None
        # the whole table, unbounded: all six rows, in key order
        everything = _raw(engine, src, None, None)
        assert [(int(r["payment_id"]), int(r["attempt"])) for r in everything] == [
            (3, 1),
            (5, 1),
            (6, 2),
            (7, 9),
            (7, 10),
            (12, 1),
        ]
        keys = list(source.scan_keys(engine, src))
        assert all(k.schema.names == ["payment_id", "attempt"] for k in keys)
        assert sorted(
            (p, a)
            for k in keys
            for p, a in zip(k["payment_id"].to_pylist(), k["attempt"].to_pylist(), strict=True)
        ) == [(3, 1), (5, 1), (6, 2), (7, 9), (7, 10), (12, 1)]
    finally:
        engine.dispose()


_as_raw_int = {"sqlite": str, "postgresql": int, "mysql": int}


def test_sqlite_nullable_columns_null_for_a_whole_first_batch(tmp_path):
    """SQLite's Arrow reader types a column by its first batch: one NULL throughout it
    (a column the app added later, NULL in its old rows) must not fail the next batch."""
    engine = make_engine(f"sqlite:///{tmp_path / 'app.db'}", role="app")
    rows = [
        (i, 1, "captured", i, "1.00", None, None, True, None, f"2026-01-21 0{i % 10}:00:00")
        for i in range(1, 7)
    ]
    rows += [
        (i, 1, "captured", i, "1.00", 0.25, "té", False, "2026-01-22", "2026-01-21 10:00:00")
        for i in range(7, 10)
    ]
    try:
        make_payments(engine, "sqlite", rows=rows)
        src = source.inspect_source(engine, PAYMENTS)
        got = _raw(engine, src, batch_rows=2)
        assert [r["payment_id"] for r in got] == [str(i) for i in range(1, 10)]
        assert [(r["rate"], r["note"], r["settle_on"]) for r in got] == [(None, None, None)] * 6 + [
            ("0.25", "té", "2026-01-22")
        ] * 3
    finally:
        engine.dispose()


QUOTED_DDL = {
    "sqlite": 'CREATE TABLE "Order" ("user" TEXT COLLATE NOCASE NOT NULL, '
    '"select" TEXT NOT NULL, "Amount Due" TEXT NOT NULL)',
    "postgresql": 'CREATE TABLE "Order" ("user" TEXT {collate} NOT NULL, '
    '"select" TIMESTAMPTZ NOT NULL, "Amount Due" NUMERIC(12,2) NOT NULL)',
    "mysql": "CREATE TABLE `Order` (`user` VARCHAR(20) NOT NULL, `select` DATETIME NOT NULL, "
    "`Amount Due` DECIMAL(12,2) NOT NULL) CHARACTER SET utf8mb4",
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_quoted_names_and_a_text_key_in_code_point_order(backend, request, tmp_path):
    """A mixed-case table, reserved-word columns, a space in a name; a text key sorted
    by code point, never by the column's collation (SQLite's NOCASE, PostgreSQL's ICU
    root collation, MariaDB's case-insensitive utf8mb4_general_ci all sort a before Z),
    with both copies of 'b' adjacent."""
    engine = _engine(backend, request, tmp_path)
    keys = ["b", "é", "Z", "a", "ä", "b", "A"]
    try:
        with engine.begin() as conn:
            icu = (
                backend == "postgresql"
                and conn.exec_driver_sql(
                    "SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu'"
                ).first()
            )
            conn.exec_driver_sql(
                QUOTED_DDL[backend].format(collate='COLLATE "und-x-icu"' if icu else "")
            )
            table = sa.table(
                "Order", sa.column("user"), sa.column("select"), sa.column("Amount Due")
            )
            conn.execute(
                sa.insert(table),
                [
                    {"user": k, "select": f"2026-01-2{i % 3} 10:00:00", "Amount Due": f"{i}.50"}
                    for i, k in enumerate(keys)
                ],
            )
        src = source.inspect_source(engine, QUOTED)
        rows = _raw(engine, src)
        assert [r["user"] for r in rows] == ["A", "Z", "a", "b", "b", "ä", "é"]
        assert sorted(r["Amount Due"] for r in rows) == [f"{i}.50" for i in range(7)]
    finally:
        engine.dispose()


# --- refusals --------------------------------------------------------------------------------


def test_a_missing_declared_column_is_named(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'app.db'}", role="app")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "CREATE TABLE payments (payment_id INTEGER, attempt INTEGER, status TEXT, "
                "amount_cents INTEGER, rate REAL, note TEXT, refundable BOOLEAN, "
                "modified_at TEXT, Extra TEXT, zzz TEXT)"
            )
        with pytest.raises(DatabaseError) as caught:
            source.inspect_source(engine, PAYMENTS)
        assert str(caught.value) == (
            f"the source table payments in sqlite:///{tmp_path / 'app.db'} lacks column(s) "
            "fee, settle_on; it needs payment_id, attempt, status, amount_cents, fee, rate, "
            "note, refundable, settle_on, modified_at. Correct the declaration's columns (a "
            "column's name is the source's, case included), or add the column to the source "
            "table"
        )
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE payments ADD COLUMN fee TEXT")
            conn.exec_driver_sql("ALTER TABLE payments ADD COLUMN settle_on TEXT")
        src = source.inspect_source(engine, PAYMENTS)
        assert src.undeclared == ["Extra", "zzz"]
        assert list(source.scan_window(engine, src, UTC, S, E)) == [] or all(
            b.num_rows == 0 for b in source.scan_window(engine, src, UTC, S, E)
        )
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_missing_table_is_named(backend, request, tmp_path):
    engine = _engine(backend, request, tmp_path)
    try:
        for spec in (PAYMENTS, SHOP_PAYMENTS):
            with pytest.raises(
                DatabaseError,
                match=rf"has no table '{spec.table}' "
                r"\(declared as the table of payments\)",
            ):
                source.inspect_source(engine, spec)
        with pytest.raises(DatabaseError, match="has no table 'orders': create the demo"):
            source.inspect_source(engine, spec=ORDERS)
    finally:
        engine.dispose()
