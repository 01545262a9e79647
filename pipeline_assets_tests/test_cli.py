"""The ``pipeline-assets`` command line on real SQLite files under tmp_path.

Most cases call ``main([...])`` in-process with an explicit environment and a fixed clock
and read what it printed; a few run ``python -m pipeline_assets`` as a real subprocess,
so the entry point, the exit codes and "no traceback" are checked as a user sees them.
Every failing case also checks that nothing was written.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from pipeline_assets import demo
from pipeline_assets.cli import main
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC
from pipeline_assets_tests.orders import load_orders

from .conftest import NOW
from .plain import source_rows

CHAPTER = [
    (101, "paid", "40.00", "2026-01-03"),
    (102, "paid", "15.50", "2026-01-08"),
    (103, "refunded", "30.00", "2026-01-12"),
    (104, "paid", "12.75", "2026-01-15"),
    (105, "pending", "22.00", "2026-01-19"),
    (106, "paid", "18.20", "2026-01-21"),
]
CHAPTER_DAYS = ["2026-01-03", "2026-01-08", "2026-01-12", "2026-01-15", "2026-01-19", "2026-01-21"]
PG_URL = "postgresql+psycopg://u:s3cret@127.0.0.1:1/x"  # nothing listens on port 1
PG_URL_2 = "postgresql+psycopg://u:s3cret@127.0.0.1:1/y"


@pytest.fixture(autouse=True)
def _stay_out_of_the_checkout(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def data(env) -> Path:
    return Path(env["PIPELINE_DATA_DIR"])


@pytest.fixture
def initialized(cli, data) -> Path:
    """The story alone (orders 101-106), on the chapter's calendar: the clock is NOW."""
    assert cli("demo", "init", "--history-days", "0")[0] == 0
    return data


def app_url(data: Path) -> str:
    """The demo's source in the data folder ``data``, as a URL."""
    return f"sqlite:///{data / 'app.db'}"


def demo_set(
    updated_at: str, order: str = "105", status: str = "paid", amount: str = "22.00"
) -> list[str]:
    """The arguments of ``demo set``: by default order 105, paid, 22.00, at ``updated_at``."""
    options = ["--status", status, "--amount", amount, "--updated-at", updated_at]
    return ["demo", "set", order, *options]


def assert_has(got: dict, want: dict) -> None:
    """``got`` holds each key of ``want`` with its value (and may hold other keys)."""
    assert {k: got[k] for k in want} == want


def fingerprint(path: Path) -> tuple[list[str], str, list[str]]:
    """Files in the folder, the database file's hash, and its full SQL dump."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    conn = sqlite3.connect(path)
    try:
        dump = list(conn.iterdump())
    finally:
        conn.close()
    return sorted(p.name for p in path.parent.iterdir()), digest, dump


def real_load(data: Path):
    """One real incremental load through core, as the `orders` asset would run it."""
    source = make_engine(f"sqlite:///{data / 'app.db'}", role="app")
    warehouse = make_engine(f"sqlite:///{data / 'warehouse.db'}", role="warehouse")
    try:
        return load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    finally:
        source.dispose()
        warehouse.dispose()


def one_line_error(code: int, out: str, err: str, expected_code: int = 1) -> str:
    assert code == expected_code, (out, err)
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("pipeline-assets: error: ")
    assert "Traceback" not in err
    return err


# --- demo -------------------------------------------------------------------------------


def test_demo_init_creates_the_chapter_orders_and_its_folder(cli, tmp_path):
    nested = tmp_path / "deep" / "er"
    code, out, err = cli("demo", "init", "--history-days", "0", PIPELINE_DATA_DIR=str(nested))
    assert (code, err) == (0, "")
    assert (
        out == f"created the orders table in sqlite:///{nested / 'app.db'} with 6 orders: 101-106\n"
    )
    assert source_rows(app_url(nested)) == CHAPTER
    assert dict((r[0], r[1]) for r in source_rows(app_url(nested)))[105] == "pending"


def test_demo_init_lives_in_the_present_of_its_clock(capsys, tmp_path):
    """The story keeps its shape on any date; the history ends the day before the clock's."""
    data = tmp_path / "data"
    code = main(
        ["demo", "init"],
        environ={"PIPELINE_DATA_DIR": str(data)},
        clock=lambda: datetime(2027, 3, 10, 0, 5, tzinfo=UTC),
    )
    out = capsys.readouterr().out
    assert code == 0
    rows = source_rows(app_url(data))
    assert out.endswith(
        f"with {len(rows)} orders: 101-106 and {len(rows) - 6} more over the "
        "28 days before 2027-03-10\n"
    )
    assert rows[:6] == [
        (101, "paid", "40.00", "2027-02-14"),
        (102, "paid", "15.50", "2027-02-19"),
        (103, "refunded", "30.00", "2027-02-23"),
        (104, "paid", "12.75", "2027-02-26"),
        (105, "pending", "22.00", "2027-03-02"),
        (106, "paid", "18.20", "2027-03-04"),
    ]
    history = rows[6:]
    days = {r[3][:10] for r in history}
    assert min(days) == "2027-02-10" and max(days) == "2027-03-09" and len(days) == 28
    assert max(r[3] for r in history) < "2027-03-09T18:00"  # 105 at yesterday 20:00 is newer
    statuses = {r[1] for r in history}
    assert {"paid", "pending", "refunded", "cancelled"} <= statuses
    assert 300 < len(history) < 800
    # some rows were written late: an order id newer than a row stamped after it
    assert any(a[3] > b[3] for a, b in zip(history, history[1:], strict=False))


