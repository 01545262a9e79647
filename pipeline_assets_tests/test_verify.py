"""``pipeline-assets verify``: source vs warehouse per day, day files vs manifests and warehouse.

State is built with core functions on real SQLite files under tmp_path (and once on the
real PostgreSQL): the demo source, real loads, and ``paid_orders`` runs played through
``paid_orders_by_day`` + ``write_day_files``, exactly what the assets do. The end-to-end
case runs the printed repair commands with the real ``dagster`` CLI and checks that verify
then agrees.

verify rebuilds each day's expected bytes with the same code that wrote them, so two
cases commit files computed without it: the source read with the plain driver, the day
of each paid order and the bytes of each file by the rules of :mod:`.model` and
docs/reader-protocol.md, and the manifest, pointers and head written by hand.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from datetime import date, datetime, timedelta
from functools import partial
from pathlib import Path
from uuid import uuid4

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_assets import demo
from pipeline_assets.core.commands import rebuild_command, repair_commands
from pipeline_assets.core.days import days_between, runs
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.db.schema import warehouse_table
from pipeline_assets.core.load.deletions import DeletePolicy
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, canonical, to_instant, zone
from pipeline_assets.core.times.arrays import days_of
from pipeline_assets.core.verify import (
    DIFFERS_FROM_SOURCE,
    FILE_DIFFERS,
    FILE_NOT_BUILT,
    FILE_UNCOMMITTED,
)
from pipeline_assets.core.verify.compare import compare_days, differing_days
from pipeline_assets_tests.orders import (
    compare_orders,
    load_orders,
    orders_range_command,
    paid_orders_by_day,
)

from . import plain
from .conftest import NOW
from .model import Model, Version, day_file_bytes, instant_of
from .support import RUNS_IN_PROCESS
from .worlds import Pipeline

orders = warehouse_table(ORDERS)  # orders' warehouse table

BIN = Path(sys.executable).parent
DEFS = "dagster asset materialize -m pipeline_assets.definitions"
ALL_DAYS = days_between(date(2026, 1, 1), date(2026, 1, 26))  # every partition before NOW


# --- pure rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "days, expected",
    [
        ([], []),
        (["2026-01-03"], [("2026-01-03", "2026-01-03")]),
        (["2026-01-04", "2026-01-03", "2026-01-03"], [("2026-01-03", "2026-01-04")]),
        (
            ["2026-01-03", "2026-01-05"],
            [("2026-01-03", "2026-01-03"), ("2026-01-05", "2026-01-05")],
        ),
        (
            ["2026-02-28", "2026-03-01", "2026-01-31"],  # month ends: calendar days, not strings
            [("2026-01-31", "2026-01-31"), ("2026-02-28", "2026-03-01")],
        ),
    ],
)
def test_consecutive_days_share_one_command(days, expected):
    """One run per range of consecutive days: fewer runs, and --partition-range needs them."""
    assert runs(days) == expected


@pytest.mark.parametrize(
    "make, first, last, expected",
    [
        (
            orders_range_command,
            "2026-01-25",
            "2026-01-25",
            f"{DEFS} --select orders --config-json "
            """'{"ops": {"orders": {"config": {"start": "2026-01-25", "end": "2026-01-26"}}}}'""",
        ),
        (
            orders_range_command,
            "2026-01-30",
            "2026-02-01",
            f"{DEFS} --select orders --config-json "
            """'{"ops": {"orders": {"config": {"start": "2026-01-30", "end": "2026-02-02"}}}}'""",
        ),
        (
            partial(rebuild_command, spec=ORDERS),
            "2026-01-25",
            "2026-01-25",
            f"{DEFS} --select paid_orders,daily_revenue --partition 2026-01-25",
        ),
        (
            partial(rebuild_command, spec=ORDERS),
            "2026-01-24",
            "2026-01-26",
            f"{DEFS} --select paid_orders,daily_revenue --partition-range 2026-01-24...2026-01-26",
        ),
    ],
)
def test_repair_commands_are_the_contract_commands(make, first, last, expected):
    """The exact text a user pastes: an orders range ends the day after the last day."""
    assert make(first, last) == expected


def test_loads_come_before_the_rebuilds_that_read_them():
    assert repair_commands(["2026-01-25"], ["2026-01-19", "2026-01-25"], spec=ORDERS) == [
        orders_range_command("2026-01-25", "2026-01-25"),
        rebuild_command("2026-01-19", "2026-01-19", spec=ORDERS),
        rebuild_command("2026-01-25", "2026-01-25", spec=ORDERS),
    ]


# --- state built with core ----------------------------------------------------------------


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def pipeline(request, tmp_path: Path):
    """The demo pipeline with its day files in a local folder, or in a bucket."""
    data = tmp_path / "data"
    data.mkdir()
    in_bucket = {}
    if request.param == "s3":
        in_bucket["PAID_ORDERS_URL"] = request.getfixturevalue("bucket") + "/paid_orders"
    p = Pipeline(
        data, f"sqlite:///{data / 'app.db'}", f"sqlite:///{data / 'warehouse.db'}", **in_bucket
    )
    demo.init(p.source)
    yield p
    p.close()


@pytest.fixture
def built(pipeline):
    """Loaded, and every day of January up to yesterday built: everything agrees."""
    pipeline.load()
    pipeline.build(ALL_DAYS)
    return pipeline


def problems(result) -> list[tuple[str, str, bool]]:
    return [(p.day, p.kind, p.fails) for p in result.problems]


# --- the cases ------------------------------------------------------------------------------


def test_everything_agrees_exit_0(built, cli):
    code, out, err = cli("verify", environ=built.env())
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == (
        "source vs warehouse: 6 days, 6 source rows, 6 warehouse rows, "
        "0 day(s) differ (time zone UTC)"
    )
    assert lines[1] == (
        "day files: 26 days with a file, 26 committed, 26 equal to the "
        "warehouse; 0 day(s) not built"
    )
    assert lines[-1] == "OK: source, warehouse and committed day files agree"

    code, out, _ = cli("verify", "--json", environ=built.env())
    report = json.loads(out)
    assert (code, report["ok"], report["exit_code"]) == (0, True, 0)
    assert report["problems"] == [] and report["repair"] == [] and report["failing_days"] == []
    assert [d["day"] for d in report["days"]] == [
        "2026-01-03",
        "2026-01-08",
        "2026-01-12",
        "2026-01-15",
        "2026-01-19",
        "2026-01-21",
    ]
    for day in report["days"]:
        assert day["source_rows"] == day["warehouse_rows"] == 1
        assert day["source_checksum"] == day["warehouse_checksum"]
    assert all(f["state"] == "committed" and f["matches_warehouse"] for f in report["files"])


def test_a_source_change_not_yet_loaded_lists_both_days_with_one_orders_run(built, cli):
    # 105 pending on 01-19 becomes paid on 01-25: the warehouse still has it on 01-19.
    demo.set_order(
        built.source, 105, status="paid", amount="22.00", updated_at="2026-01-25", tz=UTC
    )
    result = built.verify()
    assert problems(result) == [
        ("2026-01-19", DIFFERS_FROM_SOURCE, True),
        ("2026-01-25", DIFFERS_FROM_SOURCE, True),
    ]
    load_0125 = orders_range_command("2026-01-25", "2026-01-25")
    # 105 was not paid on 01-19, so that file stays right: only 01-25 is rebuilt
    rebuild_0125 = rebuild_command("2026-01-25", "2026-01-25", spec=ORDERS)
    assert result.problems[0].repair == result.problems[1].repair == (load_0125, rebuild_0125)
    assert result.repair == (load_0125, rebuild_0125)
    assert (
        "source 0 rows, warehouse 1 rows: 1 changed since the last load; the source now "
        "puts them on 2026-01-25" in result.problems[0].detail
    )

    code, out, err = cli("verify", environ=built.env())
    assert (code, err) == (1, "")
    assert (
        f"FAIL 2026-01-25 {DIFFERS_FROM_SOURCE}: source 1 rows, warehouse 0 rows: 1 changed "
        "since the last load" in out
    )
    assert f"     repair: {load_0125}" in out
    assert out.splitlines()[-4:] == [
        "FAILED: 2 day(s) need repair: 2026-01-19, 2026-01-25",
        "to repair, run in this order:",
        *(f"  {command}" for command in result.repair),
    ]

    # the repair, played through core: the range load, then the rebuild
    load_orders(
        built.source,
        built.warehouse,
        tz=UTC,
        lookback_days=2,
        now=NOW,
        start=datetime(2026, 1, 25, tzinfo=UTC),
        end=datetime(2026, 1, 26, tzinfo=UTC),
    )
    assert problems(built.verify()) == [("2026-01-25", FILE_DIFFERS, True)]
    built.build(["2026-01-25"])
    assert built.verify().ok


def test_a_new_unloaded_order_is_not_loaded(built):
    demo.set_order(
        built.source, 200, status="paid", amount="9.99", updated_at="2026-01-24T23:59:59", tz=UTC
    )
    [problem] = built.verify().problems
    assert (problem.day, problem.kind) == ("2026-01-24", DIFFERS_FROM_SOURCE)
    assert problem.detail == "source 1 rows, warehouse 0 rows: 1 not loaded"


def test_a_file_edited_by_hand_is_uncommitted_with_the_partition_command(built, cli):
    path = built.folder / "2026-01-08.json"
    path.write_text(path.read_text().replace("15.50", "1550.00"))
    code, out, _ = cli("verify", environ=built.env())
    assert code == 1
    assert f"FAIL 2026-01-08 {FILE_UNCOMMITTED}: the file's sha256 " in out
    assert f"     repair: {DEFS} --select paid_orders,daily_revenue --partition 2026-01-08" in out
    report = json.loads(cli("verify", "--json", environ=built.env())[1])
    assert report["failing_days"] == ["2026-01-08"]
    assert report["repair"] == [rebuild_command("2026-01-08", "2026-01-08", spec=ORDERS)]
    [problem] = report["problems"]
    assert (problem["kind"], problem["fails"]) == (FILE_UNCOMMITTED, True)

    built.build(["2026-01-08"])
    assert cli("verify", environ=built.env())[0] == 0


def test_a_committed_file_older_than_the_warehouse_differs(built):
    demo.set_order(
        built.source, 102, status="refunded", amount="15.50", updated_at="2026-01-08", tz=UTC
    )
    # an explicit-range load (01-08 is before the lookback): the file of 01-08 is now stale
    load_orders(
        built.source,
        built.warehouse,
        tz=UTC,
        lookback_days=2,
        now=NOW,
        start=datetime(2026, 1, 8, tzinfo=UTC),
        end=datetime(2026, 1, 9, tzinfo=UTC),
    )
    [problem] = built.verify().problems
    assert (problem.day, problem.kind, problem.fails) == ("2026-01-08", FILE_DIFFERS, True)
    assert problem.detail == (
        "the committed file has 1 row(s), the warehouse 0 paid order(s):"
        " 0 missing from the file, 1 no longer paid on this day, "
        "0 with other values"
    )
    assert problem.repair == (rebuild_command("2026-01-08", "2026-01-08", spec=ORDERS),)


def test_paid_orders_without_a_file_are_not_built_and_fail_only_with_require_all(pipeline, cli):
    pipeline.load()
    pipeline.build(["2026-01-03", "2026-01-04"])  # 01-08, 01-15, 01-21 have paid orders
    code, out, _ = cli("verify", environ=pipeline.env())
    assert code == 0
    assert (
        f"INFO 2026-01-08 {FILE_NOT_BUILT}: 1 paid order(s) in the warehouse, no file yet "
        "(fails only with --require-all)"
    ) in out
    assert out.splitlines()[-1] == "OK: source, warehouse and committed day files agree"

    code, out, _ = cli("verify", "--require-all", environ=pipeline.env())
    assert code == 1
    assert (
        f"FAIL 2026-01-15 {FILE_NOT_BUILT}: 1 paid order(s) in the warehouse, no file yet\n" in out
    )
    report = json.loads(cli("verify", "--require-all", "--json", environ=pipeline.env())[1])
    assert report["failing_days"] == ["2026-01-08", "2026-01-15", "2026-01-21"]
    assert report["repair"] == [
        rebuild_command(d, d, spec=ORDERS) for d in ("2026-01-08", "2026-01-15", "2026-01-21")
    ]


def test_days_that_have_no_partition_are_never_required(pipeline):
    demo.set_order(
        pipeline.source, 300, status="paid", amount="5.00", updated_at="2026-01-27T01:00:00", tz=UTC
    )  # today: not over yet
    pipeline.load()
    pipeline.build(ALL_DAYS)
    result = pipeline.verify(require_all=True)
    assert result.ok
    [problem] = result.problems
    assert (problem.day, problem.kind, problem.fails, problem.repair) == (
        "2026-01-27",
        FILE_NOT_BUILT,
        False,
        (),
    )
    assert "not over" in problem.detail


def test_orders_deleted_from_the_source_are_named_and_one_range_load_repairs_them(built):
    with built.source.begin() as conn:  # 103 (refunded) and 104 (paid) erased in the app
        conn.execute(sa.text("DELETE FROM orders WHERE order_id IN (103, 104)"))
    result = built.verify()
    assert problems(result) == [
        ("2026-01-12", DIFFERS_FROM_SOURCE, True),
        ("2026-01-15", DIFFERS_FROM_SOURCE, True),
    ]
    assert result.problems[0].detail == (
        "source 0 rows, warehouse 1 rows: 1 only in the warehouse: the source no longer has "
        "them (order 103); a range load of the day deletes them; that is more than "
        "MAX_DELETE_SHARE=0.5 of the day, so its command allows the deletes"
    )
    assert "(order 104)" in result.problems[1].detail
    # each day held one order, all of it deleted: the printed loads allow that; 103 was
    # not paid, so its day file stays right; 104's day is rebuilt after the load
    load_0112 = orders_range_command("2026-01-12", "2026-01-12", allow_deletes=True)
    assert result.problems[0].repair == (load_0112,)
    assert result.repair == (
        load_0112,
        orders_range_command("2026-01-15", "2026-01-15", allow_deletes=True),
        rebuild_command("2026-01-15", "2026-01-15", spec=ORDERS),
    )

    # the repair, played through core with the printed config: the range loads, then the
    # rebuild
    for command in result.repair[:2]:
        config = json.loads(shlex.split(command)[-1])["ops"]["orders"]["config"]
        done = load_orders(
            built.source,
            built.warehouse,
            tz=UTC,
            lookback_days=2,
            now=NOW,
            start=to_instant(config["start"], UTC),
            end=to_instant(config["end"], UTC),
            deletes=DeletePolicy(allow=config["allow_deletes"]),
        )
        assert done.rows_deleted == 1 and config["start"] in done.days_touched
    built.build(["2026-01-15"])
    assert built.verify().ok


def test_a_source_that_lost_most_orders_gets_no_command_that_deletes_them(built):
    """A wrong database or a half-restored one looks like every order deleted: verify names
    them, but prints loads that refuse to delete, and says why."""
    with built.source.begin() as conn:
        conn.execute(sa.text("DELETE FROM orders WHERE order_id <> 106"))
    result = built.verify()
    assert len(result.problems) == 5
    assert all("allow_deletes" not in c for c in result.repair)
    assert (
        "the source no longer has 5 of the 6 order(s) compared, more than "
        "MAX_DELETE_SHARE=0.5: check SOURCE_DATABASE_URL" in result.problems[0].detail
    )


def test_the_day_range_reports_only_its_days_but_repairs_a_moved_row_where_it_went(built):
    demo.set_order(
        built.source, 104, status="paid", amount="12.75", updated_at="2026-01-23", tz=UTC
    )  # moved from 01-15 to 01-23
    result = built.verify(days_from=date(2026, 1, 10), days_to=date(2026, 1, 20))
    assert problems(result) == [("2026-01-15", DIFFERS_FROM_SOURCE, True)]
    assert [d.day for d in result.days] == ["2026-01-12", "2026-01-15", "2026-01-19"]
    assert [f.day for f in result.files] == days_between(date(2026, 1, 10), date(2026, 1, 20))
    assert result.repair == (
        orders_range_command("2026-01-23", "2026-01-23"),
        rebuild_command("2026-01-15", "2026-01-15", spec=ORDERS),
        rebuild_command("2026-01-23", "2026-01-23", spec=ORDERS),
    )


def test_days_follow_the_pipeline_time_zone(tmp_path, cli):
    data = tmp_path / "data"
    data.mkdir()
    ny = zone("America/New_York")
    p = Pipeline(
        data,
        f"sqlite:///{data / 'app.db'}",
        f"sqlite:///{data / 'warehouse.db'}",
        PIPELINE_TIMEZONE="America/New_York",
    )
    try:
        demo.init(p.source)
        p.load()
        demo.set_order(
            p.source,
            400,
            status="paid",
            amount="1.00",
            updated_at="2026-01-25T03:00:00+00:00",
            tz=ny,
        )  # 01-24 in New York
        code, out, _ = cli("verify", "--json", environ=p.env())
        report = json.loads(out)
        assert (code, report["timezone"], report["failing_days"]) == (
            1,
            "America/New_York",
            ["2026-01-24"],
        )
    finally:
        p.close()


# --- expected files from the test's own rules -------------------------------------------------


def files_by_the_rules(source_url: str, tz, days: list[str]) -> dict[str, bytes]:
    """Each day's file bytes, from the source read with the plain driver and model rules."""
    model = Model(tz=tz, lookback_days=2)
    for order_id, status, amount, updated_at in plain.source_orders(source_url):
        model.set_order(
            int(order_id), Version(status, amount, updated_at, instant_of(updated_at, tz))
        )
    model.commit_load(model.predict_load())  # everything loaded, as by the first load
    return {day: day_file_bytes(rows) for day, rows in model.paid_by_day(days).items()}


