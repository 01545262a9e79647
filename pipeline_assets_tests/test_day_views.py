"""Day files of any declared table: one builder of the bytes per path, and the per-day view.

- ``serialize_day`` (rows of Python values) and ``DayFileHashes`` (Arrow tables of stored
  rows) give the same bytes for every row either accepts, for ``orders``, ``payments``
  (composite key, every type, NULLs, Unicode text) and a table with a text and a date key,
  floats and a NULL-matching filter; a property test holds them together.
- ``day_rows`` reads a declared table's view from a real warehouse (a SQLite file, and
  PostgreSQL), sorted by code point whatever the database's collation, and its totals
  are exact.
"""

from __future__ import annotations

import math
import random
from datetime import date, datetime, timedelta
from decimal import Decimal

import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline_assets.core.daily_files import DayFileHashes, DayFilesError, serialize_day
from pipeline_assets.core.daily_files.serialize import sha256_hex
from pipeline_assets.core.daily_files.views import day_rows, day_totals, json_reader, store_totals
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table import ORDERS, working
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.table.spec import TableSpec
from pipeline_assets.core.times import EPOCH, UTC, day_of, zone

from .tables import PAYMENTS

# A table with a text and a date key, a float and every other type in its file, a column
# named by a SQL keyword and one by a non-ASCII name, and a filter that matches NULL.
MIXED: TableSpec = declare(
    {
        "table": "shop.mixed",
        "name": "mixed",
        "primary_key": ["code", "on"],
        "cursor": "at",
        "columns": {
            "code": "text",
            "on": "date",
            "n": {"type": "integer", "nullable": True},
            "x": {"type": "float", "nullable": True},
            "d": "decimal",
            "d2": {"type": "decimal(6,3)", "nullable": True},
            "b": {"type": "boolean", "nullable": True},
            "at": "timestamp",
            "grüße": {"type": "text", "nullable": True},
        },
        "daily_files": [
            {
                "name": "mixed_days",
                "where": {"b": [True, None]},
                "totals": {"name": "mixed_totals", "sum": ["n", "x", "d", "d2"]},
            }
        ],
    }
)
# A date change stamp: a row's day is its date, in every zone.
BOOKINGS: TableSpec = declare(
    {
        "table": "bookings",
        "primary_key": "id",
        "cursor": "booked_on",
        "columns": {"id": "integer", "booked_on": "date", "what": "text"},
        "daily_files": [{"name": "booked"}],
    }
)
SPECS = {"orders": ORDERS, "payments": PAYMENTS, "mixed": MIXED}
ZONES = ["UTC", "Europe/Berlin", "America/St_Johns", "Australia/Lord_Howe"]
ARROW = {
    "integer": pa.int64(),
    "text": pa.string(),
    "decimal": pa.string(),
    "float": pa.float64(),
    "boolean": pa.bool_(),
    "date": pa.string(),
    "timestamp": pa.string(),
}
DAY = "2026-01-25"


# --- strategies: a declared table's rows, as parsed values ---------------------------------

TEXT = st.one_of(
    st.text(max_size=6), st.text(alphabet='ab"\\\x00\x1f\x7f \u00e9\u2028\U0001f600~', max_size=6)
)
NEAR = st.datetimes(
    min_value=datetime(2026, 3, 27), max_value=datetime(2026, 3, 31), timezones=st.just(UTC)
)
WIDE = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


def _values(column):
    kind = column.type
    if kind.kind == "integer":
        base = st.integers(-(2**63), 2**63 - 1)
    elif kind.kind == "text":
        base = TEXT
    elif kind.kind == "decimal" and kind.scale is None:
        base = st.integers(0, 6).flatmap(
            lambda places: st.decimals(min_value=-(10**20), max_value=10**20, places=places)
        )
    elif kind.kind == "decimal":
        top = Decimal(10) ** (kind.precision - kind.scale) - Decimal(1).scaleb(-kind.scale)
        base = st.decimals(min_value=-top, max_value=top, places=kind.scale)
    elif kind.kind == "float":
        base = st.floats(allow_nan=False, allow_infinity=False)
    elif kind.kind == "boolean":
        base = st.booleans()
    elif kind.kind == "date":
        base = st.dates()
    else:
        base = st.one_of(NEAR, NEAR, WIDE)
    return st.one_of(st.none(), base) if column.nullable else base


