"""``pipeline-assets … -m MODULE --table N``: the table commands work on the tables a code
location declares, found as ``dagster -m`` finds its definitions, each with its own
watermark, history, plan and verify, and every printed command names that location.

The user's location here is a dg project of the test's own, ``shop_<id>.definitions``,
declaring ``orders`` and ``payments`` in ``defs/<table>/defs.yaml``: one app database and
one warehouse, real SQLite files under tmp_path.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline_assets.core.daily_files import read_committed_day
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.load.batch import load_table
from pipeline_assets.core.table.orders import ORDERS_ATTRIBUTES
from pipeline_assets.core.times import UTC
from pipeline_assets_tests.orders import load_orders

from .conftest import NOW
from .plain import query
from .support import dg_project, user_environment
from .table_sources import TableSource, stamp
from .tables import (
    CAPTURES,
    CAPTURES_ATTRIBUTES,
    PAYMENTS,
    PAYMENTS_ATTRIBUTES,
    PRICES,
    PRICES_ATTRIBUTES,
    delete_payment,
    make_payments,
)

BIN = Path(sys.executable).parent
PAYMENT_ROWS = [  # payment_id, attempt, status, cents, fee, rate, note, refundable, day, stamp
    (7, 9, "failed", 1999, "0.00", None, None, False, None, "2026-01-20 09:00:00"),
    (7, 10, "captured", 1999, "1.10", 0.5, "Grüße ☕", True, "2026-01-21", "2026-01-20 10:00:00"),
    (12, 1, "captured", 250000, "12345678.99", 2.5, "", True, None, "2026-01-22 23:59:59"),
]


def one_line_error(result: tuple[int, str, str]) -> str:
    code, out, err = result
    assert (code, out) == (1, ""), err
    assert err.startswith("pipeline-assets: error: ") and err.count("\n") == 1, err
    return err


@pytest.fixture
def data(env) -> Path:
    return Path(env["PIPELINE_DATA_DIR"])


@pytest.fixture
def project(tmp_path: Path, monkeypatch):
    """tmp_path, the working directory of every ``cli`` call, as a user's project folder;
    its packages forgotten afterwards."""
    # the location is built from this process's environment (the one a user's shell has)
    monkeypatch.setenv("PIPELINE_DATA_DIR", str(tmp_path / "data"))
    for name in ("SOURCE_DATABASE_URL", "WAREHOUSE_DATABASE_URL", "PAID_ORDERS_URL"):
        monkeypatch.delenv(name, raising=False)
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("shop_")]:
        del sys.modules[name]


@pytest.fixture
def shop(project: Path) -> str:
    """A user's project declaring orders and payments: its module."""
    return dg_project(project, {"orders": ORDERS_ATTRIBUTES, "payments": PAYMENTS_ATTRIBUTES})


@pytest.fixture
def both(cli, data):
    """The app database holding the chapter's orders and three payments."""
    assert cli("demo", "init", "--history-days", "0")[0] == 0
    source = make_engine(f"sqlite:///{data / 'app.db'}", role="app")
    make_payments(source, rows=PAYMENT_ROWS)
    source.dispose()
    return data


def load_both(data: Path) -> None:
    """One incremental load of each table, through core, as their assets run it."""
    source = make_engine(f"sqlite:///{data / 'app.db'}", role="app")
    warehouse = make_engine(f"sqlite:///{data / 'warehouse.db'}", role="warehouse")
    try:
        load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
        load_table(source, warehouse, spec=PAYMENTS, tz=UTC, lookback_days=2, now=NOW)
    finally:
        source.dispose()
        warehouse.dispose()


# --- this project's location, by default ---------------------------------------------------


def test_by_default_the_commands_work_on_this_projects_orders(cli, data):
    shown = cli("watermark", "show")
    assert cli("watermark", "show", "--table", "orders") == shown
    assert cli("watermark", "show", "-m", "pipeline_assets.definitions") == shown
    assert json.loads(shown[1]) == {"watermark": None, "lookback_days": 2, "window_start": None}
    assert not data.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["watermark", "show"],
        ["watermark", "history", "--json"],
        ["plan"],
        ["verify"],
        ["files"],
        ["watermark", "rewind", "2026-01-01", "--reason", "x"],
    ],
)
def test_a_table_the_location_does_not_declare_names_the_tables_it_does(cli, data, argv):
    err = one_line_error(cli(*argv, "--table", "payments"))
    assert err == (
        "pipeline-assets: error: --table payments: the code location "
        "pipeline_assets.definitions declares no such table; its tables: "
        "orders\n"
    )
    assert not data.exists()


