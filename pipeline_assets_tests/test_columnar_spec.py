"""The columnar rules for any declared table: ``orders`` and ``payments`` (a composite
key, every column type, NULLable columns) side by side.

The fast path may only vouch for what the exact parser (each type's
``ColumnType.parse``; ``rows.validate`` for orders) accepts, and must give the same
stored values, instant and day; a row it does not vouch for fails with the exact
parser's error, naming the table, the key, the column and the value.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_assets.core.errors import InvalidRowError
from pipeline_assets.core.rows import normalize as columnar
from pipeline_assets.core.rows.checks import newest_per_key, parse_row, parse_rows
from pipeline_assets.core.rows.normalize import normal_schema, normalize
from pipeline_assets.core.table import ORDERS, working
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.table.orders import ORDERS_ATTRIBUTES
from pipeline_assets.core.times import EPOCH, UTC, day_of, day_start, zone
from pipeline_assets.core.times.arrays import zone_name
from pipeline_assets_tests.orders import newest_per_order

from .tables import PAYMENTS, PAYMENTS_ATTRIBUTES, TABLES

NY = zone("America/New_York")
ZONES = [
    UTC,
    NY,
    zone("Asia/Kolkata"),
    zone("Pacific/Chatham"),
    timezone(timedelta(hours=2)),
]  # the last has no IANA name: exact parser only
TAIL = (
    ". Nothing was written and the watermark is unchanged; fix the row in the source and run again."
)

# Valid source values of each column, as text the way SQLite and MySQL return them.
STAMPS = [
    "2026-01-25",
    "2026-01-25T03:00:00",
    "2026-01-25 03:00",
    "2026-01-25T03:00:00.5",
    "2026-01-25T03:00:00.123456Z",
    "2026-01-25T03:00:00+05:30",
    "  2026-01-25  ",
    "2026-03-08T02:30:00",
    "2026-11-01T01:30:00",
    "2026-01-25T03:00:00-0500",
    "0999-01-01T00:00:00Z",
    "2040-07-01T12:00:00",
]
GOOD = {
    "payment_id": ["7", " 8 ", "-3", "0107", "+9"],
    "attempt": ["1", "2", "3"],
    "status": ["captured", "", "  ", " café ☕ ", "日本", "pending"],
    "amount_cents": ["100", "0", "-250", "9223372036854775807"],
    "fee": ["1.1", "1.10", "0", "-0", "-0.5", "12345678.99", " 2.5 ", "+1", "00.5", "3"],
    "rate": [None, "2.5", "-0", "1e3", "1.", ".5", " 7 ", "0.1", "1E-5"],
    "note": [None, "", " padded ", "café ☕", "multi\nline"],
    "refundable": ["0", "1", "t", "f", "true", "FALSE", " yes ", "N"],
    "settle_on": [None, "2026-01-25", " 2026-02-28 ", "2024-02-29", "0999-12-31"],
    "modified_at": STAMPS,
}
BAD = {
    "payment_id": [None, "abc", "1.5", "9223372036854775808"],
    "attempt": [None, "x"],
    "status": [None],
    "amount_cents": [None, "1.0", "1e3"],
    "fee": [None, "1.234", "123456789", "1e2", "12,50", "NaN", ""],
    "rate": ["nan", "inf", "abc", "1e999"],
    "refundable": [None, "maybe", "2", ""],
    "settle_on": ["2026-02-30", "2026-1-5", "25/01/2026"],
    "modified_at": [None, "25/01/2026", "2026-02-30", "2026-01-25T03"],
}


def reference(spec, row: dict, tz) -> dict:
    """The NORMAL row of ``row`` by the exact rules alone (each type's parse and stored;
    orders: a blank status is missing, as its spec's legacy says), built here without the
    module under test."""
    nonblank = spec.legacy.nonblank if spec.legacy else ()
    out = {}
    for column in spec.columns:
        value = row[column.name]
        if column.name in nonblank and isinstance(value, str) and not value.strip():
            value = None
        if value is None and not column.nullable:
            raise ValueError(f"{column.name} is required")
        out[column.name] = (
            None if value is None else column.type.stored(column.type.parse(value, tz))
        )
    cursor = spec.column(spec.cursor).type
    moment = cursor.parse(row[spec.cursor], tz)
    if cursor.kind == "date":
        return out | {
            working.INSTANT: day_start(moment, tz).astimezone(UTC),
            working.DAY: (moment - EPOCH).days,
        }
    return out | {working.INSTANT: moment, working.DAY: (day_of(moment, tz) - EPOCH).days}


def batch(spec, rows: list[dict], types: dict | None = None) -> pa.Table:
    types = types or {}
    return pa.table(
        {c: pa.array([r[c] for r in rows], types.get(c, pa.string())) for c in spec.column_names}
    )


def ordered(spec, rows: list[dict]) -> list[dict]:
    return sorted(
        rows,
        key=lambda r: (
            tuple(repr(r[k]) for k in spec.primary_key)
            + (r[working.INSTANT], repr(sorted(r.items())))
        ),
    )


def same_as_exact(spec, rows: list[dict], tz, types: dict | None = None) -> None:
    """normalize gives the reference rows, or the exact parser's error for the first bad
    row (every row of a batch is read; the first bad one in batch order is named)."""
    raw = batch(spec, rows, types)
    want, error = [], None
    for row in raw.to_pylist():
        try:
            want.append(reference(spec, row, tz))
        except Exception:
            with pytest.raises(InvalidRowError) as exact:
                parse_rows(
                    pa.Table.from_pylist([row], schema=raw.schema), tz, spec, normal_schema(spec)
                )
            error = error or exact.value
    if error is not None:
        with pytest.raises(InvalidRowError) as err:
            normalize(raw, tz, spec)
        assert str(err.value) == str(error)
        return
    got = normalize(raw, tz, spec)
    assert got.schema == normal_schema(spec)
    assert ordered(spec, got.to_pylist()) == ordered(spec, want)
    for a, b in zip(ordered(spec, got.to_pylist()), ordered(spec, want), strict=True):
        for name, value in a.items():  # the same types; -0.0 is not 0.0 for a float
            assert type(value) is type(b[name]), name
            assert not isinstance(value, float) or repr(value) == repr(b[name]), name


def cycled(spec, n: int, good: dict) -> list[dict]:
    return [
        {c: good[c][(i * (k + 1)) % len(good[c])] for k, c in enumerate(spec.column_names)}
        for i in range(n)
    ]


ORDERS_GOOD = {
    "order_id": ["105", " 106 ", "-3", "0107"],
    "status": ["paid", "pending", " paid "],
    "amount": ["40.00", "-5.50", "0", "-0.00", "+5.00", "007", " 0.10 ", "00.5"],
    "updated_at": STAMPS,
}
GOOD_OF = {"orders": ORDERS_GOOD, "payments": GOOD}


# --- the schema -------------------------------------------------------------------------


def test_the_normal_schema_of_each_table():
    assert [(f.name, str(f.type)) for f in normal_schema(ORDERS)] == [
        ("order_id", "int64"),
        ("status", "string"),
        ("amount", "string"),
        ("updated_at", "string"),
        (working.INSTANT, "timestamp[us, tz=UTC]"),
        (working.DAY, "int32"),
    ]
    assert [(f.name, str(f.type)) for f in normal_schema(PAYMENTS)] == [
        ("payment_id", "int64"),
        ("attempt", "int64"),
        ("status", "string"),
        ("amount_cents", "int64"),
        ("fee", "string"),
        ("rate", "double"),
        ("note", "string"),
        ("refundable", "bool"),
        ("settle_on", "string"),
        ("modified_at", "string"),
        (working.INSTANT, "timestamp[us, tz=UTC]"),
        (working.DAY, "int32"),
    ]
    # orders' own row rules are data on its spec: only a declaration of its shape has them
    assert ORDERS.legacy is not None and declare(ORDERS_ATTRIBUTES).legacy is ORDERS.legacy
    assert PAYMENTS.legacy is None


# --- the fast path agrees with the exact parser ------------------------------------------


@pytest.mark.parametrize("tz", ZONES, ids=lambda tz: zone_name(tz) or "fixed")
@pytest.mark.parametrize("name", TABLES)
def test_every_valid_form_reads_as_the_exact_parser_reads_it(name, tz):
    spec = TABLES[name]
    same_as_exact(spec, cycled(spec, 60, GOOD_OF[name]), tz)


@pytest.mark.parametrize("name", TABLES)
def test_the_common_forms_never_reach_the_exact_parser(name, monkeypatch):
    spec = TABLES[name]
    rare = {
        "+9",
        "+1",
        "+5.00",
        "007",
        "00.5",
        "1.",
        ".5",
        "0999-01-01T00:00:00Z",
        "0999-12-31",
        "2026-01-25T03:00:00-0500",
    }  # forms left to the exact parser
    good = {c: [v for v in values if v not in rare] for c, values in GOOD_OF[name].items()}
    rows = cycled(spec, 40, good)
    want = normalize(batch(spec, rows), UTC, spec)

    def refuse(*args, **kwargs):
        raise AssertionError("a common form reached the exact parser")

    monkeypatch.setattr(columnar, "parse_rows", refuse)
    assert normalize(batch(spec, rows), UTC, spec).equals(want)


def test_native_columns_of_payments_read_as_their_text():
    """PostgreSQL returns integer keys, booleans, dates and the cursor natively."""
    rows = cycled(PAYMENTS, 30, GOOD)
    native = [
        dict(
            r,
            payment_id=int(r["payment_id"]),
            attempt=int(r["attempt"]),
            refundable=r["refundable"].strip().lower() in ("1", "t", "true", "yes"),
            settle_on=None
            if r["settle_on"] is None
            else date.fromisoformat(r["settle_on"].strip()),
            rate=None if r["rate"] is None else float(r["rate"]),
            modified_at=datetime(2026, 1, 25, 3, i % 60, tzinfo=UTC),
        )
        for i, r in enumerate(rows)
    ]
    types = {
        "payment_id": pa.int64(),
        "attempt": pa.int32(),
        "refundable": pa.bool_(),
        "settle_on": pa.date32(),
        "rate": pa.float64(),
        "modified_at": pa.timestamp("us", tz="UTC"),
    }
    for tz in (UTC, NY):
        same_as_exact(PAYMENTS, native, tz, types)
    naive = [
        dict(r, modified_at=r["modified_at"].replace(tzinfo=None), refundable=int(r["refundable"]))
        for r in native
    ]
    same_as_exact(
        PAYMENTS, naive, NY, types | {"modified_at": pa.timestamp("us"), "refundable": pa.int8()}
    )


def test_a_column_of_nulls_only_takes_the_fast_path(monkeypatch):
    """A reader may type a batch's all-NULL column as Arrow's null type."""
    rows = [payment(payment_id=str(i)) for i in range(4)]
    types = {name: pa.null() for name in ("rate", "note", "settle_on")}
    want = normalize(batch(PAYMENTS, rows), UTC, PAYMENTS)
    monkeypatch.setattr(columnar, "parse_rows", None)  # the exact parser is not reached
    assert normalize(batch(PAYMENTS, rows, types), UTC, PAYMENTS).equals(want)
    assert want["note"].to_pylist() == [None] * 4


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("1.1", "1.10"),
        ("5", "5.00"),
        ("-0", "-0.00"),
        ("0.5", "0.50"),
        ("-7.25", "-7.25"),
        ("12345678", "12345678.00"),
        (" 3.3 ", "3.30"),
        ("+1.5", "1.50"),
        ("00.5", "0.50"),
    ],
)
def test_a_scaled_decimal_is_written_with_its_places(value, stored):
    row = cycled(PAYMENTS, 1, GOOD)[0] | {"fee": value}
    assert normalize(batch(PAYMENTS, [row] * 3), UTC, PAYMENTS)["fee"].to_pylist() == [stored] * 3


@pytest.mark.parametrize(
    "kind", ["decimal(4,0)", "decimal(3,3)", "decimal(40,2)", "decimal(40,30)", "decimal(30,28)"]
)
def test_scaled_decimals_at_the_edges_of_precision(kind):
    spec = declare(
        {
            "table": "t",
            "primary_key": "k",
            "cursor": "at",
            "columns": {"k": "integer", "v": kind, "at": "timestamp"},
        }
    )
    values = [
        "0",
        "1",
        "-1",
        "9999",
        "0.5",
        "0.123",
        "0.1234",
        "5.0",
        "1" * 27,
        "1" * 30,
        "0." + "1" * 28,
        "1." + "0" * 28,
        "0.000",
    ]
    for value in values:
        same_as_exact(spec, [{"k": "1", "v": value, "at": "2026-01-25"}] * 2, UTC)


def test_a_date_cursor_is_midnight_of_its_day_in_the_zone():
    spec = declare(
        {
            "table": "bookings",
            "primary_key": "id",
            "cursor": "booked_on",
            "columns": {"id": "integer", "booked_on": "date"},
        }
    )
    days = [
        "2026-01-25",
        "2026-03-08",
        "2026-11-01",
        " 2026-03-29 ",
        "2026-09-06",
        "1969-12-31",
        "2040-06-01",
        "1000-01-01",
    ]
    rows = [{"id": str(i), "booked_on": d} for i, d in enumerate(days)]
    for tz in ZONES + [zone("America/Santiago"), zone("Asia/Beirut")]:
        same_as_exact(spec, rows, tz)
        got = normalize(batch(spec, rows), tz, spec).sort_by("id").to_pylist()
        assert [EPOCH + timedelta(days=r[working.DAY]) for r in got] == [
            date.fromisoformat(d.strip()) for d in days
        ]
    native = pa.table(
        {"id": [1, 2], "booked_on": pa.array([date(2026, 1, 25), date(2026, 3, 8)], pa.date32())}
    )
    got = normalize(native, NY, spec).to_pylist()
    assert [r[working.INSTANT] for r in got] == [
        datetime(2026, 1, 25, 5, tzinfo=UTC),
        datetime(2026, 3, 8, 5, tzinfo=UTC),
    ]
    assert [r["booked_on"] for r in got] == ["2026-01-25", "2026-03-08"]


def _payment_values():
    def column(name):
        return st.sampled_from(GOOD[name] + BAD.get(name, []))

    return st.fixed_dictionaries({name: column(name) for name in PAYMENTS.column_names})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_payment_values(), min_size=1, max_size=6), st.sampled_from(ZONES[:4]))
def test_any_payments_batch_agrees_with_the_exact_parser(rows, tz):
    good = cycled(PAYMENTS, 3, GOOD)
    same_as_exact(PAYMENTS, good + rows + good, tz)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.decimals(allow_nan=False, allow_infinity=False).map(str),
        st.from_regex(r"-?[0-9]{1,25}(\.[0-9]{1,25})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
    )
)
def test_any_float_text_reads_as_python_reads_it(text):
    row = cycled(PAYMENTS, 1, GOOD)[0] | {"rate": text}
    same_as_exact(PAYMENTS, [row, row], UTC)


@settings(max_examples=200, deadline=None)
@given(st.dates(min_value=date(1, 1, 1)), st.sampled_from(["text", "native"]))
def test_any_date_reads_as_python_reads_it(day, form):
    row = cycled(PAYMENTS, 1, GOOD)[0] | {"settle_on": day.isoformat()}
    if form == "native":
        row["settle_on"] = day
    same_as_exact(
        PAYMENTS, [row, row], UTC, {"settle_on": pa.date32()} if form == "native" else None
    )


# --- the errors name the table, the key, the column and the value ---------------------------


def payment(**values) -> dict:
    return {
        "payment_id": "7",
        "attempt": "2",
        "status": "captured",
        "amount_cents": "100",
        "fee": "1.00",
        "rate": None,
        "note": None,
        "refundable": "t",
        "settle_on": None,
        "modified_at": "2026-01-25T03:00:00Z",
    } | values


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"fee": "1.234"},
            "payments (payment_id=7, attempt=2): column fee = '1.234': has more "
            "than 2 decimal places (decimal(10,2))",
        ),
        (
            {"fee": "123456789"},
            "payments (payment_id=7, attempt=2): column fee = '123456789': "
            "has more than 8 digits before the point (decimal(10,2))",
        ),
        (
            {"status": None},
            "payments (payment_id=7, attempt=2): column status = None: the value "
            "is missing and the column is not nullable",
        ),
        (
            {"refundable": "maybe"},
            "payments (payment_id=7, attempt=2): column refundable = "
            "'maybe': is not a boolean (true/false, 1/0, t/f)",
        ),
        (
            {"rate": "nan"},
            "payments (payment_id=7, attempt=2): column rate = 'nan': is not a finite number",
        ),
        (
            {"settle_on": "2026-02-30"},
            "payments (payment_id=7, attempt=2): column settle_on = "
            "'2026-02-30': is not a valid day: day is out of range "
            "for month",
        ),
        (
            {"attempt": "x"},
            "payments (payment_id=7, attempt='x'): column attempt = 'x': is not an integer",
        ),
        ({"payment_id": " 0107 "}, None),
        (
            {"payment_id": None},
            "a payments row with no payment_id (attempt=2): column "
            "payment_id = None: every row needs its key",
        ),
        (
            {"payment_id": "9223372036854775808"},
            "payments (payment_id='9223372036854775808', "
            "attempt=2): column payment_id = '9223372036854775808': 9223372036854775808 does not "
            "fit in 64 bits",
        ),
        (
            {"modified_at": "25/01/2026"},
            "payments (payment_id=7, attempt=2): column modified_at "
            "= '25/01/2026': is not an ISO-8601 date (2026-01-25) or timestamp "
            "(2026-01-25T03:00:00, optionally with an offset such as +00:00 or Z)",
        ),
    ],
)
def test_a_bad_payments_row_among_good_ones_is_named(values, message):
    good = [payment(payment_id=str(i)) for i in range(3)]
    raw = batch(PAYMENTS, good + [payment(**values)] + good)
    if message is None:  # a key read by its type: named as stored
        assert normalize(raw, UTC, PAYMENTS).num_rows == 7
        return
    with pytest.raises(InvalidRowError) as err:
        normalize(raw, UTC, PAYMENTS)
    assert str(err.value) == message + TAIL
    column = next(iter(values))
    assert (err.value.column, err.value.value) == (column, values[column])
    assert "payments" in err.value.row
    assert not err.value.retryable


def test_the_first_bad_row_of_a_batch_is_the_one_named():
    rows = [
        payment(payment_id="1"),
        payment(payment_id="2", fee="x"),
        payment(payment_id="3", status=None),
    ]
    with pytest.raises(InvalidRowError) as err:
        normalize(batch(PAYMENTS, rows), UTC, PAYMENTS)
    assert err.value.key == {"payment_id": 2, "attempt": 2} and err.value.column == "fee"


def test_parse_row_reads_every_type():
    row = parse_row(
        payment(fee="1.1", rate="2.5", note="", refundable="0", settle_on="2026-01-25"),
        UTC,
        PAYMENTS,
    )
    assert (str(row["fee"]), row["rate"], row["note"], row["refundable"], row["settle_on"]) == (
        "1.10",
        2.5,
        "",
        False,
        date(2026, 1, 25),
    )


def test_orders_keeps_its_messages():
    raw = pa.table(
        {"order_id": ["105"], "status": ["paid"], "amount": ["abc"], "updated_at": ["2026-01-25"]}
    )
    with pytest.raises(InvalidRowError) as err:
        normalize(raw, UTC, ORDERS)
    assert str(err.value) == (
        "order 105: column amount = 'abc': 'abc' is not a decimal number such as 40.00" + TAIL
    )
    assert err.value.key == {"order_id": 105} and err.value.row == "order 105"
    blank = raw.set_column(1, "status", pa.array(["  "])).set_column(
        2, "amount", pa.array(["1.00"])
    )
    with pytest.raises(
        InvalidRowError, match="order 105: column status = '  ': the status is missing"
    ):
        normalize(blank, UTC, spec=ORDERS)
    # the same blank status is a value in a declared text column
    spec = declare(PAYMENTS_ATTRIBUTES)
    assert normalize(batch(spec, [payment(status="  ")]), UTC, spec)["status"].to_pylist() == ["  "]


# --- one row per key -----------------------------------------------------------------------


def normal(rows: list[dict]) -> pa.Table:
    return normalize(batch(PAYMENTS, rows), UTC, PAYMENTS)


def test_the_newest_copy_of_each_composite_key_wins():
    rows = [
        payment(payment_id="2", attempt="1", fee="1.00", modified_at="2026-01-05"),
        payment(payment_id="1", attempt="2", fee="2.00", modified_at="2026-01-05"),
        payment(payment_id="1", attempt="1", fee="3.00", modified_at="2026-01-06"),
        payment(payment_id="1", attempt="2", fee="4.00", modified_at="2026-01-07"),
        payment(payment_id="1", attempt="2", fee="5.00", modified_at="2026-01-04"),
        payment(payment_id="1", attempt="1", fee="3.00", modified_at="2026-01-06"),
    ]
    kept, dropped = newest_per_key(normal(rows), PAYMENTS)
    assert dropped == 3
    assert [(r["payment_id"], r["attempt"], r["fee"]) for r in kept.to_pylist()] == [
        (1, 1, "3.00"),
        (1, 2, "4.00"),
        (2, 1, "1.00"),
    ]


def test_a_tie_with_different_values_is_refused_naming_the_key():
    rows = [
        payment(payment_id="1", attempt="3", note=None),
        payment(payment_id="1", attempt="3", note="late"),
    ]
    with pytest.raises(InvalidRowError) as err:
        newest_per_key(normal(rows), PAYMENTS)
    assert str(err.value) == (
        "payments (payment_id=1, attempt=3): column modified_at = "
        "'2026-01-25T03:00:00.000000+00:00': the source holds two rows with this key and "
        "this modified_at and different values (note None and 'late'), so neither can win; "
        "keep one" + TAIL
    )
    assert err.value.key == {"payment_id": 1, "attempt": 3}
    same = [payment(payment_id="1", attempt="3")] * 2  # NULL and NULL: the same row
    kept, dropped = newest_per_key(normal(same), PAYMENTS)
    assert (kept.num_rows, dropped) == (1, 1)
    apart = [payment(payment_id="1", attempt="3"), payment(payment_id="1", attempt="4")]
    assert newest_per_key(normal(apart), PAYMENTS)[0].num_rows == 2


def test_orders_dedup_is_newest_per_key_with_its_message():
    raw = pa.table(
        {
            "order_id": ["1", "1", "2"],
            "status": ["paid", "refunded", "paid"],
            "amount": ["1.00"] * 3,
            "updated_at": ["2026-01-06"] * 3,
        }
    )
    table = normalize(raw, UTC, spec=ORDERS)
    with pytest.raises(InvalidRowError) as err:
        newest_per_order(table)
    with pytest.raises(InvalidRowError) as same:
        newest_per_key(table, spec=ORDERS)
    assert (
        str(err.value)
        == str(same.value)
        == (
            "order 1: column updated_at = '2026-01-06T00:00:00.000000+00:00': the source holds "
            "two rows of this order with this updated_at and different values (paid 1.00 and "
            "refunded 1.00), so neither can win; keep one" + TAIL
        )
    )


def test_the_row_error_names_any_kind_of_key():
    items = declare(
        {
            "table": "items",
            "primary_key": "code",
            "cursor": "at",
            "columns": {"code": "text", "at": "date"},
        }
    )
    t = declare(
        {
            "table": "t",
            "primary_key": "id",
            "cursor": "at",
            "columns": {"id": "integer", "at": "date"},
        }
    )

    def who(spec, key):
        return str(spec.row_error(key, "c", "v", "why")).split(": column")[0]

    assert who(ORDERS, {"order_id": 105}) == who(ORDERS, 105) == "order 105"
    assert who(ORDERS, None) == who(ORDERS, {"order_id": None}) == "a row with no order_id"
    assert who(PAYMENTS, {"payment_id": 7, "attempt": 2}) == "payments (payment_id=7, attempt=2)"
    assert who(items, {"code": "A-1"}) == "items (code='A-1')"
    assert (
        who(PAYMENTS, {"payment_id": None, "attempt": None})
        == "a payments row with no payment_id or attempt"
    )
    assert who(PAYMENTS, (7, "x")) == "payments (payment_id=7, attempt='x')"
    assert who(t, 7) == "t (id=7)" and who(t, None) == "a t row with no key"
    error = ORDERS.row_error({"order_id": 187}, "amount", "12.3.4", "not a decimal")
    assert (error.row, error.key, error.column, error.value, error.reason) == (
        "order 187",
        {"order_id": 187},
        "amount",
        "12.3.4",
        "not a decimal",
    )
