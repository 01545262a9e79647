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

from pipeline_assets.core.scaffold import CHANGE_ME, suggest_declaration
from pipeline_assets.core.spec import ORDERS_ATTRIBUTES

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
