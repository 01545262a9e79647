"""The incremental load through the core, on a real SQLite file and a real PostgreSQL.

The chapter's story (orders 105 and 186), retries after a lost acknowledgement, bad
input that must leave everything as it was, and the row that lands exactly on the
watermark. Every test runs on both backends (``db_urls`` is parametrized).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from pipeline_assets import demo
from pipeline_assets.core.crash import SimulatedCrash
from pipeline_assets.core.db.state import batches, metadata, watermark_history
from pipeline_assets.core.errors import InvalidRowError, LoadError
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, to_instant, zone
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets_tests.orders import load_orders

from .conftest import NOW
from .plain import warehouse_rows


def run(engines, *, lookback=2, tz=UTC, **kw):
    source, warehouse = engines
    return load_orders(source, warehouse, tz=tz, lookback_days=lookback, now=NOW, **kw)


def app_set(engines, order_id, status, amount, updated_at, tz=UTC):
    demo.set_order(engines[0], order_id, status=status, amount=amount, updated_at=updated_at, tz=tz)


def snapshot(engines) -> dict[str, list[tuple]]:
    """Every warehouse table, every row: what 'unchanged, byte for byte' is checked against."""
    out = {}
    with engines[1].connect() as conn:
        for table in metadata.sorted_tables:
            if sa.inspect(conn).has_table(table.name):
                out[table.name] = [
                    tuple(r)
                    for r in conn.execute(sa.select(table).order_by(*table.primary_key.columns))
                ]
    return out


def stamp(day: str) -> str:
    return to_instant(day, UTC).isoformat(timespec="microseconds")


def test_the_chapter_story(engines, db_urls):
    demo.init(engines[0])

    first = run(engines)  # no watermark yet: read everything
    assert (first.window_start, first.rows_read, first.inserted) == (None, 6, 6)
    assert first.watermark_before is None
    assert first.watermark_after == to_instant("2026-01-21", UTC)
    assert first.days_touched == (
        "2026-01-03",
        "2026-01-08",
        "2026-01-12",
        "2026-01-15",
        "2026-01-19",
        "2026-01-21",
    )

    again = run(engines)  # nothing new: the window is re-read, nothing is stored twice
    assert again.window_start == to_instant("2026-01-19", UTC)
    assert (again.rows_read, again.inserted, again.updated, again.unchanged) == (2, 0, 0, 2)
    assert again.days_touched == ()
    assert len(warehouse_rows(db_urls["warehouse"])) == 6

    app_set(engines, 105, "paid", "22.00", "2026-01-25")  # 105 is paid
    paid = run(engines)
    assert (paid.inserted, paid.updated, paid.unchanged) == (0, 1, 1)
    assert paid.days_touched == ("2026-01-25",)
    assert paid.watermark_after == to_instant("2026-01-25", UTC)

    app_set(engines, 186, "paid", "30.00", "2026-01-24")  # late: older than the watermark
    late = run(engines)
    assert late.window_start == to_instant("2026-01-23", UTC)
    assert (late.inserted, late.updated, late.unchanged) == (1, 0, 1)
    assert late.days_touched == ("2026-01-24",)
    assert late.watermark_after == late.watermark_before == to_instant("2026-01-25", UTC)

    assert warehouse_rows(db_urls["warehouse"]) == [
        (101, "paid", "40.00", stamp("2026-01-03")),
        (102, "paid", "15.50", stamp("2026-01-08")),
        (103, "refunded", "30.00", stamp("2026-01-12")),
        (104, "paid", "12.75", stamp("2026-01-15")),
        (105, "paid", "22.00", stamp("2026-01-25")),
        (106, "paid", "18.20", stamp("2026-01-21")),
        (186, "paid", "30.00", stamp("2026-01-24")),
    ]
    kinds = [(c.kind, c.new_value[:10]) for c in wm.history(engines[1], spec=ORDERS)]
    assert kinds == [("load", "2026-01-21"), ("load", "2026-01-25")]


def test_an_unchanged_source_is_recognized_as_the_same_batch(engines):
    demo.init(engines[0])
    run(engines)
    second, third = run(engines), run(engines)
    assert not second.skipped and third.skipped  # same window, same rows: same batch id
    assert third.batch_id == second.batch_id
    with engines[1].connect() as conn:
        ledger = conn.execute(sa.select(sa.func.count()).select_from(batches)).scalar()
    assert ledger == 2  # each batch once


@pytest.mark.parametrize("point", ["load_before_commit", "load_after_commit"])
def test_a_retry_after_a_crash_stores_nothing_twice(engines, db_urls, monkeypatch, tmp_path, point):
    demo.init(engines[0])
    run(engines)
    app_set(engines, 105, "paid", "22.00", "2026-01-25")
    app_set(engines, 186, "paid", "30.00", "2026-01-24")
    monkeypatch.setenv("PIPELINE_CRASH_AT", point)
    monkeypatch.setenv("PIPELINE_CRASH_MODE", "raise")
    monkeypatch.setenv("PIPELINE_CRASH_ONCE_FILE", str(tmp_path / "crashed"))
    with pytest.raises(SimulatedCrash):
        run(engines)

    retry = run(engines)
    rows = warehouse_rows(db_urls["warehouse"])
    assert len(rows) == len({r[0] for r in rows}) == 7
    if point == "load_after_commit":  # the write had landed: the retry changes nothing
        assert (retry.inserted, retry.updated) == (0, 0)
        assert retry.unchanged == retry.rows_read > 0
    else:  # rolled back: the retry does the work once
        assert (retry.inserted, retry.updated) == (1, 1)
    assert wm.current(engines[1], table=ORDERS.name) == to_instant("2026-01-25", UTC)


def test_a_retried_range_batch_is_skipped(engines):
    demo.init(engines[0])
    window = dict(start=to_instant("2026-01-01", UTC), end=to_instant("2026-01-16", UTC))
    first, retry = run(engines, **window), run(engines, **window)
    assert first.inserted == 4 and not first.skipped
    assert retry.skipped and retry.batch_id == first.batch_id
    assert (retry.inserted, retry.updated, retry.unchanged) == (0, 0, 4)


@pytest.mark.parametrize(
    "bad, column",
    [
        (("paid", "22,00", "2026-01-25"), "amount"),
        (("paid", "22.00", "25/01/2026"), "updated_at"),
        ((None, "22.00", "2026-01-25"), "status"),
    ],
)
def test_bad_input_leaves_warehouse_and_watermark_exactly_as_they_were(engines, bad, column):
    demo.init(engines[0])
    run(engines)
    app_set(engines, 105, "paid", "22.00", "2026-01-25")  # a good change in the same batch
    status, amount, updated_at = bad
    with engines[0].begin() as conn:  # the app writes a broken row
        conn.execute(
            demo.source_orders.insert().values(
                order_id=187, status=status, amount=amount, updated_at=updated_at
            )
        )
    before = snapshot(engines)

    with pytest.raises(InvalidRowError) as err:
        run(engines, chunk_size=1)  # the good row's chunk is upserted before 187 is seen

    assert err.value.key == {"order_id": 187} and err.value.column == column
    assert "order 187" in str(err.value) and repr(
        bad[{"status": 0, "amount": 1, "updated_at": 2}[column]]
    ) in str(err.value)
    assert snapshot(engines) == before


def test_a_row_equal_to_the_watermark_arriving_later_is_not_lost(engines, db_urls):
    demo.init(engines[0])
    run(engines, lookback=0)
    assert wm.current(engines[1], table=ORDERS.name) == to_instant("2026-01-21", UTC)
    app_set(engines, 190, "paid", "9.99", "2026-01-21")  # exactly the watermark, after the run
    result = run(engines, lookback=0)
    assert result.window_start == to_instant("2026-01-21", UTC)
    assert result.inserted == 1
    assert 190 in [r[0] for r in warehouse_rows(db_urls["warehouse"])]


def test_an_explicit_range_reads_exactly_it_and_leaves_the_watermark(engines, db_urls):
    demo.init(engines[0])
    run(engines)
    app_set(engines, 103, "paid", "31.00", "2026-01-12T23:59:59")
    app_set(engines, 104, "paid", "12.75", "2026-01-16")  # the end is exclusive
    result = run(engines, start=to_instant("2026-01-12", UTC), end=to_instant("2026-01-16", UTC))
    assert (result.kind, result.rows_read, result.updated) == ("range", 1, 1)
    assert result.watermark_after == result.watermark_before == to_instant("2026-01-21", UTC)
    assert wm.current(engines[1], table=ORDERS.name) == to_instant("2026-01-21", UTC)
    stored = warehouse_rows(db_urls["warehouse"])
    assert stored[2] == (103, "paid", "31.00", stamp("2026-01-12T23:59:59"))
    assert stored[3][3] == stamp("2026-01-15")  # 104 not re-read


def test_an_empty_range_is_refused(engines):
    with pytest.raises(LoadError, match="empty"):
        run(engines, start=to_instant("2026-01-12", UTC), end=to_instant("2026-01-12", UTC))


def test_days_touched_include_the_old_day_of_a_paid_row_that_moved(engines):
    demo.init(engines[0])
    run(engines)
    app_set(engines, 106, "paid", "18.20", "2026-01-22")  # moved from the 21st
    app_set(engines, 104, "refunded", "12.75", "2026-01-22")  # no longer paid on the 15th
    result = run(engines, lookback=10)
    assert result.days_touched == ("2026-01-15", "2026-01-21", "2026-01-22")


def test_mixed_forms_and_offsets_are_read_as_instants(engines, db_urls):
    """Text timestamps with offsets sort wrongly as strings; the window must not miss them."""
    demo.init(engines[0])
    run(engines)  # watermark 2026-01-21T00:00Z, window from the 19th
    # 2026-01-19T01:00+05:00 is 2026-01-18T20:00Z: outside the window though its text is in it
    app_set(engines, 201, "paid", "1.00", "2026-01-19T01:00:00+05:00")
    # 2026-01-18T22:00-05:00 is 2026-01-19T03:00Z: inside, though its text sorts before
    app_set(engines, 202, "paid", "2.00", "2026-01-18T22:00:00-05:00")
    app_set(engines, 203, "paid", "3.00", "2026-01-22T10:00:00Z")
    result = run(engines)
    ids = [r[0] for r in warehouse_rows(db_urls["warehouse"])]
    assert 202 in ids and 203 in ids and 201 not in ids
    assert result.inserted == 2
    assert result.watermark_after == to_instant("2026-01-22T10:00:00Z", UTC)


def test_the_time_zone_decides_the_day(engines):
    ny = zone("America/New_York")
    demo.init(engines[0])
    app_set(engines, 300, "paid", "5.00", "2026-01-25T03:00:00+00:00", tz=ny)
    result = run(engines, tz=ny)
    assert "2026-01-24" in result.days_touched and "2026-01-25" not in result.days_touched


def test_plan_is_a_dry_run_that_writes_nothing(engines):
    demo.init(engines[0])
    run(engines)
    app_set(engines, 105, "paid", "22.00", "2026-01-25")
    before = snapshot(engines)
    plan = run(engines, dry_run=True)
    assert plan.dry_run and (plan.updated, plan.unchanged) == (1, 1)
    assert plan.watermark_after == to_instant("2026-01-25", UTC)
    assert snapshot(engines) == before


def test_streaming_in_small_chunks_gives_the_same_result(engines):
    demo.init(engines[0])
    demo.generate(engines[0], orders=500, days=5, seed=7)
    whole = run(engines, dry_run=True, chunk_size=10_000)
    chunked = run(engines, chunk_size=7)
    assert (chunked.rows_read, chunked.inserted) == (whole.rows_read, whole.inserted) == (506, 506)
    assert chunked.batch_id == whole.batch_id and chunked.days_touched == whole.days_touched


def test_the_watermark_history_records_loads_and_rewinds(engines):
    demo.init(engines[0])
    run(engines)
    later = NOW + timedelta(hours=1)
    old, new = wm.rewind(
        engines[1], to_instant("2026-01-10", UTC), reason="reload Jan", at=later, table=ORDERS.name
    )
    assert old == to_instant("2026-01-21", UTC) and new == to_instant("2026-01-10", UTC)
    with pytest.raises(wm.WatermarkError, match="moves the watermark back"):
        wm.rewind(
            engines[1], to_instant("2026-01-30", UTC), reason="no", at=later, table=ORDERS.name
        )
    with pytest.raises(wm.WatermarkError, match="reason"):
        wm.rewind(
            engines[1], to_instant("2026-01-01", UTC), reason=" ", at=later, table=ORDERS.name
        )
    result = run(engines)  # after a rewind the load reads from the rewound point again
    assert result.window_start == to_instant("2026-01-08", UTC)
    assert result.watermark_after == to_instant("2026-01-21", UTC)
    with engines[1].connect() as conn:
        rows = conn.execute(
            sa.select(watermark_history.c.kind, watermark_history.c.reason).order_by(
                watermark_history.c.id
            )
        ).all()
    assert [tuple(r) for r in rows] == [("load", None), ("rewind", "reload Jan"), ("load", None)]


def test_late_arrivals_are_measured_against_the_previous_watermark(engines):
    demo.init(engines[0])
    run(engines)
    app_set(engines, 105, "paid", "22.00", "2026-01-25")
    assert run(engines).late_rows == 0  # newer than the watermark: on time
    app_set(engines, 186, "paid", "30.00", "2026-01-24T06:00:00Z")  # 18 h behind it
    result = run(engines)
    assert (result.late_rows, result.max_lateness) == (1, timedelta(hours=18))
    assert run(engines).late_rows == 0  # re-read but unchanged: not an arrival


def test_rows_from_the_future_are_loaded_but_do_not_drag_the_watermark(engines):
    demo.init(engines[0])
    app_set(engines, 666, "paid", "1.00", "2027-01-01T00:00:00Z")  # the app's clock is wrong
    result = run(engines)  # NOW is 2026-01-27T06:00Z
    assert result.inserted == 7 and result.future_rows == 1
    assert result.future_keys == (666,)
    assert result.watermark_after == to_instant("2026-01-21", UTC)
    app_set(engines, 107, "paid", "5.00", "2026-01-22")  # still caught by the next run
    assert run(engines).inserted == 1


def test_a_sqlite_warehouse_made_with_a_bigint_key_keeps_working(tmp_path):
    """New SQLite warehouses declare order_id INTEGER (the rowid: one B-tree); one created
    before, with BIGINT (a separate key index), loads and updates the same rows."""
    from pipeline_assets.core.db.engines import make_engine

    results = {}
    for name, ddl in (("new", None), ("old", "BIGINT")):
        source = make_engine(f"sqlite:///{tmp_path / f'{name}-app.db'}", role="app")
        warehouse_url = f"sqlite:///{tmp_path / f'{name}-wh.db'}"
        warehouse = make_engine(warehouse_url, role="warehouse")
        demo.init(source)
        if ddl:
            with warehouse.begin() as conn:
                conn.exec_driver_sql(
                    f"CREATE TABLE orders (order_id {ddl} NOT NULL, status TEXT NOT NULL, "
                    "amount TEXT NOT NULL, updated_at VARCHAR(32) NOT NULL, "
                    "PRIMARY KEY (order_id))"
                )
                conn.exec_driver_sql("CREATE INDEX orders_updated_at_idx ON orders (updated_at)")
        engines = (source, warehouse)
        first = run(engines)
        app_set(engines, 105, "paid", "22.00", "2026-01-25")
        second = run(engines)
        with warehouse.connect() as conn:
            keyed = conn.exec_driver_sql(
                "SELECT count(*) FROM sqlite_master WHERE name LIKE 'sqlite_autoindex_orders%'"
            ).scalar()
        results[name] = (
            (first.inserted, second.updated, second.days_touched),
            warehouse_rows(warehouse_url),
            keyed,
        )
        source.dispose()
        warehouse.dispose()
    assert results["new"][:2] == results["old"][:2]
    assert results["new"][0] == (6, 1, ("2026-01-25",))
    assert (results["new"][2], results["old"][2]) == (0, 1)  # rowid key vs a key index


def test_the_scan_read_ahead_keeps_order_errors_and_stops_cleanly():
    """The load reads the next batches in a thread while it writes one (``ahead``): items
    come in order, an error of the scan is raised after the items before it, and a
    consumer that stops early (a failed write) stops the scan, whose generator is closed."""
    import threading

    from pipeline_assets.core.source.scan import ahead

    assert list(ahead(iter(range(50)))) == list(range(50))

    def failing():
        yield from range(3)
        raise InvalidRowError("order 4", "amount", "1e3", "not a plain decimal")

    seen = []
    with pytest.raises(InvalidRowError, match="order 4"):
        for item in ahead(failing()):
            seen.append(item)
    assert seen == [0, 1, 2]

    closed = threading.Event()

    def endless():
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            closed.set()

    for item in ahead(endless()):
        if item == 5:
            break
    assert closed.is_set()
    assert not [t for t in threading.enumerate() if t.name == "pipeline-assets-scan"]