def rows_of(spec: TableSpec, **override):
    row = st.fixed_dictionaries({c.name: override.get(c.name, _values(c)) for c in spec.columns})
    return st.lists(row, max_size=30, unique_by=lambda r: tuple(r[k] for k in spec.primary_key))


OVERRIDES = {
    "orders": {
        "status": st.sampled_from(["paid", "paid", "pending"]),
        "order_id": st.integers(1, 10**6),
    },
    "payments": {
        "status": st.sampled_from(["captured", "captured", "failed"]),
        "payment_id": st.integers(0, 5),
        "attempt": st.integers(0, 5),
    },
    "mixed": {
        "code": st.one_of(st.sampled_from(["a", "B", "_", "é", "Z", "a b"]), TEXT),
        "on": st.dates(min_value=date(2026, 1, 1), max_value=date(2026, 1, 3)),
    },
}


# --- the two builders ------------------------------------------------------------------------


def day_number(spec: TableSpec, stored_cursor, tz) -> int:
    kind = spec.column(spec.cursor).type
    if kind.kind == "date":
        return (date.fromisoformat(stored_cursor) - EPOCH).days
    return (day_of(kind.from_stored(stored_cursor, tz), tz) - EPOCH).days


def python_files(
    spec: TableSpec, stored: list[dict], days: list[int], tz
) -> dict[int, bytes | DayFilesError]:
    """Each day's bytes by the writer's path: the view's JSON forms, ``serialize_day``."""
    files = spec.daily_files[0]
    readers = {n: json_reader(spec.column(n).type, tz) for n in files.columns}
    out = {}
    for number in days:
        picked = [
            {n: readers[n](r[n]) for n in files.columns}
            for r in stored
            if day_number(spec, r[spec.cursor], tz) == number
            and all(
                r[c] in [spec.column(c).type.stored(v) for v in allowed]
                for c, allowed in files.where
            )
        ]
        day = (EPOCH + timedelta(days=number)).isoformat()
        try:
            out[number] = serialize_day(day, picked, spec, files)
        except DayFilesError as exc:
            out[number] = exc
    return out


def arrow_hashes(
    spec: TableSpec,
    stored: list[dict],
    days: list[int],
    tz,
    cuts: int,
    arrow_types: dict | None = None,
) -> dict[int, tuple[int, str]]:
    """Each day's hash by verify's path: stored rows in key order, in batches."""
    hashes = DayFileHashes(days, tz, spec, spec.daily_files[0])
    for table in stored_tables(spec, stored, tz, cuts, arrow_types):
        hashes.add(table)
    return hashes.result()


def stored_tables(spec: TableSpec, stored: list[dict], tz, cuts: int, arrow_types=None):
    """Stored rows as the warehouse's reader gives them: Arrow tables with each row's
    day, in key order, cut into batches at ``cuts`` random places."""

    def sort_key(row):
        return tuple(row[k] for k in spec.primary_key)  # stored keys sort as they compare

    ordered = sorted(stored, key=sort_key)
    rnd = random.Random(cuts)
    edges = sorted({0, len(ordered), *(rnd.randrange(len(ordered) + 1) for _ in range(cuts))})
    types = {c.name: (arrow_types or {}).get(c.name, ARROW[c.type.kind]) for c in spec.columns}
    for start, end in zip(edges, edges[1:], strict=False):
        part = ordered[start:end]
        columns = {
            c.name: pa.array([r[c.name] for r in part], types[c.name])
            for c in reversed(spec.columns)
        }  # the table's column order is no matter
        columns[working.DAY] = pa.array(
            [day_number(spec, r[spec.cursor], tz) for r in part], pa.int32()
        )
        yield pa.table(columns)


def stored_rows(spec: TableSpec, rows: list[dict]) -> list[dict]:
    return [{c.name: c.type.stored(r[c.name]) for c in spec.columns} for r in rows]


def days_of_rows(spec: TableSpec, stored: list[dict], tz) -> list[int]:
    days = {day_number(spec, r[spec.cursor], tz) for r in stored}
    return sorted(days | {(date(2026, 1, 25) - EPOCH).days})  # and a day without rows