def commit_by_hand(folder: Path, files: dict[str, bytes], run_id: str, sequence: int) -> None:
    """Day files, their manifest, the pointers and the head, laid out as
    docs/reader-protocol.md describes them, without the package's writer."""
    (folder / "_committed").mkdir(parents=True, exist_ok=True)
    manifest = f"_manifest_{run_id}.json"
    entries = {}
    for day, data in files.items():
        (folder / f"{day}.json").write_bytes(data)
        entries[day] = {"rows": len(json.loads(data)), "sha256": hashlib.sha256(data).hexdigest()}
    (folder / manifest).write_text(
        json.dumps(
            {
                "days_written": sorted(files),
                "files": entries,
                "run_id": run_id,
                "sequence": sequence,
                "watermark": None,
                "written_at": NOW.isoformat(),
            }
        )
    )
    for day, entry in entries.items():
        (folder / "_committed" / f"{day}.json").write_text(
            json.dumps(
                {"day": day, "manifest": manifest, "run_id": run_id, "sequence": sequence, **entry}
            )
        )
    (folder / "_committed" / "_head.json").write_text(
        json.dumps({"manifest": manifest, "sequence": sequence, "state": "done"})
    )


@pytest.fixture
def new_york(tmp_path: Path):
    """The demo in America/New_York plus order 200, paid at 02:00 UTC on 01-10: 01-09 there."""
    data = tmp_path / "data"
    data.mkdir()
    p = Pipeline(
        data,
        f"sqlite:///{data / 'app.db'}",
        f"sqlite:///{data / 'warehouse.db'}",
        PIPELINE_TIMEZONE="America/New_York",
    )
    demo.init(p.source)
    demo.set_order(
        p.source, 200, status="paid", amount="7.05", updated_at="2026-01-10T02:00:00Z", tz=p.tz
    )
    p.load()
    yield p
    p.close()


