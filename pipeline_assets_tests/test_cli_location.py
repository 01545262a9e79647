"""``pipeline-assets … -m MODULE --table N``: the table commands work on the tables a code
location declares, found as ``dagster -m`` finds its definitions, each with its own
watermark, history, plan and verify, and every printed command names that location.

The user's location here is a module of the test's own, ``shop_<id>.definitions``, whose
``Definitions`` hold an asset per table carrying its declaration (the metadata every
table asset carries, which is all the command line reads): ``orders`` and ``payments``
in one app database and one warehouse, real SQLite files under tmp_path.
"""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from pipeline_assets.core.db import make_engine
from pipeline_assets.core.load import load_orders, load_table
from pipeline_assets.core.spec import ORDERS_ATTRIBUTES
from pipeline_assets.core.times import UTC

from .conftest import NOW
from .tables import PAYMENTS, PAYMENTS_ATTRIBUTES, delete_payment, make_payments

PAYMENT_ROWS = [  # payment_id, attempt, status, cents, fee, rate, note, refundable, day, stamp
    (7, 9, "failed", 1999, "0.00", None, None, False, None, "2026-01-20 09:00:00"),
    (7, 10, "captured", 1999, "1.10", 0.5, "Grüße ☕", True, "2026-01-21",
     "2026-01-20 10:00:00"),
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
def shop(tmp_path: Path):
    """A user's code location declaring orders and payments, importable from tmp_path
    (the working directory of every ``cli`` call); forgotten afterwards."""
    package = f"shop_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "definitions.py").write_text(textwrap.dedent(f"""\
        import dagster as dg

        from pipeline_assets.location import DECLARATION

        TABLES = {{"orders": {ORDERS_ATTRIBUTES!r}, "payments": {PAYMENTS_ATTRIBUTES!r}}}
        defs = dg.Definitions(assets=[dg.AssetSpec(name, metadata={{DECLARATION: attrs}})
                                      for name, attrs in TABLES.items()])
        """))
    yield f"{package}.definitions"
    for name in [n for n in sys.modules if n.split(".")[0] == package]:
        del sys.modules[name]


@pytest.fixture
def both(cli, data):
    """The app database holding the chapter's orders and three payments."""
    assert cli("demo", "init", "--history-days", "0")[0] == 0
    source = make_engine(f"sqlite:///{data / 'app.db'}", role="source")
    make_payments(source, rows=PAYMENT_ROWS)
    source.dispose()
    return data


def load_both(data: Path) -> None:
    """One incremental load of each table, through core, as their assets run it."""
    source = make_engine(f"sqlite:///{data / 'app.db'}", role="source")
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
    assert json.loads(shown[1]) == {"watermark": None, "lookback_days": 2,
                                    "window_start": None}
    assert not data.exists()


@pytest.mark.parametrize("argv", [
    ["watermark", "show"], ["watermark", "history", "--json"], ["plan"], ["verify"],
    ["watermark", "rewind", "2026-01-01", "--reason", "x"],
])
def test_a_table_the_location_does_not_declare_names_the_tables_it_does(cli, data, argv):
    err = one_line_error(cli(*argv, "--table", "payments"))
    assert err == ("pipeline-assets: error: --table payments: the code location "
                   "pipeline_assets.definitions declares no such table; its tables: "
                   "orders\n")
    assert not data.exists()


def test_a_module_that_does_not_import_is_a_one_line_error(cli, data):
    err = one_line_error(cli("plan", "-m", "nowhere.definitions"))
    assert "cannot import the code location 'nowhere.definitions'" in err
    assert not data.exists()


# --- a user's location of two tables ---------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["watermark", "show"], ["watermark", "history"], ["plan"],
    ["watermark", "rewind", "2026-01-01", "--reason", "x"],
])
def test_with_two_tables_the_table_must_be_named(cli, both, shop, argv):
    before = sorted(p.name for p in both.iterdir())
    err = one_line_error(cli(*argv, "-m", shop))
    assert err == (f"pipeline-assets: error: the code location {shop} declares 2 tables "
                   "(orders, payments): name one with --table\n")
    assert sorted(p.name for p in both.iterdir()) == before