@pytest.mark.parametrize("name", sorted(SPECS))
@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_both_builders_give_the_same_bytes(name, data):
    """For any rows as a load stores them, any zone and any batching, Arrow's hash of
    each day is the sha256 of exactly the bytes ``serialize_day`` writes from the view's
    rows, and it vouches for every day (text that needs escaping included)."""
    spec = SPECS[name]
    tz = zone(data.draw(st.sampled_from(ZONES), label="zone"))
    stored = stored_rows(spec, data.draw(rows_of(spec, **OVERRIDES[name]), label="rows"))
    days = days_of_rows(spec, stored, tz)
    expected = python_files(spec, stored, days, tz)
    assert not [v for v in expected.values() if isinstance(v, Exception)]
    found = arrow_hashes(spec, stored, days, tz, data.draw(st.integers(0, 4), label="cuts"))
    assert found == {day: (len(_loads(blob)), sha256_hex(blob)) for day, blob in expected.items()}


def _loads(blob: bytes) -> list:
    import json

    return json.loads(blob)


ODD_FEES = [
    "1.10",
    "1.1",
    "+1.00",
    "1.234",
    "007.00",
    "-0.00",
    "99999999.99",
    "100000000.00",
    "1e3",
    "٣.00",
]
ODD_DAYS = [None, "2026-02-28", "2026-02-30", "0000-01-01", "2026-2-1", "0001-01-01", "2024-02-29"]


@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_a_day_arrow_cannot_vouch_for_is_left_to_the_writer(data):
    """Stored values a load would never write (a fee without its two places, a day 30 of
    February, a boolean 2): Arrow vouches only for days whose bytes it builds exactly as
    ``serialize_day`` does, and never for a day ``serialize_day`` refuses."""
    spec = PAYMENTS
    tz = zone(data.draw(st.sampled_from(ZONES), label="zone"))
    rows = data.draw(rows_of(spec, **OVERRIDES["payments"]), label="rows")
    stored = stored_rows(spec, rows)
    for row in stored:
        row["fee"] = data.draw(st.sampled_from(ODD_FEES))
        row["settle_on"] = data.draw(st.sampled_from(ODD_DAYS))
        row["refundable"] = data.draw(st.sampled_from([0, 1, 1, 2]))
    days = days_of_rows(spec, stored, tz)
    expected = python_files(spec, stored, days, tz)
    found = arrow_hashes(
        spec, stored, days, tz, data.draw(st.integers(0, 3)), arrow_types={"refundable": pa.int64()}
    )
    for day, blob in expected.items():
        if isinstance(blob, Exception):
            assert day not in found
        elif day in found:
            assert found[day] == (len(_loads(blob)), sha256_hex(blob))
    if (
        all(f in ("1.10", "-0.00", "99999999.99") for f in (r["fee"] for r in stored))
        and all(
            d in (None, "2026-02-28", "0001-01-01", "2024-02-29")
            for d in (r["settle_on"] for r in stored)
        )
        and all(r["refundable"] in (0, 1) for r in stored)
    ):
        assert set(found) == set(days)  # nothing odd: every day vouched for


# --- serialize_day of a declared table: the exact bytes, and what it refuses ----------------


def payment(payment_id=1, attempt=1, **values):
    row = {
        "payment_id": payment_id,
        "attempt": attempt,
        "amount_cents": 500,
        "fee": "0.30",
        "note": None,
        "refundable": False,
        "settle_on": None,
        "modified_at": "2026-01-25T00:30:00+01:00",
    }
    return {**row, **values}


def test_a_payments_day_file_is_sorted_by_its_composite_key_and_exact():
    rows = [
        payment(
            10,
            1,
            amount_cents=-7,
            fee=Decimal("12"),
            note='naïve "q" \U0001f600',
            refundable=True,
            settle_on=date(2026, 4, 1),
            modified_at=datetime.fromisoformat("2026-01-25T03:30:00.000123+01:00"),
        ),
        payment(1, 2, fee="0.3"),
        payment(2, 1, note="", settle_on="2026-01-31"),
    ]
    expected = (
        b'[{"amount_cents":500,"attempt":2,"fee":"0.30","modified_at":'
        b'"2026-01-25T00:30:00+01:00","note":null,"payment_id":1,"refundable":false,'
        b'"settle_on":null},'
        b'{"amount_cents":500,"attempt":1,"fee":"0.30","modified_at":'
        b'"2026-01-25T00:30:00+01:00","note":"","payment_id":2,"refundable":false,'
        b'"settle_on":"2026-01-31"},'
        b'{"amount_cents":-7,"attempt":1,"fee":"12.00","modified_at":'
        b'"2026-01-25T03:30:00.000123+01:00","note":"na\\u00efve \\"q\\" \\ud83d\\ude00",'
        b'"payment_id":10,"refundable":true,"settle_on":"2026-04-01"}]\n'
    )
    assert serialize_day(DAY, rows, PAYMENTS) == expected
    assert serialize_day(DAY, rows[::-1], PAYMENTS, PAYMENTS.daily_files[0]) == expected
    assert serialize_day(DAY, [], PAYMENTS) == b"[]\n"