def test_demo_init_reads_its_day_in_the_pipeline_time_zone(capsys, tmp_path):
    data = tmp_path / "data"
    # 03:00 UTC on the 10th is still the 9th in New York
    code = main(
        ["demo", "init"],
        environ={"PIPELINE_DATA_DIR": str(data), "PIPELINE_TIMEZONE": "America/New_York"},
        clock=lambda: datetime(2027, 3, 10, 3, 0, tzinfo=UTC),
    )
    assert code == 0
    rows = source_rows(app_url(data))
    assert rows[5] == (106, "paid", "18.20", "2027-03-03")
    assert max(r[3][:10] for r in rows[6:]) == "2027-03-08"
    assert all(r[3].endswith(("-05:00", "-04:00")) for r in rows[6:])


def test_demo_init_twice_needs_force_and_keeps_the_data(cli, initialized):
    assert cli(*demo_set("2026-01-25"))[0] == 0
    before = source_rows(app_url(initialized))
    err = one_line_error(*cli("demo", "init"))
    assert "already has an orders table; pass --force" in err
    assert source_rows(app_url(initialized)) == before

    assert cli("demo", "init", "--force", "--history-days", "0")[0] == 0
    assert source_rows(app_url(initialized)) == CHAPTER


def test_demo_generate_is_deterministic_and_adds_late_orders(cli, tmp_path):
    runs = []
    for name in ("a", "b"):
        folder = tmp_path / name
        assert cli("demo", "init", "--history-days", "0", PIPELINE_DATA_DIR=str(folder))[0] == 0
        code, out, err = cli(
            "demo",
            "generate",
            "--orders",
            "200",
            "--days",
            "10",
            "--start",
            "2026-02-01",
            "--late-fraction",
            "0.25",
            "--seed",
            "7",
            PIPELINE_DATA_DIR=str(folder),
        )
        assert (code, err) == (0, "")
        runs.append((json.loads(out), source_rows(app_url(folder))))
    (summary, rows), (summary_b, rows_b) = runs
    assert (summary, rows) == (summary_b, rows_b)
    assert {
        k: summary[k] for k in ("orders", "first_order_id", "last_order_id", "start", "days")
    } == {
        "orders": 200,
        "first_order_id": 107,
        "last_order_id": 306,
        "start": "2026-02-01",
        "days": 10,
    }
    assert len(rows) == 6 + 200
    assert 20 <= summary["late"] <= 80  # a quarter of 200, give or take
    # late orders are dated 1-5 days back: those near the start fall before it
    assert 0 < len([r for r in rows[6:] if r[3] < "2026-02-01"]) <= summary["late"]


def test_demo_generate_with_another_seed_differs(cli, tmp_path):
    outcomes = []
    for seed in ("1", "2"):
        folder = tmp_path / seed
        cli("demo", "init", PIPELINE_DATA_DIR=str(folder))
        assert (
            cli(
                "demo",
                "generate",
                "--orders",
                "20",
                "--days",
                "3",
                "--seed",
                seed,
                PIPELINE_DATA_DIR=str(folder),
            )[0]
            == 0
        )
        outcomes.append(source_rows(app_url(folder)))
    assert outcomes[0] != outcomes[1]