def test_files_computed_by_the_rules_alone_are_what_verify_expects(new_york):
    p = new_york
    files = files_by_the_rules(p.source_url, p.tz, ALL_DAYS)
    # The rules, spelled out for two days: a bare date is midnight in the zone; a UTC
    # timestamp lands on its New York day, shown at New York's time.
    assert files["2026-01-03"] == (
        b'[{"amount":"40.00","order_id":101,"status":"paid",'
        b'"updated_at":"2026-01-03T00:00:00-05:00"}]\n'
    )
    assert files["2026-01-09"] == (
        b'[{"amount":"7.05","order_id":200,"status":"paid",'
        b'"updated_at":"2026-01-09T21:00:00-05:00"}]\n'
    )
    assert files["2026-01-10"] == b"[]\n"
    assert sum(data != b"[]\n" for data in files.values()) == 5
    commit_by_hand(p.folder, files, "by-hand", 1)

    result = p.verify(require_all=True)
    assert (result.ok, result.problems) == (True, ())
    assert [(f.day, f.state, f.matches_warehouse) for f in result.files] == [
        (day, "committed", True) for day in ALL_DAYS
    ]

    p.build(ALL_DAYS)  # the package's own writer: the same bytes, byte for byte
    assert {day: (p.folder / f"{day}.json").read_bytes() for day in ALL_DAYS} == files
    assert p.verify(require_all=True).ok