def test_each_table_has_its_own_watermark_history_and_plan(cli, both, shop):
    def table(name: str, *argv: str) -> tuple[int, str, str]:
        return cli(*argv, "-m", shop, "--table", name)

    assert json.loads(table("payments", "watermark", "show")[1])["watermark"] is None
    plan = json.loads(table("payments", "plan")[1])
    assert (plan["rows_read"], plan["days_touched"], plan["watermark_after"]) == (
        3, ["2026-01-20", "2026-01-22"], "2026-01-22T23:59:59+00:00")
    assert plan["batch_id"].startswith("payments-")
    assert json.loads(table("orders", "plan")[1])["rows_read"] == 6
    assert sorted(p.name for p in both.iterdir()) == ["app.db"]  # plans write nothing

    load_both(both)
    code, out, err = table("payments", "watermark", "rewind", "2026-01-21", "--reason",
                           "replay payments")
    assert (code, err) == (0, "")
    assert json.loads(table("payments", "watermark", "show")[1]) == {
        "watermark": "2026-01-21T00:00:00+00:00", "lookback_days": 2,
        "window_start": "2026-01-19T00:00:00+00:00"}
    assert json.loads(table("orders", "watermark", "show")[1])["watermark"] == \
        "2026-01-21T00:00:00+00:00"  # the newest order, untouched by the rewind

    history = json.loads(table("payments", "watermark", "history", "--json")[1])
    assert [{k: h[k] for k in ("kind", "old_value", "new_value", "reason")}
            for h in history] == [
        {"kind": "load", "old_value": None, "new_value": "2026-01-22T23:59:59+00:00",
         "reason": None},
        {"kind": "rewind", "old_value": "2026-01-22T23:59:59+00:00",
         "new_value": "2026-01-21T00:00:00+00:00", "reason": "replay payments"}]
    assert all(set(h) == {"kind", "old_value", "new_value", "reason", "batch_id",
                          "changed_at"} for h in history)
    assert history[0]["batch_id"].startswith("payments-")
    orders = json.loads(table("orders", "watermark", "history", "--json")[1])
    assert [(h["kind"], h["batch_id"][:7]) for h in orders] == [("load", "orders-")]


def test_verify_checks_every_table_and_its_repairs_name_the_location(cli, both, shop):
    load_both(both)
    code, out, _ = cli("verify", "-m", shop)
    assert code == 0, out
    assert out.startswith(f"table orders ({shop}):\n")
    assert f"\n\ntable payments ({shop}):\n" in out

    source = make_engine(f"sqlite:///{both / 'app.db'}", role="source")
    delete_payment(source, 7, 10)  # the app deletes one attempt
    source.dispose()
    code, out, _ = cli("verify", "-m", shop)
    assert code == 1
    printed = out.split("to repair, run in this order:\n", 1)[1].splitlines()
    assert [shlex.split(line)[:7] for line in printed] == [
        ["dagster", "asset", "materialize", "-m", shop, "--select", "payments"],
        ["dagster", "asset", "materialize", "-m", shop, "--select",
         "captured_payments,captured_per_day"]]
    assert json.loads(shlex.split(printed[0])[8])["ops"]["payments"]["config"] == {
        "start": "2026-01-20", "end": "2026-01-21"}

    report = json.loads(cli("verify", "-m", shop, "--json")[1])
    assert (report["ok"], report["exit_code"], report["module"]) == (False, 1, shop)
    assert sorted(report["tables"]) == ["orders", "payments"]
    assert report["tables"]["orders"]["ok"] is True
    assert report["repair"] == [line.strip() for line in printed]
    alone = json.loads(cli("verify", "-m", shop, "--table", "payments", "--json")[1])
    assert alone["repair"] == report["repair"]  # one table: its report as it always was