def test_demo_set_updates_and_inserts(cli, initialized):
    code, out, err = cli(*demo_set("2026-01-25"))
    assert (code, out, err) == (0, "order 105 updated: paid 22.00 2026-01-25\n", "")
    code, out, err = cli(*demo_set("2026-01-24T23:30:00+01:00", order="186", amount="9.90"))
    assert (code, out, err) == (0, "order 186 inserted: paid 9.90 2026-01-24T23:30:00+01:00\n", "")
    rows = source_rows(app_url(initialized))
    assert rows[4] == (105, "paid", "22.00", "2026-01-25")
    assert rows[-1] == (186, "paid", "9.90", "2026-01-24T23:30:00+01:00")


@pytest.mark.parametrize(
    "value, stored, zone, clock",
    [
        ("yesterday 20:00", "2026-01-26T20:00:00", "UTC", NOW),
        ("today", "2026-01-27", "UTC", NOW),
        ("-2d", "2026-01-25", "UTC", NOW),  # a value, not an option
        (" -3d ", "2026-01-24", "UTC", NOW),
        ("+1d 09:30:15", "2026-01-28T09:30:15", "UTC", NOW),
        # 03:00 UTC on the 27th is still the 26th in New York: relative to that day
        ("yesterday", "2026-01-25", "America/New_York", datetime(2026, 1, 27, 3, tzinfo=UTC)),
        ("2026-01-24T23:30:00+01:00", "2026-01-24T23:30:00+01:00", "UTC", NOW),  # as given
    ],
)
def test_demo_set_takes_days_relative_to_the_clock(
    capsys, initialized, env, value, stored, zone, clock
):
    code = main(
        demo_set(value),
        environ={**env, "PIPELINE_TIMEZONE": zone},
        clock=lambda: clock,
    )
    out, err = capsys.readouterr()
    assert (code, out, err) == (0, f"order 105 updated: paid 22.00 {stored}\n", "")
    assert source_rows(app_url(initialized))[4] == (105, "paid", "22.00", stored)


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            demo_set("2026-01-25", amount="22,00"),
            "--amount: '22,00' is not a decimal number",
        ),
        (
            demo_set("2026-01-25", amount="1e3"),
            "--amount: '1e3' is not a decimal number",
        ),
        (
            demo_set("2026-02-30"),
            "--updated-at: '2026-02-30' is not a valid date",
        ),
        (
            demo_set("25/01/2026"),
            "--updated-at: '25/01/2026' is not an ISO-8601 date",
        ),
        (
            demo_set("2026-01-25", status=" "),
            "--status must not be empty",
        ),
        (
            demo_set("yesterday 25:00"),
            "--updated-at: 'yesterday 25:00' has no valid time of day",
        ),
        (
            demo_set("last week"),
            "--updated-at: 'last week' is not an ISO-8601 date",
        ),
        (["demo", "init", "--force", "--history-days", "-1"], "--history-days -1 must be 0"),
        (
            ["demo", "generate", "--orders", "5", "--days", "2", "--start", "2026-1-5"],
            "--start: '2026-1-5' is not a day in the form YYYY-MM-DD",
        ),
        (
            ["demo", "generate", "--orders", "5", "--days", "2", "--late-fraction", "1.5"],
            "--late-fraction 1.5 must be between 0 and 1",
        ),
        (["demo", "generate", "--orders", "5", "--days", "0"], "--days 1 or more"),
    ],
)
def test_bad_demo_input_fails_in_one_line_and_changes_nothing(cli, initialized, argv, message):
    before = fingerprint(initialized / "app.db")
    err = one_line_error(*cli(*argv))
    assert message in err
    assert fingerprint(initialized / "app.db") == before


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "the following arguments are required: COMMAND"),
        (["load"], "invalid choice: 'load'"),
        (["demo"], "the following arguments are required: DEMO_COMMAND"),
        (
            demo_set("2026-01-01", order="x", amount="1"),
            "argument ORDER_ID: invalid int value: 'x'",
        ),
        (["demo", "generate", "--days", "2"], "the following arguments are required: --orders"),
        (["watermark", "rewind", "2026-01-01"], "the following arguments are required: --reason"),
        (["plan", "--now"], "unrecognized arguments: --now"),
    ],
)
def test_usage_errors_exit_2_in_one_line(cli, data, argv, message):
    err = one_line_error(*cli(*argv), expected_code=2)
    assert message in err
    assert not data.exists()