def test_files_that_break_the_rules_differ_from_the_warehouse(new_york):
    p = new_york
    files = files_by_the_rules(p.source_url, p.tz, ALL_DAYS)
    # the same number in other text, and order 200 on its UTC day instead of New York's
    files["2026-01-08"] = files["2026-01-08"].replace(b'"15.50"', b'"15.5"')
    files["2026-01-10"], files["2026-01-09"] = files["2026-01-09"], b"[]\n"
    commit_by_hand(p.folder, files, "by-hand", 1)

    result = p.verify()
    assert problems(result) == [
        ("2026-01-08", FILE_DIFFERS, True),
        ("2026-01-09", FILE_DIFFERS, True),
        ("2026-01-10", FILE_DIFFERS, True),
    ]
    details = [x.detail for x in result.problems]
    assert details[0].endswith(
        "0 missing from the file, 0 no longer paid on this day, 1 with other values"
    )
    assert details[1].endswith(
        "1 missing from the file, 0 no longer paid on this day, 0 with other values"
    )
    assert details[2].endswith(
        "0 missing from the file, 1 no longer paid on this day, 0 with other values"
    )
    assert result.repair == (rebuild_command("2026-01-08", "2026-01-10", spec=ORDERS),)


# --- bad input and read-only behaviour -----------------------------------------------------