@pytest.mark.parametrize(
    "rows, message",
    [
        (
            [payment(fee="1.234")],
            "day 2026-01-25, row payment_id=1, attempt=1: fee: '1.234' has more than 2 decimal "
            "places (decimal(10,2))",
        ),
        ([payment(fee=1.5)], 'fee 1.5 must be exact decimal text such as "22.00"'),
        ([payment(fee="100000000")], "more than 8 digits before the point"),
        ([payment(refundable=1)], "refundable 1 must be true or false"),
        ([payment(amount_cents=None)], "amount_cents None must be an integer"),
        ([payment(amount_cents=2**63)], "does not fit in 64 bits"),
        ([payment("1")], "day 2026-01-25: payment_id '1' must be an integer"),
        ([payment(note=7)], "note 7 must be text"),
        ([payment(settle_on="2026-02-30")], "settle_on '2026-02-30' must be a date YYYY-MM-DD"),
        ([payment(modified_at="yesterday")], "modified_at 'yesterday' is not ISO-8601"),
        (
            [payment(), payment(fee="1.00")],
            "day 2026-01-25: row payment_id=1, attempt=1 appears twice; a day holds each row once",
        ),
        ([{k: v for k, v in payment().items() if k != "settle_on"}], "missing: ['settle_on']"),
        ([{**payment(), "status": "captured"}], "unexpected: ['status']"),
    ],
)
def test_serialize_day_refuses_what_a_payments_file_cannot_hold(rows, message):
    with pytest.raises(DayFilesError) as err:
        serialize_day(DAY, rows, PAYMENTS)
    assert message in str(err.value)


def test_orders_bytes_are_the_same_through_the_declaration():
    rows = [
        {
            "order_id": 7,
            "status": "paid",
            "amount": "22.00",
            "updated_at": "2026-01-25T03:00:00+00:00",
        },
        {"order_id": 1, "status": "paid", "amount": "+9.5", "updated_at": "2026-01-25"},
    ]
    expected = (
        b'[{"amount":"+9.5","order_id":1,"status":"paid","updated_at":"2026-01-25"},'
        b'{"amount":"22.00","order_id":7,"status":"paid",'
        b'"updated_at":"2026-01-25T03:00:00+00:00"}]\n'
    )
    assert serialize_day(DAY, rows, spec=ORDERS) == serialize_day(DAY, rows, ORDERS) == expected


# --- the per-day view, from a real warehouse -------------------------------------------------

SQL = {
    "integer": sa.BigInteger,
    "text": sa.Text,
    "decimal": sa.Text,
    "float": sa.Float,
    "boolean": sa.Boolean,
    "date": sa.String(10),
    "timestamp": sa.String(32),
}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def warehouse(request, tmp_path):
    url = (
        f"sqlite:///{tmp_path / 'warehouse.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres").url("views")
    )
    engine = make_engine(url, role="warehouse")
    yield engine
    engine.dispose()


def make_table(engine, spec: TableSpec, rows: list[dict]) -> sa.Table:
    """The declared table as a load would store it: one column per declared column, of
    its stored form, and the rows' stored values."""
    table = sa.Table(
        spec.name,
        sa.MetaData(),
        *(
            sa.Column(
                c.name,
                SQL[c.type.kind],
                nullable=c.nullable,
                primary_key=c.name in spec.primary_key,
                autoincrement=False,
            )
            for c in spec.columns
        ),
    )
    with engine.begin() as conn:
        table.create(conn)
        if rows:
            conn.execute(table.insert(), stored_rows(spec, rows))
    return table


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def payment_row(payment_id, attempt, status, modified_at, **values):
    row = {
        "payment_id": payment_id,
        "attempt": attempt,
        "status": status,
        "amount_cents": 500,
        "fee": Decimal("0.30"),
        "rate": None,
        "note": None,
        "refundable": False,
        "settle_on": None,
        "modified_at": at(modified_at),
    }
    return {**row, **values}