def test_commands_other_than_init_never_create_the_source(cli, data):
    for argv in (
        ["plan"],
        ["demo", "generate", "--orders", "1", "--days", "1"],
        demo_set("2026-01-01", order="1", amount="1.00"),
    ):
        err = one_line_error(*cli(*argv))
        assert "does not exist: create the demo with `pipeline-assets demo init`" in err
    assert not data.exists()


def test_a_source_without_orders_table_is_a_one_line_error(cli, data):
    data.mkdir()
    sqlite3.connect(data / "app.db").close()
    err = one_line_error(*cli("plan"))
    assert "has no table 'orders'" in err
    assert sorted(p.name for p in data.iterdir()) == ["app.db"]


# --- watermark --------------------------------------------------------------------------


def test_watermark_show_before_any_load_is_null_and_creates_nothing(cli, data):
    code, out, err = cli("watermark", "show", LOOKBACK_DAYS="3")
    assert (code, err) == (0, "")
    assert json.loads(out) == {"watermark": None, "lookback_days": 3, "window_start": None}
    code, out, err = cli("watermark", "history", "--json")
    assert (code, json.loads(out), err) == (0, [], "")
    assert cli("watermark", "history")[1] == "no watermark changes yet\n"
    assert not data.exists()


def test_rewind_moves_back_and_is_in_the_history(cli, initialized):
    real_load(initialized)
    assert json.loads(cli("watermark", "show")[1])["watermark"] == "2026-01-21T00:00:00+00:00"

    code, out, err = cli("watermark", "rewind", "2026-01-15", "--reason", "re-read ticket 42")
    assert (code, err) == (0, "")
    assert out == (
        "watermark rewound from 2026-01-21T00:00:00+00:00 to 2026-01-15T00:00:00+00:00\n"
    )
    assert json.loads(cli("watermark", "show")[1]) == {
        "watermark": "2026-01-15T00:00:00+00:00",
        "lookback_days": 2,
        "window_start": "2026-01-13T00:00:00+00:00",
    }

    history = json.loads(cli("watermark", "history", "--json")[1])
    assert [(h["kind"], h["old_value"], h["new_value"], h["reason"]) for h in history] == [
        ("load", None, "2026-01-21T00:00:00+00:00", None),
        ("rewind", "2026-01-21T00:00:00+00:00", "2026-01-15T00:00:00+00:00", "re-read ticket 42"),
    ]
    assert history[0]["batch_id"].startswith("orders-")
    assert {h["changed_at"] for h in history} == {NOW.isoformat()}

    lines = cli("watermark", "history")[1].splitlines()
    assert lines == [
        f"{NOW.isoformat()}  load    none -> 2026-01-21T00:00:00+00:00  "
        f"batch {history[0]['batch_id']}",
        f"{NOW.isoformat()}  rewind  2026-01-21T00:00:00+00:00 -> 2026-01-15T00:00:00+00:00  "
        "reason: re-read ticket 42",
    ]


def test_history_shows_the_newest_changes_unless_told_all(cli, initialized):
    """A year of loads leaves 100,000 changes: the command shows the newest 100 (read
    backwards through the key, as cheap as on the first day) and says there are more;
    ``--all`` lists every one, ``--newest N`` the newest N; nothing is ever deleted."""
    from datetime import timedelta

    from pipeline_assets.core.db.engines import writing
    from pipeline_assets.core.warehouse import watermark as wm

    real_load(initialized)
    warehouse = make_engine(f"sqlite:///{initialized / 'warehouse.db'}", role="warehouse")
    first = wm.current(warehouse, table=ORDERS.name)
    with writing(warehouse).begin() as conn:  # 104 more loads, each a minute on
        for n in range(104):
            old, new = first + timedelta(minutes=n), first + timedelta(minutes=n + 1)
            wm.write(
                conn, old, new, kind="load", at=NOW, batch_id=f"orders-{n:024d}", table="orders"
            )
    warehouse.dispose()

    lines = cli("watermark", "history")[1].splitlines()
    assert lines[0] == "(the newest 100 changes; --all lists every one)"
    assert len(lines) == 101 and lines[-1].endswith("batch orders-000000000000000000000103")
    assert len(cli("watermark", "history", "--all")[1].splitlines()) == 105
    newest = json.loads(cli("watermark", "history", "--json", "--newest", "3")[1])
    assert [h["batch_id"][-3:] for h in newest] == ["101", "102", "103"]  # oldest first
    every = json.loads(cli("watermark", "history", "--json", "--all")[1])
    assert len(every) == 105 and every[0]["old_value"] is None
    assert len(json.loads(cli("watermark", "history", "--json")[1])) == 100
    said = one_line_error(*cli("watermark", "history", "--newest", "0"))
    assert "--newest 0: give a number of changes, 1 or more" in said