def test_an_invalid_source_row_is_a_one_line_error(built, cli):
    with built.source.begin() as conn:
        conn.execute(sa.text("UPDATE orders SET amount = 'ten' WHERE order_id = 104"))
    code, out, err = cli("verify", environ=built.env())
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        "pipeline-assets: error: cannot verify: the source's order 104 has column amount = 'ten'"
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--days-from", "2026-13-01"], "--days-from: '2026-13-01' is not a valid day"),
        (["--days-to", "yesterday"], "--days-to: 'yesterday' is not a day in the form YYYY-MM-DD"),
        (
            ["--days-from", "2026-01-10", "--days-to", "2026-01-09"],
            "--days-from 2026-01-10 is after --days-to 2026-01-09",
        ),
    ],
)
def test_bad_days_are_a_one_line_error(built, cli, argv, message):
    code, out, err = cli("verify", *argv, environ=built.env())
    assert (code, out) == (1, "")
    assert err.startswith("pipeline-assets: error: ") and message in err


def test_verify_never_creates_a_warehouse(pipeline, cli):
    code, out, _ = cli("verify", "--json", environ=pipeline.env())
    report = json.loads(out)
    assert (code, report["source_rows"], report["warehouse_rows"]) == (1, 6, 0)
    assert report["repair"] == [
        orders_range_command(d, d)
        for d in (
            "2026-01-03",
            "2026-01-08",
            "2026-01-12",
            "2026-01-15",
            "2026-01-19",
            "2026-01-21",
        )
    ] + [
        rebuild_command(d, d, spec=ORDERS)
        for d in ("2026-01-03", "2026-01-08", "2026-01-15", "2026-01-21")
    ]
    assert not (pipeline.data / "warehouse.db").exists()
    assert not pipeline.folder.exists()


def test_a_missing_source_file_is_a_one_line_error(tmp_path, cli):
    p = Pipeline(
        tmp_path, f"sqlite:///{tmp_path / 'app.db'}", f"sqlite:///{tmp_path / 'warehouse.db'}"
    )
    try:
        code, out, err = cli("verify", environ=p.env())
    finally:
        p.close()
    assert (code, out) == (1, "")
    assert "does not exist: create the demo with `pipeline-assets demo init`" in err
    assert not (tmp_path / "app.db").exists()


# --- PostgreSQL -----------------------------------------------------------------------------


@pytest.mark.postgres
def test_postgresql_source_and_warehouse(tmp_path, postgres, cli):
    p = Pipeline(tmp_path, postgres.url("source"), postgres.url("warehouse"))
    try:
        demo.init(p.source)
        p.load()
        p.build(ALL_DAYS)
        assert cli("verify", environ=p.env())[0] == 0
        demo.set_order(
            p.source, 106, status="paid", amount="18.25", updated_at="2026-01-21", tz=UTC
        )
        (p.folder / "2026-01-03.json").write_text("[]\n")
        report = json.loads(cli("verify", "--json", environ=p.env())[1])
        assert report["failing_days"] == ["2026-01-03", "2026-01-21"]
        assert [(x["day"], x["kind"]) for x in report["problems"]] == [
            ("2026-01-03", FILE_UNCOMMITTED),
            ("2026-01-21", DIFFERS_FROM_SOURCE),
        ]
        assert report["repair"] == [
            orders_range_command("2026-01-21", "2026-01-21"),
            rebuild_command("2026-01-03", "2026-01-03", spec=ORDERS),
            rebuild_command("2026-01-21", "2026-01-21", spec=ORDERS),
        ]
    finally:
        p.close()


# --- one reader, one rule for a repeated key ------------------------------------------------


def test_verify_agrees_with_the_load_on_a_source_holding_two_copies_of_an_order(
    tmp_path, db_urls, cli
):
    """A view or a replica without constraints may hold an order twice: the load keeps its
    newest copy, and so must verify, which reads the source through the same scan (it used
    to read it row by row and call the repeated key a broken order)."""
    p = Pipeline(tmp_path, db_urls["source"], db_urls["warehouse"])
    try:
        with p.source.begin() as conn:
            conn.exec_driver_sql(
                "CREATE TABLE orders (order_id BIGINT, status TEXT, amount TEXT, updated_at TEXT)"
            )
            conn.execute(
                sa.text("INSERT INTO orders VALUES (:i, :s, :a, :u)"),
                [
                    dict(i=1, s="paid", a="10.00", u="2026-01-05"),
                    dict(i=1, s="paid", a="11.00", u="2026-01-06"),  # the newer copy wins
                    dict(i=2, s="paid", a="2.00", u="2026-01-05"),
                ],
            )
        assert p.load().duplicate_rows == 1
        p.build(ALL_DAYS)
        code, out, err = cli("verify", environ=p.env())
        assert (code, err) == (0, ""), out
        assert out.splitlines()[0].startswith(
            "source vs warehouse: 2 days, 2 source rows, 2 warehouse rows, 0 day(s) differ"
        )
        with p.source.begin() as conn:  # a third copy, newer still, not loaded yet
            conn.exec_driver_sql("INSERT INTO orders VALUES (1, 'refunded', '11.00', '2026-01-07')")
        assert problems(p.verify()) == [
            ("2026-01-06", DIFFERS_FROM_SOURCE, True),
            ("2026-01-07", DIFFERS_FROM_SOURCE, True),
        ]
    finally:
        p.close()