def test_a_file_set_the_location_does_not_declare_names_those_it_does(cli, data):
    err = one_line_error(cli("files", "--files", "paid"))
    assert err == (
        "pipeline-assets: error: --files paid: the code location pipeline_assets.definitions "
        "declares no such file set; its file sets: paid_orders\n"
    )
    code, out, _ = cli("files", "--json")  # nothing built yet: an empty list, nothing made
    assert (code, json.loads(out)) == (0, [])
    assert not data.exists()


def test_a_module_that_does_not_import_is_a_one_line_error(cli, data):
    err = one_line_error(cli("plan", "-m", "nowhere.definitions"))
    assert "cannot import the code location 'nowhere.definitions'" in err
    assert not data.exists()


def test_a_table_with_its_own_source_url_reads_that_database(cli, project):
    url = f"sqlite:///{project / 'payments.db'}"
    module = dg_project(project, {"payments": PAYMENTS_ATTRIBUTES | {"source_url": url}})
    err = one_line_error(cli("plan", "-m", module))  # one table: no --table needed
    package = module.partition(".")[0]
    assert err == (  # named with the file it is declared in, as a step's failure does
        f"pipeline-assets: error: payments ({package}/defs/payments/defs.yaml): the source "
        f"database {url} of the table payments does not exist: check its source_url\n"
    )
    assert not (project / "payments.db").exists()

    source = make_engine(url, role="app")
    make_payments(source, rows=PAYMENT_ROWS)
    source.dispose()
    code, out, err = cli("plan", "-m", module)
    assert (code, err) == (0, "")
    assert json.loads(out)["rows_read"] == 3
    assert not (project / "data").exists()  # no app.db, and nothing written


# --- a user's location of two tables ---------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["watermark", "show"],
        ["watermark", "history"],
        ["plan"],
        ["watermark", "rewind", "2026-01-01", "--reason", "x"],
    ],
)
def test_with_two_tables_the_table_must_be_named(cli, both, shop, argv):
    before = sorted(p.name for p in both.iterdir())
    err = one_line_error(cli(*argv, "-m", shop))
    assert err == (
        f"pipeline-assets: error: the code location {shop} declares 2 tables "
        "(orders, payments): name one with --table\n"
    )
    assert sorted(p.name for p in both.iterdir()) == before


def test_each_table_has_its_own_watermark_history_and_plan(cli, both, shop):
    def table(name: str, *argv: str) -> tuple[int, str, str]:
        return cli(*argv, "-m", shop, "--table", name)

    assert json.loads(table("payments", "watermark", "show")[1])["watermark"] is None
    plan = json.loads(table("payments", "plan")[1])
    assert (plan["rows_read"], plan["days_touched"], plan["watermark_after"]) == (
        3,
        ["2026-01-20", "2026-01-22"],
        "2026-01-22T23:59:59+00:00",
    )
    assert plan["batch_id"].startswith("payments-")
    assert json.loads(table("orders", "plan")[1])["rows_read"] == 6
    assert sorted(p.name for p in both.iterdir()) == ["app.db"]  # plans write nothing

    load_both(both)
    code, out, err = table(
        "payments", "watermark", "rewind", "2026-01-21", "--reason", "replay payments"
    )
    assert (code, err) == (0, "")
    assert json.loads(table("payments", "watermark", "show")[1]) == {
        "watermark": "2026-01-21T00:00:00+00:00",
        "lookback_days": 2,
        "window_start": "2026-01-19T00:00:00+00:00",
    }
    assert (
        json.loads(table("orders", "watermark", "show")[1])["watermark"]
        == "2026-01-21T00:00:00+00:00"
    )  # the newest order, untouched by the rewind

    history = json.loads(table("payments", "watermark", "history", "--json")[1])
    assert [{k: h[k] for k in ("kind", "old_value", "new_value", "reason")} for h in history] == [
        {
            "kind": "load",
            "old_value": None,
            "new_value": "2026-01-22T23:59:59+00:00",
            "reason": None,
        },
        {
            "kind": "rewind",
            "old_value": "2026-01-22T23:59:59+00:00",
            "new_value": "2026-01-21T00:00:00+00:00",
            "reason": "replay payments",
        },
    ]
    assert all(
        set(h) == {"kind", "old_value", "new_value", "reason", "batch_id", "changed_at"}
        for h in history
    )
    assert history[0]["batch_id"].startswith("payments-")
    orders = json.loads(table("orders", "watermark", "history", "--json")[1])
    assert [(h["kind"], h["batch_id"][:7]) for h in orders] == [("load", "orders-")]