def test_rewind_reads_a_naive_value_in_the_pipeline_time_zone(cli, initialized):
    real_load(initialized)
    code, out, _ = cli(
        "watermark",
        "rewind",
        "2026-01-20T08:00",
        "--reason",
        "tz",
        PIPELINE_TIMEZONE="America/New_York",
    )
    assert code == 0
    assert out.endswith("to 2026-01-20T08:00:00-05:00\n")
    shown = json.loads(cli("watermark", "show")[1])["watermark"]
    assert shown == "2026-01-20T13:00:00+00:00"


@pytest.mark.parametrize(
    "value, message",
    [
        ("2026-01-25", "is not before the current"),
        ("2026-01-21", "is not before the current"),
        ("yesterday", "is not before the current"),  # 2026-01-26, by the clock
        ("soon", "VALUE: 'soon' is not an ISO-8601 date"),
    ],
)
def test_rewind_forward_or_unparseable_is_refused(cli, initialized, value, message):
    real_load(initialized)
    before = fingerprint(initialized / "warehouse.db")
    err = one_line_error(*cli("watermark", "rewind", value, "--reason", "oops"))
    assert message in err
    assert fingerprint(initialized / "warehouse.db") == before


def test_rewind_before_any_load_is_refused_without_creating_the_warehouse(cli, initialized):
    err = one_line_error(*cli("watermark", "rewind", "2026-01-01", "--reason", "x"))
    assert "there is no watermark yet" in err
    assert not (initialized / "warehouse.db").exists()


# --- plan -------------------------------------------------------------------------------


def test_plan_on_a_fresh_warehouse_reports_the_first_load_and_writes_nothing(cli, initialized):
    source_before = fingerprint(initialized / "app.db")
    code, out, err = cli("plan")
    assert (code, err) == (0, "")
    plan = json.loads(out)
    assert_has(
        plan,
        {
            "kind": "incremental",
            "window_start": None,
            "window_end": None,
            "watermark_before": None,
            "watermark_after": "2026-01-21T00:00:00+00:00",
            "rows_read": 6,
            "inserted": 6,
            "updated": 0,
            "unchanged": 0,
            "days_touched": CHAPTER_DAYS,
            "dry_run": True,
            "lookback_days": 2,
            "warehouse_exists": False,
        },
    )
    assert plan["warehouse"] == f"sqlite:///{initialized / 'warehouse.db'}"
    assert sorted(p.name for p in initialized.iterdir()) == ["app.db"]
    assert fingerprint(initialized / "app.db") == source_before
    # the plan is what the real load then does
    done = real_load(initialized).to_json()
    assert {k: done[k] for k in ("batch_id", "rows_read", "days_touched", "watermark_after")} == {
        k: plan[k] for k in ("batch_id", "rows_read", "days_touched", "watermark_after")
    }


def test_plan_after_a_load_shows_the_lookback_window_and_writes_nothing(cli, initialized):
    real_load(initialized)
    cli(*demo_set("2026-01-25"))
    cli(*demo_set("2026-01-24", order="186", amount="9.90"))
    warehouse_before = fingerprint(initialized / "warehouse.db")

    code, out, err = cli("plan")
    assert (code, err) == (0, "")
    plan = json.loads(out)
    assert_has(
        plan,
        {
            "window_start": "2026-01-19T00:00:00+00:00",
            "watermark_before": "2026-01-21T00:00:00+00:00",
            "watermark_after": "2026-01-25T00:00:00+00:00",
            "rows_read": 3,
            "inserted": 1,
            "updated": 1,
            "unchanged": 1,  # 186, 105, 106
            "days_touched": ["2026-01-24", "2026-01-25"],
            "warehouse_exists": True,
        },
    )
    assert fingerprint(initialized / "warehouse.db") == warehouse_before
    assert json.loads(cli("watermark", "show")[1])["watermark"] == "2026-01-21T00:00:00+00:00"

    code, out, _ = cli("plan", LOOKBACK_DAYS="0")
    assert json.loads(out)["window_start"] == "2026-01-21T00:00:00+00:00"
    assert fingerprint(initialized / "warehouse.db") == warehouse_before