PAYMENT_ROWS = [
    payment_row(1, 1, "captured", "2026-03-28T22:30:00+00:00", rate=0.25),
    payment_row(1, 2, "captured", "2026-03-28T23:30:00+00:00"),  # Berlin: the 29th, 00:30
    payment_row(2, 1, "failed", "2026-03-29T10:00:00+00:00"),
    payment_row(
        10,
        1,
        "captured",
        "2026-03-29T01:30:00.000123+00:00",
        amount_cents=-7,
        fee=Decimal("12.00"),
        note='naïve "q" \U0001f600',
        refundable=True,
        settle_on=date(2026, 4, 1),
    ),
    payment_row(3, 1, "captured", "2026-03-30T12:00:00+00:00"),  # a day not asked
]


def test_the_view_of_a_declared_table(warehouse):
    """Captured payments of each day in Berlin (across the switch to summer time), by
    their composite key as numbers, in the file's JSON forms; the bytes the writer makes
    of them hash as Arrow's builder hashes the same stored rows."""
    tz = zone("Europe/Berlin")
    table = make_table(warehouse, PAYMENTS, PAYMENT_ROWS)
    days = ["2026-03-28", "2026-03-29", "2026-03-27"]
    view = day_rows(warehouse, days, tz, PAYMENTS)
    assert list(view) == ["2026-03-27", "2026-03-28", "2026-03-29"]
    assert view["2026-03-27"] == []
    assert view["2026-03-28"] == [
        {
            "payment_id": 1,
            "attempt": 1,
            "amount_cents": 500,
            "fee": "0.30",
            "note": None,
            "refundable": False,
            "settle_on": None,
            "modified_at": "2026-03-28T23:30:00+01:00",
        }
    ]
    assert serialize_day("2026-03-29", view["2026-03-29"], PAYMENTS) == (
        b'[{"amount_cents":500,"attempt":2,"fee":"0.30","modified_at":'
        b'"2026-03-29T00:30:00+01:00","note":null,"payment_id":1,"refundable":false,'
        b'"settle_on":null},'
        b'{"amount_cents":-7,"attempt":1,"fee":"12.00","modified_at":'
        b'"2026-03-29T03:30:00.000123+02:00","note":"na\\u00efve \\"q\\" \\ud83d\\ude00",'
        b'"payment_id":10,"refundable":true,"settle_on":"2026-04-01"}]\n'
    )

    # Arrow's builder, from the stored rows as the database gives them back (SQLite's
    # booleans as 0/1): the same hash for every day.
    with warehouse.connect() as conn:
        stored = [
            dict(r._mapping)
            for r in conn.execute(
                sa.select(*(sa.column(n) for n in PAYMENTS.column_names)).select_from(
                    sa.table(table.name)
                )
            )
        ]
    numbers = [(date.fromisoformat(d) - EPOCH).days for d in sorted(days)]
    types = {"refundable": pa.int64()} if warehouse.dialect.name == "sqlite" else {}
    found = arrow_hashes(PAYMENTS, stored, numbers, tz, 2, arrow_types=types)
    for number, day in zip(numbers, sorted(days), strict=True):
        blob = serialize_day(day, view[day], PAYMENTS)
        assert found[number] == (len(view[day]), sha256_hex(blob))


def test_the_view_sorts_text_keys_by_code_point_and_filters_on_null(warehouse):
    """Text keys in code point order, never the database's collation; a ``where`` that
    lists null takes the rows without a value; quoted names (``on``, ``grüße``)."""
    tz = zone("UTC")
    moment = at("2026-01-25T12:00:00+00:00")
    codes = ["a", "B", "_", "é", "Z", "a b", "ab", "A"]
    rows = [
        {
            "code": code,
            "on": date(2026, 1, 2),
            "n": i,
            "x": 0.1 * i,
            "d": Decimal("1.5"),
            "d2": None,
            "b": [True, None, False][i % 3],
            "at": moment,
            "grüße": code.upper(),
        }
        for i, code in enumerate(codes)
    ]
    make_table(warehouse, MIXED, rows)
    view = day_rows(warehouse, [DAY], tz, MIXED)[DAY]
    kept = [r for r in rows if r["b"] is not False]
    assert [r["code"] for r in view] == sorted(r["code"] for r in kept)
    assert [r["b"] for r in view] == [r["b"] for r in sorted(kept, key=lambda r: r["code"])]
    assert view[0] == {
        "code": "A",
        "on": "2026-01-02",
        "n": 7,
        "x": 0.1 * 7,
        "d": "1.5",
        "d2": None,
        "b": None,
        "at": "2026-01-25T12:00:00+00:00",
        "grüße": "A",
    }
    count, sums = day_totals(view, MIXED.daily_files[0].totals, MIXED)
    assert count == len(kept)
    assert sums["n"] == sum(r["n"] for r in kept) and isinstance(sums["n"], int)
    assert sums["d"] == Decimal("1.5") * len(kept) and sums["d2"] == Decimal(0)