def test_the_check_and_verify_count_and_checksum_every_day_alike(tmp_path, db_urls):
    """The per-day figures have one home: the check's (per-day totals, both sides read at
    once, the load's own read for the days it read whole) and verify's (every row matched
    by key) are equal, day by day, on a history of a few thousand generated orders with a
    change not loaded yet."""
    p = Pipeline(tmp_path, db_urls["source"], db_urls["warehouse"])
    try:
        demo.init(p.source)
        demo.generate(p.source, orders=3_000, days=20, start=date(2026, 1, 1), seed=4)
        first = p.load()
        demo.set_order(
            p.source, 1500, status="paid", amount="1.23", updated_at="2026-01-30", tz=UTC
        )
        days = [date(2026, 1, 1) + timedelta(days=n) for n in range(-30, 40)]
        totals = compare_days(p.source, p.warehouse, UTC, days, spec=ORDERS)
        reused = compare_days(p.source, p.warehouse, UTC, days, known=first.read_whole, spec=ORDERS)
        matched, n_source, n_warehouse = compare_orders(p.source, p.warehouse, UTC, batch_rows=500)
        assert n_source == n_warehouse == 3_006
        figures = {
            d: (
                c.source_rows,
                c.source_checksum,
                c.source_paid,
                c.warehouse_rows,
                c.warehouse_checksum,
                c.warehouse_paid,
            )
            for d, c in matched.items()
        }
        assert {
            d: (
                c.source_rows,
                c.source_checksum,
                c.source_paid,
                c.warehouse_rows,
                c.warehouse_checksum,
                c.warehouse_paid,
            )
            for d, c in totals.items()
        } == figures
        moved = [d for d, c in matched.items() if not c.agrees]
        assert len(moved) == 2 and "2026-01-30" in moved
        assert differing_days(totals) == moved
        # the first load read every day whole, before the change: its own read is what
        # the warehouse now holds, on both days (the next load reads the change)
        assert differing_days(reused) == []
        assert {d: c.source_checksum for d, c in reused.items() if d not in moved} == {
            d: c.source_checksum for d, c in totals.items() if d not in moved
        }
    finally:
        p.close()


# --- the printed commands, for real ---------------------------------------------------------