def test_plan_names_an_invalid_source_row_and_writes_nothing(cli, initialized):
    with sqlite3.connect(initialized / "app.db") as conn:
        conn.execute("UPDATE orders SET amount = 'twelve' WHERE order_id = 104")
    conn.close()
    err = one_line_error(*cli("plan"))
    assert "order 104: column amount = 'twelve'" in err
    assert sorted(p.name for p in initialized.iterdir()) == ["app.db"]


# --- settings and unreachable databases -------------------------------------------------


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"LOOKBACK_DAYS": "-1"}, "LOOKBACK_DAYS='-1' must be a whole number of days"),
        ({"PIPELINE_TIMEZONE": "Mars/Olympus"}, "PIPELINE_TIMEZONE: unknown time zone"),
        ({"PARTITIONS_START_DATE": "soon"}, "PARTITIONS_START_DATE"),
        ({"MAX_DELETE_SHARE": "1.5"}, "MAX_DELETE_SHARE='1.5' must be a share between 0 and 1"),
        ({"MAX_DELETE_SHARE": "half"}, "MAX_DELETE_SHARE='half' must be a share between 0 and 1"),
    ],
)
def test_invalid_settings_are_a_one_line_error(cli, data, setting, message):
    err = one_line_error(*cli("watermark", "show", **setting))
    assert message in err
    assert not data.exists()


@pytest.mark.parametrize(
    "argv, variable",
    [
        (["watermark", "show"], "WAREHOUSE_DATABASE_URL"),
        (["watermark", "history"], "WAREHOUSE_DATABASE_URL"),
        (["watermark", "rewind", "2026-01-01", "--reason", "x"], "WAREHOUSE_DATABASE_URL"),
        (["plan"], "SOURCE_DATABASE_URL"),
        (["demo", "init"], "SOURCE_DATABASE_URL"),
        (
            demo_set("2026-01-01", order="1", amount="1.00"),
            "SOURCE_DATABASE_URL",
        ),
    ],
)
def test_an_unreachable_database_never_shows_its_password(cli, argv, variable):
    code, out, err = cli(*argv, SOURCE_DATABASE_URL=PG_URL, WAREHOUSE_DATABASE_URL=PG_URL_2)
    one_line_error(code, out, err)
    assert "s3cret" not in out + err
    assert "postgresql+psycopg://u:***@127.0.0.1:1/" in err
    assert f"Check {variable}" in err


def test_an_unparseable_url_never_shows_its_password(cli):
    err = one_line_error(*cli("plan", SOURCE_DATABASE_URL="nonsense://u:s3cret@@host/x"))
    assert "s3cret" not in err


# --- as a user runs it ------------------------------------------------------------------


def _subprocess(tmp_path: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "SOURCE_DATABASE_URL",
            "WAREHOUSE_DATABASE_URL",
            "LOOKBACK_DAYS",
            "PARTITIONS_START_DATE",
            "PIPELINE_TIMEZONE",
        )
    }
    env.update(PIPELINE_DATA_DIR=str(tmp_path), **extra)
    return subprocess.run(
        [sys.executable, "-m", "pipeline_assets", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.e2e
def test_python_dash_m_runs_the_commands(tmp_path):
    done = _subprocess(tmp_path, "demo", "init")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("created the orders table in sqlite:///")
    done = _subprocess(tmp_path, "plan")
    assert (done.returncode, done.stderr) == (0, "")
    plan = json.loads(done.stdout)
    rows = source_rows(app_url(tmp_path))  # dated by the real clock: expected from the data
    assert (plan["rows_read"], plan["days_touched"]) == (
        len(rows),
        sorted({r[3][:10] for r in rows}),
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


@pytest.mark.e2e
@pytest.mark.parametrize(
    "argv, code, message",
    [
        (
            demo_set("2026-01-32"),
            1,
            "--updated-at: '2026-01-32' is not a valid date",
        ),
        (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
        (["watermark", "show"], 1, "cannot reach the warehouse database"),
    ],
)
def test_python_dash_m_fails_in_one_line_without_traceback(tmp_path, argv, code, message):
    engine = make_engine(f"sqlite:///{tmp_path / 'app.db'}", role="app")
    demo.init(engine)
    engine.dispose()
    before = fingerprint(tmp_path / "app.db")
    done = _subprocess(tmp_path, *argv, WAREHOUSE_DATABASE_URL=PG_URL)
    assert done.returncode == code
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "s3cret" not in done.stderr
    assert fingerprint(tmp_path / "app.db") == before


@pytest.mark.e2e
def test_the_cli_does_not_import_dagster(tmp_path):
    code = "import sys, pipeline_assets.cli; print('dagster' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "False\n")