def test_a_date_cursor_puts_a_row_on_its_date_in_every_zone(warehouse):
    rows = [
        {"id": i, "booked_on": date(2026, 1, 24) + timedelta(days=i % 3), "what": f"w{i}"}
        for i in range(1, 8)
    ]
    make_table(warehouse, BOOKINGS, rows)
    for name in ("Pacific/Kiritimati", "Pacific/Pago_Pago"):
        view = day_rows(warehouse, ["2026-01-25", "2026-01-26"], zone(name), BOOKINGS)
        assert {day: [r["id"] for r in got] for day, got in view.items()} == {
            "2026-01-25": [1, 4, 7],
            "2026-01-26": [2, 5],
        }
        assert view["2026-01-26"][0] == {"id": 2, "booked_on": "2026-01-26", "what": "w2"}


def test_a_warehouse_without_the_table_has_no_rows(warehouse):
    assert day_rows(warehouse, [DAY], UTC, PAYMENTS) == {DAY: []}
    assert day_rows(warehouse, [], UTC, PAYMENTS) == {}


# --- totals ------------------------------------------------------------------------------------


def test_totals_are_exact_per_column_type():
    files = PAYMENTS.daily_files[0]
    rows = [
        payment(1, 1, amount_cents=2**62, fee="0.10"),
        payment(1, 2, amount_cents=2**62, fee=Decimal("0.20")),
    ]
    assert day_totals(rows, files.totals, PAYMENTS) == (
        2,
        {"amount_cents": 2**63, "fee": Decimal("0.30")},
    )
    assert day_totals([], files.totals, PAYMENTS) == (0, {"amount_cents": 0, "fee": Decimal(0)})
    big = "123456789012345678901234567890.123456789"
    mixed = [
        {"n": None, "x": 0.1, "d": big, "d2": "1.000"},
        {"n": 3, "x": 0.2, "d": "0.000000001", "d2": None},
        {"n": None, "x": None, "d": "-1", "d2": "-0.500"},
    ]
    count, sums = day_totals(mixed, MIXED.daily_files[0].totals, MIXED)
    assert count == 3
    assert sums == {
        "n": 3,
        "x": math.fsum([0.1, 0.2]),
        "d": Decimal("123456789012345678901234567889.123456790"),
        "d2": Decimal("0.500"),
    }
    # orders' totals: (paid orders, their exact revenue)
    orders = [
        {"order_id": 1, "status": "paid", "amount": "1.10", "updated_at": DAY},
        {"order_id": 2, "status": "paid", "amount": "2.05", "updated_at": DAY},
    ]
    assert day_totals(orders, ORDERS.daily_files[0].totals, ORDERS) == (
        2,
        {"amount": Decimal("3.15")},
    )


def test_store_totals_replaces_each_days_row(warehouse):
    totals = MIXED.daily_files[0].totals
    first = {
        "2026-01-25": (2, {"n": 3, "x": 0.1, "d": Decimal("1.50"), "d2": Decimal(0)}),
        "2026-01-26": (0, {"n": 0, "x": 0.0, "d": Decimal(0), "d2": Decimal(0)}),
    }
    store_totals(warehouse, MIXED, totals, first)
    store_totals(
        warehouse,
        MIXED,
        totals,
        {"2026-01-26": (1, {"n": -1, "x": 1e-7, "d": Decimal("-2.000"), "d2": Decimal("0.001")})},
    )
    store_totals(warehouse, MIXED, totals, {})
    with warehouse.connect() as conn:
        got = conn.execute(
            sa.text("SELECT day, rows, n, x, d, d2 FROM mixed_totals ORDER BY day")
        ).all()
    assert [tuple(r) for r in got] == [
        ("2026-01-25", 2, "3", "0.1", "1.50", "0"),
        ("2026-01-26", 1, "-1", "1e-07", "-2.000", "0.001"),
    ]
