"""The columnar load: its fast path agrees with the exact parser, and duplicates in a
source without a primary key resolve the same way whatever the physical order.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.errors import InvalidRowError
from pipeline_assets.core.rows.normalize import normalize
from pipeline_assets.core.table import ORDERS, working
from pipeline_assets.core.times import UTC, day_of, zone
from pipeline_assets.core.times.arrays import days_of, zone_name
from pipeline_assets_tests.orders import load_orders, stored, validate

from .conftest import NOW
from .plain import warehouse_rows

NY = zone("America/New_York")
ZONES = [
    UTC,
    NY,
    zone("Asia/Kolkata"),
    zone("Pacific/Chatham"),
    zone("Europe/London"),
    timezone(timedelta(hours=2)),
]  # the last has no IANA name: exact parser only

FORMS = [
    "2026-01-25",
    "2026-01-25T03:00:00",
    "2026-01-25 03:00",
    "2026-01-25T03:00:00.5",
    "2026-01-25T03:00:00.123456",
    "2026-01-25T03:00:00.123456789Z",
    "2026-01-25T03:00:00Z",
    "2026-01-25T03:00:00+05:30",
    "2026-01-25T03:00:00-0500",
    "2026-01-25T03:00:00.5+00",
    "2026-01-25t03:00:00z",
    "2026-01-25T03:00:00,5Z",
    "  2026-01-25  ",
    "2026-01-25T03:00 Z",
    "2026-03-08T02:30:00",
    "2026-03-08T01:59:59.999999",
    "2026-03-08T03:00:00",
    "2026-11-01T01:30:00",
    "2026-11-01T00:59:59",
    "2026-11-01T02:00:00",
    "2026-03-29T01:30:00",
    "2026-10-25T01:30:00",
    "0999-01-01T00:00:00Z",
    "2026-01-25T00:00:00+00:75",
]
AMOUNTS = ["40.00", "-5.50", "0", "-0.00", "+5.00", "007", "1234567890123.45", " 0.10 ", "00.5"]
IDS = ["105", " 106 ", "-3", "0107"]


def expected(order_id, status, amount, updated_at, tz) -> dict:
    order = validate(order_id, status, amount, updated_at, tz)
    oid, status, amount, stamp = stored(order)
    return {
        "order_id": oid,
        "status": status,
        "amount": amount,
        "updated_at": stamp,
        working.INSTANT: order["updated_at"],
        working.DAY: (day_of(order["updated_at"], tz) - date(1970, 1, 1)).days,
    }


def by_key(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: (r["order_id"], r[working.INSTANT], r["amount"]))


@pytest.mark.parametrize("tz", ZONES, ids=lambda tz: zone_name(tz) or "fixed")
def test_the_fast_path_gives_what_the_exact_parser_gives(tz):
    rows = [(str(n), "paid", AMOUNTS[n % len(AMOUNTS)], form) for n, form in enumerate(FORMS)]
    rows += [(key, "pending", "1.00", "2026-01-25") for key in IDS]
    raw = pa.table(
        {
            name: [r[i] for r in rows]
            for i, name in enumerate(["order_id", "status", "amount", "updated_at"])
        }
    )
    assert by_key(normalize(raw, tz, spec=ORDERS)) == sorted(
        (expected(*r, tz) for r in rows),
        key=lambda r: (r["order_id"], r[working.INSTANT], r["amount"]),
    )


@pytest.mark.parametrize(
    "form",
    FORMS + ["2026-01-25T03", "2026-01-25T03Z", "2026-01-25 03+01:00", "2026-01-25T03:00:00+05"],
)
@pytest.mark.parametrize("tz", ZONES[:2], ids=["UTC", "NY"])
def test_a_batch_of_one_form_reads_as_the_exact_parser_reads_it(form, tz):
    raw = pa.table(
        {
            "order_id": ["1", "2"],
            "status": ["paid"] * 2,
            "amount": ["1.00"] * 2,
            "updated_at": [form, form],
        }
    )
    try:
        want = [expected(str(i), "paid", "1.00", form, tz) for i in (1, 2)]
    except InvalidRowError as exc:
        with pytest.raises(InvalidRowError) as err:
            normalize(raw, tz, spec=ORDERS)
        assert str(err.value) == str(exc)
        return
    assert by_key(normalize(raw, tz, spec=ORDERS)) == want


def test_native_columns_take_the_fast_path_with_the_same_result():
    stamps = [datetime(2026, 3, 8, 2, 30), datetime(2026, 11, 1, 1, 30), datetime(2026, 1, 5)]
    raw = pa.table(
        {
            "order_id": pa.array([1, 2, 3], pa.int32()),
            "status": ["paid"] * 3,
            "amount": ["1.00"] * 3,
            "updated_at": pa.array(stamps, pa.timestamp("us")),
        }
    )
    assert by_key(normalize(raw, NY, spec=ORDERS)) == [
        expected(i + 1, "paid", "1.00", s, NY) for i, s in enumerate(stamps)
    ]
    aware = raw.set_column(
        3,
        "updated_at",
        pa.array([s.replace(tzinfo=UTC) for s in stamps], pa.timestamp("us", tz="UTC")),
    )
    assert by_key(normalize(aware, NY, spec=ORDERS)) == [
        expected(i + 1, "paid", "1.00", s.replace(tzinfo=UTC), NY) for i, s in enumerate(stamps)
    ]


@settings(max_examples=300, deadline=None)
@given(
    st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(2100, 1, 1)),
    st.sampled_from(["naive", "space", "date", "utc", "z", "offset"]),
    st.sampled_from(ZONES[:5]),
)
def test_any_wall_clock_in_any_form_agrees(moment, form, tz):
    text = {
        "naive": moment.isoformat(),
        "space": moment.isoformat(sep=" "),
        "date": moment.date().isoformat(),
        "utc": moment.replace(tzinfo=UTC).isoformat(),
        "z": moment.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z"),
        "offset": moment.replace(tzinfo=timezone(timedelta(hours=-3, minutes=-30))).isoformat(),
    }[form]
    raw = pa.table(
        {"order_id": ["1"], "status": ["paid"], "amount": ["2.50"], "updated_at": [text]}
    )
    assert normalize(raw, tz, spec=ORDERS).to_pylist() == [expected("1", "paid", "2.50", text, tz)]
    stamp = expected("1", "paid", "2.50", text, tz)
    assert days_of([stamp["updated_at"]], tz) == {day_of(stamp[working.INSTANT], tz).isoformat()}


@pytest.mark.parametrize(
    "row, column",
    [
        (("187", "paid", "22,00", "2026-01-25"), "amount"),
        (("187", "paid", "22.00", "25/01/2026"), "updated_at"),
        (("187", "paid", "22.00", "2026-02-30"), "updated_at"),
        (("187", None, "22.00", "2026-01-25"), "status"),
        (("abc", "paid", "22.00", "2026-01-25"), "order_id"),
        (("187", "paid", "NaN", "2026-01-25"), "amount"),
    ],
)
def test_a_bad_row_among_good_ones_raises_the_exact_parsers_error(row, column):
    good = [("1", "paid", "1.00", "2026-01-25")] * 3
    rows = good + [row] + good
    raw = pa.table(
        {
            name: pa.array([r[i] for r in rows], pa.string())
            for i, name in enumerate(["order_id", "status", "amount", "updated_at"])
        }
    )
    with pytest.raises(InvalidRowError) as err:
        normalize(raw, UTC, spec=ORDERS)
    with pytest.raises(InvalidRowError) as want:
        validate(*row, tz=UTC)
    assert err.value.column == column and str(err.value) == str(want.value)


# --- a source without a primary key --------------------------------------------------


def keyless_source(url: str, rows: list[tuple]) -> sa.Engine:
    engine = make_engine(url, role="app")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE orders (order_id BIGINT, status TEXT, amount TEXT, updated_at TEXT)"
        )
        conn.execute(
            sa.text("INSERT INTO orders VALUES (:i, :s, :a, :u)"),
            [dict(i=i, s=s, a=a, u=u) for i, s, a, u in rows],
        )
    return engine


def load_keyless(db_urls, rows: list[tuple], chunk_size: int):
    """A first load of ``rows`` from a source without a key: (result, stored rows)."""
    source = keyless_source(db_urls["source"], rows)
    warehouse = make_engine(db_urls["warehouse"], role="warehouse")
    try:
        result = load_orders(
            source, warehouse, tz=UTC, lookback_days=2, now=NOW, chunk_size=chunk_size
        )
        return result, warehouse_rows(db_urls["warehouse"])
    finally:
        source.dispose()
        warehouse.dispose()


NEWER = (1, "paid", "11.00", "2026-01-06")
OLDER = (1, "paid", "10.00", "2026-01-05")


@pytest.mark.parametrize(
    "physical", [[NEWER, OLDER], [OLDER, NEWER]], ids=["newer-first", "older-first"]
)
@pytest.mark.parametrize("chunk_size", [1, 1000])
def test_the_newest_copy_of_an_order_wins_whatever_the_physical_order(
    db_urls, physical, chunk_size
):
    rows = [(0, "paid", "1.00", "2026-01-04")] + physical + [(2, "paid", "2.00", "2026-01-05")]
    result, rows_stored = load_keyless(db_urls, rows, chunk_size)
    assert (result.rows_read, result.inserted, result.duplicate_rows) == (3, 3, 1)
    assert rows_stored[1] == (1, "paid", "11.00", "2026-01-06T00:00:00.000000+00:00")
    assert "2026-01-05" in result.days_touched  # order 2's day; 1's old copy is not read


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 1000])
def test_copies_split_across_scan_batches_with_keys_of_different_lengths(db_urls, chunk_size):
    """The scan is in key order, numeric (9 before 10), so the copies of an order are
    adjacent and the last key of a batch waits for the next: with keys of one and two
    digits (text order would put 10 before 9) and batches that cut between two copies,
    each order is still staged once, its newest copy."""
    rows = [
        (10, "paid", "10.00", "2026-01-06"),
        (9, "paid", "9.00", "2026-01-05"),
        (9, "paid", "9.50", "2026-01-06"),
        (11, "paid", "11.00", "2026-01-06"),
        (100, "paid", "1.00", "2026-01-06"),
        (11, "paid", "11.50", "2026-01-07"),
    ]
    result, rows_stored = load_keyless(db_urls, rows, chunk_size)
    assert (result.rows_read, result.inserted, result.duplicate_rows) == (4, 4, 2)
    assert [(r[0], r[2]) for r in rows_stored] == [
        (9, "9.50"),
        (10, "10.00"),
        (11, "11.50"),
        (100, "1.00"),
    ]


def test_two_copies_with_the_same_updated_at_and_different_values_refuse_the_batch(db_urls):
    rows = [
        (0, "paid", "1.00", "2026-01-04"),
        (1, "paid", "11.00", "2026-01-06"),
        (1, "refunded", "11.00", "2026-01-06T00:00:00Z"),
        (2, "paid", "3.00", "2026-01-06"),
    ]
    source = keyless_source(db_urls["source"], rows)
    warehouse = make_engine(db_urls["warehouse"], role="warehouse")
    try:
        with pytest.raises(InvalidRowError) as err:
            load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
        assert err.value.key == {"order_id": 1} and "order 1:" in str(err.value)
        assert "Nothing was written" in str(err.value)
        assert (
            not sa.inspect(warehouse).has_table("orders")
            or warehouse_rows(db_urls["warehouse"]) == []
        )
        with source.begin() as conn:  # identical copies are one row
            conn.exec_driver_sql("UPDATE orders SET status = 'paid' WHERE order_id = 1")
        result = load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
        assert (result.inserted, result.duplicate_rows) == (3, 1)
    finally:
        source.dispose()
        warehouse.dispose()


def test_sqlite_reads_a_small_window_through_the_index_with_the_same_rows(tmp_path, monkeypatch):
    """SQLite would scan the whole table in key order for "updated_at >= … ORDER BY
    order_id"; a small window (an incremental run's lookback) is read through the
    updated_at index instead. Both plans give the same rows in the same order, and the
    index plan is chosen only for a window under SMALL_WINDOW rows and with an index."""
    from contextlib import closing

    from pipeline_assets import demo
    from pipeline_assets.core.db.engines import arrow_connect
    from pipeline_assets.core.source import scan as source

    engine = make_engine(f"sqlite:///{tmp_path / 'app.db'}", role="app")
    demo.init(engine)
    demo.generate(engine, orders=3_000, days=30, seed=3)
    src = source.inspect_source(engine, spec=ORDERS)
    start = datetime(2026, 1, 20, tzinfo=UTC)

    def scan(lo):
        return pa.Table.from_batches(list(source.scan_window(engine, src, UTC, lo, None)))

    def small(lo):
        with (
            closing(arrow_connect(engine, "SOURCE_DATABASE_URL")) as conn,
            closing(conn.cursor()) as cur,
        ):
            return source._small_sqlite_window(cur, src, UTC, lo, None)

    assert small(start) and not small(None)
    by_index = scan(start)
    monkeypatch.setattr(source, "SMALL_WINDOW", 1)  # every window is "large": key order
    assert not small(start)
    assert scan(start).equals(by_index)
    assert 0 < by_index.num_rows < 3_006
    assert by_index["order_id"].to_pylist() == sorted(by_index["order_id"].to_pylist(), key=int)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX orders_updated_at_idx")
    monkeypatch.setattr(source, "SMALL_WINDOW", 50_000)
    assert not small(start)  # without the index a count would scan the table itself
    assert scan(start).equals(by_index)