def test_verify_checks_every_table_and_its_repairs_name_the_location(cli, both, shop):
    load_both(both)
    code, out, _ = cli("verify", "-m", shop)
    assert code == 0, out
    assert out.startswith(f"table orders ({shop}):\n")
    assert f"\n\ntable payments ({shop}):\n" in out

    source = make_engine(f"sqlite:///{both / 'app.db'}", role="app")
    delete_payment(source, 7, 10)  # the app deletes one attempt
    source.dispose()
    code, out, _ = cli("verify", "-m", shop)
    assert code == 1
    printed = out.split("to repair, run in this order:\n", 1)[1].splitlines()
    assert [shlex.split(line)[:7] for line in printed] == [
        ["dagster", "asset", "materialize", "-m", shop, "--select", "payments"],
        [
            "dagster",
            "asset",
            "materialize",
            "-m",
            shop,
            "--select",
            "captured_payments,captured_per_day",
        ],
    ]
    assert json.loads(shlex.split(printed[0])[8])["ops"]["payments"]["config"] == {
        "start": "2026-01-20",
        "end": "2026-01-21",
    }

    report = json.loads(cli("verify", "-m", shop, "--json")[1])
    assert (report["ok"], report["exit_code"], report["module"]) == (False, 1, shop)
    assert sorted(report["tables"]) == ["orders", "payments"]
    assert report["tables"]["orders"]["ok"] is True
    assert report["repair"] == [line.strip() for line in printed]
    alone = json.loads(cli("verify", "-m", shop, "--table", "payments", "--json")[1])
    assert alone["repair"] == report["repair"]  # one table: its report as it always was


@pytest.mark.e2e
def test_the_printed_repairs_run_as_printed_in_the_users_project(cli, both, shop, tmp_path):
    """Pasted into the real ``dagster`` CLI in the project's folder, the commands verify
    printed for the user's location delete the payment the app deleted, from the
    warehouse and from its day file."""
    load_both(both)
    source = make_engine(f"sqlite:///{both / 'app.db'}", role="app")
    delete_payment(source, 7, 10)
    source.dispose()
    report = json.loads(cli("verify", "-m", shop, "--table", "payments", "--json")[1])
    assert len(report["repair"]) == 2

    env = user_environment(data=both, home=tmp_path / "home")
    for command in report["repair"]:
        argv = shlex.split(command)
        done = subprocess.run(
            [str(BIN / argv[0]), *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (command, done.stderr[-3000:])

    assert [
        (r[0], r[1])
        for r in query(
            f"sqlite:///{both / 'warehouse.db'}",
            "SELECT payment_id, attempt FROM payments ORDER BY 1, 2",
        )
    ] == [(7, 9), (12, 1)]
    assert read_committed_day(both / "captured_payments", "2026-01-20") == []
    code, out, _ = cli("verify", "-m", shop)
    assert code == 0, out


def test_the_table_shapes_are_declared_in_yaml_and_served_by_the_commands(cli, project):
    """A ``day_column`` and a ``cursor: null`` written in defs.yaml, as a user writes them:
    the definitions load, ``plan`` shows what a run would do, and a table without a
    change stamp has no watermark to rewind."""
    url = f"sqlite:///{project / 'shop.db'}"
    engine = make_engine(url, role="app")
    for spec in (CAPTURES, PRICES):
        app = TableSource(engine, spec)
        app.create()
        app.put(1, stamp("2026-01-05T10:00"), day=stamp("2026-01-03T10:00"))
        app.put(2, stamp("2026-01-06T10:00"), day=stamp("2026-01-06T09:00"))
    module = dg_project(
        project,
        {
            "captures": CAPTURES_ATTRIBUTES | {"source_url": url},
            "prices": PRICES_ATTRIBUTES | {"source_url": url},
        },
    )
    captures = json.loads(cli("plan", "-m", module, "--table", "captures")[1])
    assert (captures["kind"], captures["days_touched"], captures["watermark_after"]) == (
        "incremental",
        ["2026-01-03", "2026-01-06"],
        "2026-01-06T10:00:00+00:00",
    )
    prices = json.loads(cli("plan", "-m", module, "--table", "prices")[1])
    assert (prices["kind"], prices["inserted"], prices["watermark_after"]) == ("full", 2, None)
    assert prices["days_touched"] == ["2026-01-03", "2026-01-06"]
    err = one_line_error(
        cli("watermark", "rewind", "2026-01-01", "--reason", "x", "-m", module, "--table", "prices")
    )
    assert f"prices ({module.partition('.')[0]}/defs/prices/defs.yaml): it has no cursor" in err
    assert "no watermark to rewind" in err