@pytest.mark.e2e
def test_running_the_printed_repair_commands_makes_verify_agree(pipeline, cli, tmp_path):
    pipeline.load()
    pipeline.build(["2026-01-03", "2026-01-08", "2026-01-15"])
    # not loaded: 105 paid on 01-25 (moved from 01-19), and a new order on 01-24
    demo.set_order(
        pipeline.source, 105, status="paid", amount="22.00", updated_at="2026-01-25", tz=UTC
    )
    demo.set_order(
        pipeline.source,
        186,
        status="paid",
        amount="30.00",
        updated_at="2026-01-24T10:00:00",
        tz=UTC,
    )
    # edited by hand: uncommitted
    (pipeline.folder / "2026-01-03.json").write_text("[]\n")
    report = json.loads(cli("verify", "--require-all", "--json", environ=pipeline.env())[1])
    assert report["failing_days"] == [
        "2026-01-03",
        "2026-01-19",
        "2026-01-21",
        "2026-01-24",
        "2026-01-25",
    ]
    assert report["repair"] == [
        orders_range_command("2026-01-24", "2026-01-25"),
        rebuild_command("2026-01-03", "2026-01-03", spec=ORDERS),
        rebuild_command("2026-01-21", "2026-01-21", spec=ORDERS),
        rebuild_command("2026-01-24", "2026-01-25", spec=ORDERS),
    ]

    (tmp_path / "home").mkdir()
    env = {
        **os.environ,
        **pipeline.env(),
        "DAGSTER_HOME": str(tmp_path / "home"),
        **RUNS_IN_PROCESS,
    }
    for key in (
        "PIPELINE_CRASH_AT",
        "PIPELINE_CRASH_MODE",
        "PIPELINE_CRASH_ONCE_FILE",
        "PIPELINE_TIMEZONE",
        "PARTITIONS_START_DATE",
        "LOOKBACK_DAYS",
    ):
        env.pop(key, None)
    watermark_before = json.dumps(_watermark(pipeline))
    for command in report["repair"]:
        argv = shlex.split(command)
        assert argv[0] == "dagster"
        done = subprocess.run(
            [str(BIN / "dagster"), *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (command, done.stderr[-3000:])
    assert json.dumps(_watermark(pipeline)) == watermark_before  # range loads leave it alone

    code, out, _ = cli("verify", "--require-all", environ=pipeline.env())
    assert code == 0, out
    assert out.splitlines()[-1] == "OK: source, warehouse and committed day files agree"


def _watermark(p: Pipeline):
    with p.warehouse.connect() as conn:
        return conn.execute(sa.text("SELECT value FROM pipeline_watermark")).scalar()


# --- the day of a warehouse timestamp ---------------------------------------------------------


@pytest.mark.parametrize(
    "zone_name, around",
    [
        ("UTC", "2026-01-25T00:00:00+00:00"),
        ("America/New_York", "2026-03-08T07:00:00+00:00"),  # spring forward
        ("America/New_York", "2026-11-01T06:00:00+00:00"),  # fall back
        ("Asia/Kathmandu", "2026-01-24T18:15:00+00:00"),  # +05:45: midnight is not on the hour
        ("Pacific/Apia", "2011-12-30T10:00:00+00:00"),  # skipped a whole day
        ("America/Havana", "2026-11-01T05:00:00+00:00"),  # falls back at 01:00 to midnight
    ],
)
def test_the_day_of_a_stored_timestamp_is_the_day_of_the_instant(zone_name, around):
    """Every reader gives a warehouse row its day with ``columnar.days_of`` (Arrow's zone
    rules, a whole batch at once); it must agree with ``astimezone`` on every instant,
    including at offset changes."""
    tz = zone(zone_name)
    centre = datetime.fromisoformat(around)
    instants = [
        centre + timedelta(minutes=minutes) + extra
        for minutes in range(-36 * 60, 36 * 60, 7)
        for extra in (timedelta(0), timedelta(microseconds=-1))
    ]
    for instant in instants:
        assert days_of([canonical(instant)], tz) == {instant.astimezone(tz).date().isoformat()}
    assert days_of([canonical(i) for i in instants], tz) == {
        i.astimezone(tz).date().isoformat() for i in instants
    }


def test_a_large_sqlite_read_goes_through_the_reader_process_with_the_same_rows(
    tmp_path, monkeypatch
):
    """Above READER_ROWS rows a SQLite warehouse is read by the Arrow driver in a process
    of its own (never a second SQLite library in this one): the same rows, the same
    figures, and this process's own connections keep working afterwards."""
    from pipeline_assets.core.verify import sides

    p = Pipeline(
        tmp_path, f"sqlite:///{tmp_path / 'app.db'}", f"sqlite:///{tmp_path / 'warehouse.db'}"
    )
    try:
        demo.init(p.source)
        demo.generate(p.source, orders=2_000, days=10, start=date(2026, 1, 1), seed=2)
        p.load()
        days = [date(2026, 1, 1) + timedelta(days=n) for n in range(-30, 20)]
        small = compare_orders(p.source, p.warehouse, UTC, batch_rows=300)
        small_days = compare_days(p.source, p.warehouse, UTC, days, spec=ORDERS)
        monkeypatch.setattr(sides, "SMALL_WINDOW", 10)
        monkeypatch.setattr(sides, "READER_ROWS", 10)
        assert compare_orders(p.source, p.warehouse, UTC, batch_rows=300) == small
        assert compare_days(p.source, p.warehouse, UTC, days, spec=ORDERS) == small_days
        demo.set_order(
            p.source, 1500, status="paid", amount="2.00", updated_at="2026-01-22", tz=UTC
        )
        p.load()  # the engine's own connections after the reader: nothing lost or locked
        assert not differing_days(compare_days(p.source, p.warehouse, UTC, days, spec=ORDERS))
    finally:
        p.close()


def test_a_reader_process_that_cannot_read_is_a_one_line_error(tmp_path):
    from pipeline_assets.core.db import sqlite_reader

    with pytest.raises(sqlite_reader.ReaderError) as err:
        list(sqlite_reader.read(str(tmp_path / "nothing.db"), ["SELECT 1"], 10))
    assert "\n" not in str(err.value) and str(err.value)


# --- the day files' hashes, built by Arrow, equal the bytes the writer writes ---------------

ZONES = ["UTC", "Europe/Berlin", "America/St_Johns", "Australia/Lord_Howe", "Asia/Kathmandu"]


@given(st.data())
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_file_hashes_are_those_of_the_bytes_serialize_day_writes(tmp_path, data):
    """``verify`` checks each committed file against a hash Arrow builds from the
    warehouse in one scan; for any rows, zone and day it must be the sha256 of exactly the
    bytes ``serialize_day`` writes from ``paid_orders_by_day``'s rows (the writer's own
    path), and a day holding an amount the writer would refuse gets no hash at all."""
    from pipeline_assets.core.daily_files import serialize_day, sha256_hex
    from pipeline_assets.core.db.state import prepare_warehouse
    from pipeline_assets.core.verify.files import file_hashes

    tz = zone(data.draw(st.sampled_from(ZONES), label="zone"))
    moments = st.datetimes(
        min_value=datetime(1965, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
    )
    amounts = st.sampled_from(["40.00", "-5.5", "0", "12.30", "1e3"])
    rows = data.draw(
        st.lists(
            st.tuples(st.sampled_from(["paid", "paid", "pending"]), amounts, moments),
            min_size=0,
            max_size=60,
        ),
        label="rows",
    )
    warehouse = make_engine(f"sqlite:///{tmp_path / f'wh-{uuid4().hex}.db'}", role="warehouse")
    try:
        prepare_warehouse(warehouse, spec=ORDERS)
        with warehouse.begin() as conn:
            for order_id, (status, amount, moment) in enumerate(rows, start=1):
                conn.execute(
                    orders.insert().values(
                        order_id=order_id,
                        status=status,
                        amount=amount,
                        updated_at=canonical(moment),
                    )
                )
        days = sorted(
            {m.astimezone(tz).date().isoformat() for _, _, m in rows} | {"2026-01-25"}
        )  # a day without any order: "[]"
        expected = {}
        for day, day_rows in paid_orders_by_day(warehouse, days, tz).items():
            if any(r["amount"] == "1e3" for r in day_rows):
                continue  # serialize_day refuses it: no hash, the slow path words it
            data_bytes = serialize_day(day, day_rows, spec=ORDERS)
            expected[day] = (len(day_rows), sha256_hex(data_bytes))
        assert file_hashes(warehouse, tz, days, spec=ORDERS) == expected
    finally:
        warehouse.dispose()


# --- an order deleted from the source, or one that only moved: asked by key -------------------


def _only_in_warehouse(days) -> dict[str, tuple[int, list[int]]]:
    return {d: (c.only_in_warehouse, c.deleted_ids) for d, c in days.items() if c.only_in_warehouse}


def _deleted_checksums(days) -> dict[str, int]:
    return {d: c.deleted_checksum for d, c in days.items() if c.only_in_warehouse}


@pytest.mark.parametrize("lookup_batch", [1_000, 3])
def test_the_check_tells_an_order_deleted_from_the_source_from_one_that_moved(
    tmp_path, db_urls, monkeypatch, lookup_batch
):
    """Orders that left the compared days (their stamps moved before the window) and
    orders the app deleted both make a day differ. The check names only the deleted ones,
    asking the source for the keys that left the days, by key (``lookup_batch`` keys per
    ``IN`` list: one list, or many), and says so exactly as ``verify``, which matches
    every row of both sides, does for the same days."""
    from pipeline_assets.core.verify import lost
    from pipeline_assets.core.verify.horizon import reconcile_horizon

    monkeypatch.setattr(lost, "LOOKUP_BATCH", lookup_batch)
    p = Pipeline(tmp_path, db_urls["source"], db_urls["warehouse"])
    try:
        demo.init(p.source)
        demo.generate(p.source, orders=600, days=20, start=date(2026, 1, 1), seed=5)
        p.load()
        with p.source.begin() as conn:
            stamps = dict(
                conn.execute(
                    sa.text(  # three generated orders of the window
                        "SELECT order_id, updated_at FROM orders WHERE order_id > 106 "
                        "AND updated_at >= '2026-01-16' ORDER BY order_id LIMIT 3"
                    )
                ).all()
            )
            conn.execute(
                sa.text(
                    "DELETE FROM orders WHERE order_id = 104 OR order_id IN "
                    f"({', '.join(map(str, stamps))})"
                )
            )
            # the app backdates 105 (01-19) and some others: a load never reads them again
            conn.execute(
                sa.text(
                    "UPDATE orders SET updated_at = '2025-12-01T10:00:00Z' "
                    "WHERE order_id = 105 OR order_id BETWEEN 300 AND 460"
                )
            )
        deleted = {104: "2026-01-15"} | {
            k: to_instant(v, UTC).date().isoformat() for k, v in stamps.items()
        }
        h, days, verdict = reconcile_horizon(
            p.source, p.warehouse, UTC, reconcile_days=7, spec=ORDERS
        )
        expected = {
            d: (len(ks), sorted(ks))
            for d in set(deleted.values())
            for ks in [[k for k, day in deleted.items() if day == d]]
        }
        assert _only_in_warehouse(days) == expected
        assert "2026-01-19" in verdict.differing  # 105 moved: late, never deleted
        assert "Orders the source no longer has: " in verdict.description
        assert "(orders 104" in verdict.description or "(order 104)" in verdict.description
        # verify, which reads every row of both sides, names the same orders on those days
        checked = {c.day: c for c in p.verify().days if c.day in days}
        assert _only_in_warehouse(checked) == expected
        assert _deleted_checksums(checked) == _deleted_checksums(days)
    finally:
        p.close()


TEXT_KEYS = ["101", " 102", "0103", "104 ", "105", "0106", "107\n", "-0"]  # 107\n: 107; -0: 0


def _text_key_source(url: str, declared: str, keys: list) -> sa.Engine:
    engine = make_engine(url, role="app")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE orders (order_id {declared}, status VARCHAR(20), "
            "amount VARCHAR(20), updated_at VARCHAR(40))"
        )
        conn.execute(
            sa.text("INSERT INTO orders VALUES (:i, 'paid', '1.00', '2026-01-20T10:00:00Z')"),
            [dict(i=k) for k in keys],
        )
    return engine


def _old_rule(source, keys: list[int]) -> list[int]:
    """The keys no row of the source holds, by the scan of every key (the rule of old)."""
    from pipeline_assets.core.source.scan import inspect_source, scan_keys

    held = {
        k
        for found in scan_keys(source, inspect_source(source, ORDERS))
        for k in found.column(0).to_pylist()
    }
    return [k for k in keys if k not in held]


@pytest.mark.parametrize("lookup_batch", [1_000, 2])
@pytest.mark.parametrize(
    "declared", ["VARCHAR(20) PRIMARY KEY", "VARCHAR(20)", "BIGINT PRIMARY KEY", "BIGINT"]
)
def test_orders_whose_key_is_text_in_any_form_are_told_moved_from_deleted(
    tmp_path, db_urls, monkeypatch, declared, lookup_batch
):
    """A text key column may write order 103 as '0103' or ' 103': the load stores 103, and
    the scan of every key, which told a deleted order from a moved one, read it as 103 too.
    Asked by key, ``IN ('103')`` does not find it: the rows whose key is not written the
    plain way are read as well, so the answer is the scan's, with or without an index on
    the key (without one and more than one list, it is the scan), and nothing is written
    to the source."""
    import pyarrow as pa

    from pipeline_assets.core.source.scan import inspect_source
    from pipeline_assets.core.verify import lost
    from pipeline_assets.core.verify.horizon import reconcile_horizon

    backend = sa.make_url(db_urls["source"]).get_backend_name()
    if declared.startswith("BIGINT") and backend != "sqlite":
        pytest.skip("an integer column elsewhere holds integers only: the plain case")
    keys = TEXT_KEYS + ([b"108"] if backend == "sqlite" else [])  # a blob that holds 108
    monkeypatch.setattr(lost, "LOOKUP_BATCH", lookup_batch)
    source = _text_key_source(db_urls["source"], declared, keys)
    warehouse = make_engine(db_urls["warehouse"], role="warehouse")
    try:
        load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
        with source.begin() as conn:  # all but 0106 leave the day; 105 is deleted
            conn.execute(
                sa.text(
                    "UPDATE orders SET updated_at = '2025-12-01T10:00:00Z' WHERE order_id <> '0106'"
                )
            )
            conn.execute(sa.text("DELETE FROM orders WHERE order_id = '105'"))
        if backend == "sqlite":
            path = Path(sa.make_url(db_urls["source"]).database)
            before = hashlib.sha256(path.read_bytes()).hexdigest()
        _, days, _ = reconcile_horizon(source, warehouse, UTC, reconcile_days=7, spec=ORDERS)
        assert _only_in_warehouse(days) == {"2026-01-20": (1, [105])}
        with warehouse.connect() as conn:
            stored = [
                r[0] for r in conn.exec_driver_sql("SELECT order_id FROM orders ORDER BY order_id")
            ]
        assert 103 in stored and 0 in stored
        span = [(datetime(2026, 1, 20, tzinfo=UTC), datetime(2026, 1, 21, tzinfo=UTC))]
        found = lost.lost_keys(
            source, inspect_source(source, spec=ORDERS), UTC, pa.array(stored, pa.int64()), span
        ).to_pylist()
        assert found == _old_rule(source, stored) == [105]
        if backend == "sqlite":
            assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    finally:
        source.dispose()
        warehouse.dispose()
