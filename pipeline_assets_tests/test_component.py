"""``pipeline_assets.IncrementalTable``: a user's own dg project declares its tables.

The user's project is the one Dagster's docs describe (a ``pyproject.toml`` with
``[tool.dg]``, a ``definitions.py`` that loads the defs folder, one folder per table) and
needs nothing from this repository: the component comes with the installed package.
The ``dg`` CLI runs for real in that project (about 10 s a call, so the story is one test).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from pipeline_assets.core.scaffold import CHANGE_ME, suggest_declaration
from pipeline_assets.core.spec import ORDERS_ATTRIBUTES

from .tables import PAYMENTS_ATTRIBUTES

BIN = Path(sys.executable).parent
PAYMENTS_DDL = (
    "CREATE TABLE payments (payment_id INTEGER NOT NULL, attempt INTEGER NOT NULL, "
    "status TEXT NOT NULL, fee NUMERIC(10, 2) NOT NULL, rate REAL, note TEXT, "
    "refundable BOOLEAN NOT NULL, settle_on DATE, modified_at TEXT NOT NULL, "
    "PRIMARY KEY (payment_id, attempt))")


def _source(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        conn.execute(PAYMENTS_DDL)
    return f"sqlite:///{path}"


def test_a_draft_declaration_is_read_from_the_source(tmp_path):
    url = _source(tmp_path / "app.db")
    draft = suggest_declaration(url, "payments")
    assert draft == {
        "table": "payments", "primary_key": ["payment_id", "attempt"],
        "cursor": "modified_at",
        "columns": {"payment_id": "integer", "attempt": "integer", "status": "text",
                    "fee": "decimal(10,2)", "rate": {"type": "float", "nullable": True},
                    "note": {"type": "text", "nullable": True}, "refundable": "boolean",
                    "settle_on": {"type": "date", "nullable": True},
                    "modified_at": "timestamp"},
    }
    # unreachable, or no such table: placeholders that fail loudly, never a guess
    for missing in (suggest_declaration(url, "refunds"),
                    suggest_declaration(f"sqlite:///{tmp_path / 'nowhere' / 'x.db'}", "t")):
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
        "payments", "captured_payments", "captured_per_day"}


def _project(root: Path) -> Path:
    (root / "shop" / "defs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(textwrap.dedent("""\
        [project]
        name = "shop"
        version = "0.1.0"

        [tool.dg]
        directory_type = "project"

        [tool.dg.project]
        root_module = "shop"
        """))
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "definitions.py").write_text(textwrap.dedent("""\
        from pathlib import Path

        import dagster as dg


        @dg.definitions
        def defs():
            return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
        """))
    return root


def _declare(root: Path, folder: str, attributes: dict) -> None:
    (root / "shop" / "defs" / folder).mkdir(parents=True, exist_ok=True)
    (root / "shop" / "defs" / folder / "defs.yaml").write_text(yaml.safe_dump(
        {"type": "pipeline_assets.IncrementalTable", "attributes": attributes},
        sort_keys=False))


def _dg(root: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    base = {key: value for key, value in os.environ.items()
            if not key.startswith(("PIPELINE_", "SOURCE_DATABASE", "WAREHOUSE_DATABASE"))}
    base |= {"DAGSTER_HOME": str(root / "home"), "PIPELINE_DATA_DIR": str(root / "data"),
             "VIRTUAL_ENV": str(BIN.parent), "PATH": f"{BIN}{os.pathsep}{base.get('PATH', '')}",
             **env}
    (root / "home").mkdir(exist_ok=True)
    (root / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return subprocess.run([str(BIN / "dg"), *argv], cwd=root, env=base, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.e2e
def test_a_users_project_lists_scaffolds_loads_and_refuses_a_clash(tmp_path):
    root = _project(tmp_path / "shop")
    url = _source(tmp_path / "app.db")

    # Phase 1: the component type is there, with its description, for dg to offer
    listed = _dg(root, "list", "components")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "pipeline_assets.IncrementalTable" in listed.stdout

    # Phase 2: scaffolding reads the table's columns, key and change stamp from the source
    made = _dg(root, "scaffold", "defs", "pipeline_assets.IncrementalTable", "payments",
               SOURCE_DATABASE_URL=url)
    assert made.returncode == 0, made.stderr[-2000:]
    written = yaml.safe_load((root / "shop" / "defs" / "payments" / "defs.yaml").read_text())
    assert written["type"] == "pipeline_assets.IncrementalTable"
    assert written["attributes"] == suggest_declaration(url, "payments")
    (root / "shop" / "defs" / "payments" / "defs.yaml").unlink()

    # Phase 3: the orders declaration loads as the pipeline's own: same assets, same names;
    # payments beside it, under its own names, the two sharing their resources
    _declare(root, "orders", ORDERS_ATTRIBUTES)
    _declare(root, "payments", PAYMENTS_ATTRIBUTES)
    loaded = _dg(root, "list", "defs", "--json")
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    for name in ("orders", "paid_orders", "daily_revenue", "orders_job", "daily_files_job",
                 "daily_job", "daily_schedule", "new_orders_sensor",
                 "paid_orders_refresh_sensor", "orders_match_source",
                 "payments", "captured_payments", "captured_per_day", "payments_job",
                 "captured_payments_job", "payments_daily_job", "payments_daily_schedule",
                 "new_payments_sensor", "captured_payments_refresh_sensor",
                 "payments_match_source"):
        assert f'"{name}"' in loaded.stdout, name

    # Phase 4: a second declaration taking a name of the first fails the load, naming both
    _declare(root, "refunds", PAYMENTS_ATTRIBUTES | {"table": "refunds", "daily_files": [
        {"name": "paid_orders", "where": {"status": "refunded"}}]})
    clash = _dg(root, "check", "defs")
    assert clash.returncode != 0
    said = clash.stdout + clash.stderr
    assert "daily_files[0].name: 'paid_orders': is taken by shop/defs/" in said, said[-3000:]
    assert "shop/defs/orders/defs.yaml" in said and "shop/defs/refunds/defs.yaml" in said
