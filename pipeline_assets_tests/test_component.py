"""``pipeline_assets.IncrementalTable``: a user's own dg project declares its tables.

The user's project is the one Dagster's docs describe (a ``pyproject.toml`` with
``[tool.dg]``, a ``definitions.py`` that loads the defs folder, one folder per table) and
needs nothing from this repository: the component comes with the installed package.
The ``dg`` CLI runs for real in that project (about 10 s a call, so the story is one test).
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

from pipeline_assets.core.scaffold import suggest_declaration
from pipeline_assets.core.table.declare import PLACEHOLDER as CHANGE_ME
from pipeline_assets.core.table.orders import ORDERS_ATTRIBUTES

from .tables import PAYMENTS_ATTRIBUTES
from .user_project import BIN, declare, environment, project

PAYMENTS_DDL = (
    "CREATE TABLE payments (payment_id INTEGER NOT NULL, attempt INTEGER NOT NULL, "
    "status TEXT NOT NULL, fee NUMERIC(10, 2) NOT NULL, rate REAL, note TEXT, "
    "refundable BOOLEAN NOT NULL, settle_on DATE, modified_at TEXT NOT NULL, "
    "PRIMARY KEY (payment_id, attempt))"
)


def _source(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        conn.execute(PAYMENTS_DDL)
    return f"sqlite:///{path}"


def test_a_draft_declaration_is_read_from_the_source(tmp_path):
    url = _source(tmp_path / "app.db")
    draft = suggest_declaration(url, "payments")
    assert draft == {
        "table": "payments",
        "primary_key": ["payment_id", "attempt"],
        "cursor": "modified_at",
        "columns": {
            "payment_id": "integer",
            "attempt": "integer",
            "status": "text",
            "fee": "decimal(10,2)",
            "rate": {"type": "float", "nullable": True},
            "note": {"type": "text", "nullable": True},
            "refundable": "boolean",
            "settle_on": {"type": "date", "nullable": True},
            "modified_at": "timestamp",
        },
    }
    # unreachable, or no such table: placeholders that fail loudly, never a guess
    for missing in (
        suggest_declaration(url, "refunds"),
        suggest_declaration(f"sqlite:///{tmp_path / 'nowhere' / 'x.db'}", "t"),
    ):
        assert missing["primary_key"] == missing["cursor"] == CHANGE_ME


def test_the_draft_proposes_a_type_for_text_whose_values_all_read_as_one(tmp_path):
    """SQLite keeps money, days and stamps as text: the draft looks at their values and
    proposes what every one of them reads as, saying why on the column's line; text that
    does not (a code with a leading letter, a mix) stays text, without a word."""
    from pipeline_assets.core.scaffold import draft_declaration, render

    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount TEXT, whole TEXT, due TEXT, "
            "at TEXT, code TEXT, updated_at TEXT NOT NULL)"
        )
        conn.executemany(
            "INSERT INTO invoices VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (1, "12.50", "12", "2026-01-05", "2026-01-05 10:00", "A1", "2026-01-05"),
                (2, "-4761.4", "7", "2026-02-28", "2026-01-05T10:00:00+01:00", "7", "2026-01-06"),
                (3, None, "3", None, "2026-01-05T10:00:00Z", "B", "2026-01-07"),
            ],
        )
    draft = draft_declaration(f"sqlite:///{path}", "invoices")
    columns = draft.attributes["columns"]
    assert (columns["amount"], columns["whole"], columns["code"]) == (
        {"type": "decimal(18,2)", "nullable": True},
        {"type": "text", "nullable": True},  # whole numbers as text: codes, zip codes
        {"type": "text", "nullable": True},
    )
    assert (columns["due"]["type"], columns["at"]["type"], columns["updated_at"]) == (
        "date",
        "timestamp",
        "date",  # the change stamp, a date in every row: the cursor
    )
    assert draft.attributes["cursor"] == "updated_at"
    assert sorted(draft.notes) == ["amount", "at", "due", "updated_at"]
    assert "exact decimals with up to 2 place(s)" in draft.notes["amount"]
    text = render(draft, "pipeline_assets.IncrementalTable")
    assert "  amount:  # text in the source; the 2 value(s) sampled are all exact" in text
    assert yaml.safe_load(text)["attributes"] == draft.attributes
    assert not (tmp_path / "elsewhere.db").exists()
    assert draft_declaration(f"sqlite:///{tmp_path / 'elsewhere.db'}", "t").notes == {}
    assert not (tmp_path / "elsewhere.db").exists()  # never created by looking


def test_any_declared_table_builds_its_pipeline():
    """What this release refused before (the orders shape only) builds now, under its own
    names, from the component as from Python."""
    from pipeline_assets.component import IncrementalTable
    from pipeline_assets.definitions import build_definitions
    from pipeline_assets.settings import from_env

    spec = IncrementalTable(**PAYMENTS_ATTRIBUTES).spec()
    built = build_definitions(from_env({"PIPELINE_DATA_DIR": "/nowhere"}), spec=spec)
    assert {k.to_user_string() for k in built.resolve_all_asset_keys()} == {
        "payments",
        "captured_payments",
        "captured_per_day",
    }


def _dg(root: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "dg"), *argv],
        cwd=root,
        env=environment(root, **env),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.e2e
def test_a_users_project_lists_scaffolds_loads_and_refuses_a_clash(tmp_path):
    root = project(tmp_path / "shop")
    url = _source(tmp_path / "app.db")

    # Phase 1: the component type is there, with its description, for dg to offer
    listed = _dg(root, "list", "components")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "pipeline_assets.IncrementalTable" in listed.stdout

    # Phase 2: scaffolding reads the table's columns, key and change stamp from the source
    made = _dg(
        root,
        "scaffold",
        "defs",
        "pipeline_assets.IncrementalTable",
        "payments",
        SOURCE_DATABASE_URL=url,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    written = yaml.safe_load((root / "shop" / "defs" / "payments" / "defs.yaml").read_text())
    assert written["type"] == "pipeline_assets.IncrementalTable"
    assert written["attributes"] == suggest_declaration(url, "payments")
    (root / "shop" / "defs" / "payments" / "defs.yaml").unlink()

    # Phase 3: the orders declaration loads as the pipeline's own: same assets, same names;
    # payments beside it, under its own names, the two sharing their resources
    declare(root, "orders", ORDERS_ATTRIBUTES)
    declare(root, "payments", PAYMENTS_ATTRIBUTES)
    loaded = _dg(root, "list", "defs", "--json")
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    for name in (
        "orders",
        "paid_orders",
        "daily_revenue",
        "orders_job",
        "daily_files_job",
        "daily_job",
        "daily_schedule",
        "new_orders_sensor",
        "paid_orders_refresh_sensor",
        "orders_match_source",
        "payments",
        "captured_payments",
        "captured_per_day",
        "payments_job",
        "captured_payments_job",
        "payments_daily_job",
        "payments_daily_schedule",
        "new_payments_sensor",
        "captured_payments_refresh_sensor",
        "payments_match_source",
    ):
        assert f'"{name}"' in loaded.stdout, name

    # Phase 4: a second declaration taking a name of the first fails the load, naming both
    declare(
        root,
        "refunds",
        PAYMENTS_ATTRIBUTES
        | {
            "table": "refunds",
            "daily_files": [{"name": "paid_orders", "where": {"status": "refunded"}}],
        },
    )
    clash = _dg(root, "check", "defs")
    assert clash.returncode != 0
    said = clash.stdout + clash.stderr
    assert "daily_files[0].name: 'paid_orders': is taken by shop/defs/" in said, said[-3000:]
    assert "shop/defs/orders/defs.yaml" in said and "shop/defs/refunds/defs.yaml" in said


def test_the_draft_of_a_table_without_a_stamp_proposes_its_growing_id(tmp_path):
    """No change stamp, and a key the database numbers itself: the draft declares the
    table append-only (its id as the cursor, its first date or timestamp as the day),
    says so on the id's line, and leaves the day to the user when it has none."""
    from pipeline_assets.core.scaffold import draft_declaration, render
    from pipeline_assets.core.table.declare import declare

    with sqlite3.connect(tmp_path / "app.db") as conn:
        conn.execute(
            "CREATE TABLE events (event_id INTEGER PRIMARY KEY, kind TEXT NOT NULL, "
            "occurred_at TIMESTAMP NOT NULL)"
        )
        conn.execute("CREATE TABLE tags (tag_id INTEGER PRIMARY KEY, label TEXT NOT NULL)")
        conn.execute("CREATE TABLE codes (code TEXT PRIMARY KEY, label TEXT NOT NULL)")
    url = f"sqlite:///{tmp_path / 'app.db'}"
    draft = draft_declaration(url, "events")
    assert list(draft.attributes)[:5] == ["table", "primary_key", "cursor", "day_column", "columns"]
    assert (draft.attributes["cursor"], draft.attributes["day_column"]) == (
        "event_id",
        "occurred_at",
    )
    assert "declared append-only" in render(draft, "pipeline_assets.IncrementalTable")
    assert declare(draft.attributes).counts_ids
    tags = suggest_declaration(url, "tags")
    assert (tags["cursor"], tags["day_column"]) == ("tag_id", CHANGE_ME)
    codes = suggest_declaration(url, "codes")
    assert codes["cursor"] == CHANGE_ME and "day_column" not in codes
