"""verify, the match-source check and the new-rows observation, on every declared table.

The same story runs on ``orders`` and on ``payments`` (composite key, every type, NULLs,
Unicode), on SQLite and PostgreSQL: the source written with plain SQL
(:mod:`.table_sources`), the warehouse by real loads (``load_table``). What a user relies
on: verify and the check name the rows that differ by their table and key (``order 3``,
``payments (payment_id=3, attempt=1)``), tell a deleted row from one that moved, print
the range loads that repair it (which, run, make verify agree), check each day file of a
table against its own view and bytes, and the sensor's observation notices a new row and
a re-stamped one in the table's own key and cursor.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, timedelta
from pathlib import Path

import pytest

from pipeline_assets.core import sensing
from pipeline_assets.core.daily_files import serialize_day
from pipeline_assets.core.daily_files.views import day_rows
from pipeline_assets.core.times import UTC
from pipeline_assets.core.verify import DIFFERS_FROM_SOURCE, FILE_DIFFERS, Repairs
from pipeline_assets.core.verify.horizon import newest_row, reconcile_horizon
from pipeline_assets.core.warehouse.declaration import files_fingerprint

from .conftest import NOW
from .table_sources import TableSource, check, load, stamp
from .tables import TABLES

DAYS = {
    1: "2026-01-03T10:00",
    2: "2026-01-03T11:00",
    3: "2026-01-05T09:00",
    4: "2026-01-05T12:00",
    5: "2026-01-08T08:00",
    6: "2026-01-08T23:59",
}


@pytest.fixture(params=list(TABLES))
def table(request, engines):
    """(TableSource, warehouse) of one declared table: six rows over three days, loaded."""
    source, warehouse = engines
    app = TableSource(source, TABLES[request.param])
    app.create()
    for n, at in DAYS.items():
        app.put(n, stamp(at), filed=n != 2)
    load(app, warehouse)
    return app, warehouse


def test_verify_names_the_rows_that_differ_by_key_and_its_repair_makes_it_agree(table, tmp_path):
    app, warehouse = table
    spec = app.spec
    agreed = check(app, warehouse, tmp_path)
    assert agreed.ok and (agreed.source_rows, agreed.warehouse_rows) == (6, 6)
    assert [p.kind for p in agreed.problems] == ["not built"] * 3  # no file yet: info only

    app.delete(3)  # deleted by the app
    app.put(4, stamp("2026-01-05T12:00"), version=1)  # changed, same stamp: not loaded
    app.put(7, stamp("2026-01-08T09:00"))  # new, not loaded
    result = check(app, warehouse, tmp_path)
    assert result.failing_days == ["2026-01-05", "2026-01-08"]
    differs = {p.day: p for p in result.problems if p.kind == DIFFERS_FROM_SOURCE}
    gone = "order 3" if spec.name == "orders" else "payments (payment_id=3, attempt=1)"
    assert differs["2026-01-05"].detail == (
        "source 1 rows, warehouse 2 rows: 1 changed since the last load, 1 only in the "
        f"warehouse: the source no longer has them ({gone}); a range load of the day "
        "deletes them"
    )
    assert differs["2026-01-08"].detail == "source 3 rows, warehouse 2 rows: 1 not loaded"
    assert result.repair == tuple(
        Repairs(spec).commands(["2026-01-05", "2026-01-08"], ["2026-01-05", "2026-01-08"])
    )
    assert all(spec.name in command for command in result.repair)
    assert (
        differs["2026-01-05"].subject,
        json.loads(json.dumps(result.to_json()))["days"][1].get("deleted_keys"),
    ) == (
        (None, None)
        if spec.name == "orders"
        else ("payments", [dict(zip(spec.primary_key, app.key(3), strict=True))])
    )

    load(app, warehouse, "2026-01-05", "2026-01-09")  # what the printed command runs
    assert not [
        p for p in check(app, warehouse, tmp_path).problems if p.kind == DIFFERS_FROM_SOURCE
    ]


def test_the_check_tells_a_deleted_row_from_one_that_moved(table):
    app, warehouse = table
    app.delete(5)
    app.restamp(6, stamp("2025-12-01T10:00"))  # moved before the window: never deleted
    _, days, verdict = reconcile_horizon(
        app.engine, warehouse, UTC, reconcile_days=7, spec=app.spec
    )
    key = app.key(5)[0] if len(app.spec.primary_key) == 1 else app.key(5)
    assert {
        d: (c.only_in_warehouse, c.deleted_ids) for d, c in days.items() if c.only_in_warehouse
    } == {"2026-01-08": (1, [key])}
    assert verdict.differing == ["2026-01-08"] and not verdict.passed
    deleted = "order 5" if app.spec.name == "orders" else "payments (payment_id=5, attempt=3)"
    assert f"2026-01-08: 1 ({deleted})" in verdict.description
    assert newest_row(warehouse, app.spec) == stamp("2026-01-08T23:59")


def _commit(folder: Path, files: dict[str, bytes], shape: str) -> None:
    """Day files committed as docs/reader-protocol.md lays them out (not by the writer),
    in the declared ``shape`` (the file set's fingerprint)."""
    (folder / "_committed").mkdir(parents=True)
    manifest = "_manifest_r1.json"
    entries = {
        day: {"rows": len(json.loads(data)), "sha256": hashlib.sha256(data).hexdigest()}
        for day, data in files.items()
    }
    for day, data in files.items():
        (folder / f"{day}.json").write_bytes(data)
        (folder / "_committed" / f"{day}.json").write_text(
            json.dumps(
                {"day": day, "manifest": manifest, "run_id": "r1", "sequence": 1, **entries[day]}
            )
        )
    (folder / manifest).write_text(
        json.dumps(
            {
                "days_written": sorted(files),
                "files": entries,
                "run_id": "r1",
                "sequence": 1,
                "watermark": None,
                "written_at": NOW.isoformat(),
                "declaration": shape,
            }
        )
    )
    (folder / "_committed" / "_head.json").write_text(
        json.dumps({"manifest": manifest, "sequence": 1, "state": "done"})
    )


def test_each_day_file_is_checked_against_its_own_view(table, tmp_path):
    app, warehouse = table
    view = app.spec.daily_files[0]
    days = [(date(2026, 1, 1) + timedelta(n)).isoformat() for n in range(26)]
    files = {
        day: serialize_day(day, rows, app.spec, view)
        for day, rows in day_rows(warehouse, days, UTC, app.spec, view).items()
    }
    assert json.loads(files["2026-01-03"]) and len(json.loads(files["2026-01-03"])) == 1
    _commit(tmp_path, files, files_fingerprint(app.spec, view))
    assert check(app, warehouse, tmp_path).problems == ()

    app.put(4, stamp("2026-01-05T12:00"), version=1)  # loaded after the file was built
    load(app, warehouse, "2026-01-05", "2026-01-06")
    [problem] = check(app, warehouse, tmp_path).problems
    assert (problem.day, problem.kind, problem.fails) == ("2026-01-05", FILE_DIFFERS, True)
    held = "paid order(s)" if app.spec.name == "orders" else "row(s) of captured_payments"
    gone = "paid" if app.spec.name == "orders" else "in captured_payments"
    assert problem.detail == (
        f"the committed file has 2 row(s), the warehouse 2 {held}: 0 "
        f"missing from the file, 0 no longer {gone} on this day, 1 "
        "with other values"
    )
    assert problem.subject == (None if app.spec.name == "orders" else "captured_payments")
    assert problem.repair == (Repairs(app.spec).rebuild("2026-01-05", "2026-01-05", view),)


def test_the_observation_notices_new_and_restamped_rows(table):
    app, warehouse = table
    spec, since = app.spec, stamp("2026-01-05T00:00")
    base = sensing.observe(app.engine, UTC, since, spec=spec)
    assert (base.rows, base.id_sum) == (4, 3 + 4 + 5 + 6)
    assert base.newest is not None and base.newest.startswith("2026-01-08")
    assert sensing.observe(app.engine, UTC, since, spec=spec) == base
    app.restamp(5, stamp("2026-01-08T08:30"))  # re-stamped, not the newest
    touched = sensing.observe(app.engine, UTC, since, spec=spec)
    assert (touched.rows, touched.id_sum, touched.newest) == (base.rows, base.id_sum, base.newest)
    assert touched.fingerprint != base.fingerprint
    app.put(8, stamp("2026-01-06T10:00"))  # a late row
    assert sensing.observe(app.engine, UTC, since, spec=spec).rows == 5
    first = sensing.observe(app.engine, UTC, None, spec=spec)
    assert first.window_start is None and first.max_id == 8
    assert f"highest {spec.primary_key[0]} 8, newest {spec.cursor}" in first.describe(spec)
    tick = sensing.check_source(
        app.engine, warehouse, tz=UTC, lookback_days=2, cursor=None, spec=spec
    )
    assert tick.run and tick.observation.start == stamp("2026-01-06T23:59")


@pytest.mark.parametrize("spec", TABLES.values(), ids=list(TABLES))
def test_the_check_and_verify_count_every_day_alike_through_every_reader(
    spec, tmp_path, monkeypatch
):
    """The per-day figures have one home: the check's totals (both sides read at once)
    and verify's match by key are equal day by day, on a few hundred rows with a change
    not loaded yet; and the same again when the SQLite warehouse is read by the reader
    process (the Arrow driver in a process of its own, booleans as 0/1) instead of the
    engine's driver."""
    from pipeline_assets.core.db.engines import make_engine
    from pipeline_assets.core.verify import compare_days, compare_rows, differing_days, sides

    source = make_engine(f"sqlite:///{tmp_path / 'app.db'}", role="app")
    warehouse = make_engine(f"sqlite:///{tmp_path / 'warehouse.db'}", role="warehouse")
    try:
        app = TableSource(source, spec)
        app.create()
        for n in range(1, 301):
            app.put(n, stamp(f"2026-01-{1 + n % 20:02d}T{n % 24:02d}:00"), filed=n % 3 > 0)
        load(app, warehouse)
        app.put(150, stamp("2026-01-24T10:00"), version=2)
        days = [date(2026, 1, 1) + timedelta(days=n) for n in range(30)]

        def figures(counts):
            return {
                d: (
                    c.source_rows,
                    c.source_checksum,
                    c.source_paid,
                    c.warehouse_rows,
                    c.warehouse_checksum,
                    c.warehouse_paid,
                )
                for d, c in counts.items()
            }

        matched, n_source, n_warehouse = compare_rows(
            source, warehouse, UTC, batch_rows=40, spec=spec
        )
        totals = compare_days(source, warehouse, UTC, days, spec=spec)
        assert (n_source, n_warehouse) == (300, 300)
        assert figures(totals) == figures(matched)
        assert (
            differing_days(totals)
            == [d for d, c in matched.items() if not c.agrees]
            == ["2026-01-11", "2026-01-24"]
        )
        monkeypatch.setattr(sides, "SMALL_WINDOW", 10)
        monkeypatch.setattr(sides, "READER_ROWS", 10)
        assert compare_rows(source, warehouse, UTC, batch_rows=40, spec=spec) == (
            matched,
            n_source,
            n_warehouse,
        )
        assert figures(compare_days(source, warehouse, UTC, days, spec=spec)) == figures(totals)
    finally:
        source.dispose()
        warehouse.dispose()
