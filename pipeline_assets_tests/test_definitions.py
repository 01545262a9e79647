"""The code location loads, names resolve, and the layers point one way only."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import pipeline_assets
from pipeline_assets.definitions import defs

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(pipeline_assets.__file__).parent


def test_defs_hold_the_three_assets_and_their_checks():
    keys = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    assert keys == {"orders", "paid_orders", "daily_revenue"}
    checks = {key.name for key in defs.resolve_asset_graph().asset_check_keys}
    assert checks == {"orders_match_source", "lateness_within_lookback"}
    global_job = defs.resolve_implicit_global_asset_job_def()
    assert {k.to_user_string() for k in global_job.asset_layer.selected_asset_keys} == keys


# Each job by name, with what its description promises it runs (sensors, the schedule and
# the repair commands launch them by these names).
JOBS = {
    "orders_job": {"orders"},
    "daily_files_job": {"paid_orders", "daily_revenue"},
    "daily_job": {"orders", "paid_orders", "daily_revenue"},
}


def test_every_job_resolves_and_runs_exactly_its_assets():
    for name, assets in JOBS.items():
        job = defs.resolve_job_def(name)
        assert {k.to_user_string() for k in job.asset_layer.selected_asset_keys} == assets, name


def test_every_sensor_and_the_schedule_resolve_and_launch_their_job():
    assert defs.resolve_sensor_def("new_orders_sensor").job_name == "orders_job"
    assert defs.resolve_sensor_def("paid_orders_refresh_sensor").job_name == "daily_files_job"
    schedule = defs.resolve_schedule_def("daily_schedule")
    assert (schedule.job_name, schedule.cron_schedule) == ("daily_job", "30 0 * * *")


def test_workspace_and_pyproject_both_name_the_module():
    workspace = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["python_module"]["module_name"] == \
        "pipeline_assets.definitions"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["tool"]["dagster"]["module_name"] == "pipeline_assets.definitions"


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_core_never_imports_dagster():
    offenders = [str(p.relative_to(PACKAGE)) for p in (PACKAGE / "core").rglob("*.py")
                 if "dagster" in _imports(p)]
    assert offenders == []


def test_pyproject_declares_every_package_the_code_imports():
    """Installing the project must bring what it imports, not rely on Dagster's own
    dependencies; and the Python it claims must be the one the code needs (tomllib)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=\[ ;]", dep, maxsplit=1)[0].lower().replace("-", "_")
                for dep in pyproject["dependencies"]}
    imported = set()
    for path in PACKAGE.rglob("*.py"):
        imported |= _imports(path)
    third_party = imported - set(sys.stdlib_module_names) - {"pipeline_assets"}
    # the distributions whose import name differs from their name
    third_party = {{"upath": "universal_pathlib", "yaml": "pyyaml"}.get(name, name)
                   for name in third_party}
    # imported only where an extra's feature runs, and that extra must bring it:
    # import name -> (extra, distribution)
    optional = {"connectorx": ("mysql", "connectorx"), "celery": ("celery", "celery"),
                "kombu": ("celery", "kombu"), "dagster_celery": ("celery", "dagster-celery")}
    for extra, dist in optional.values():
        assert any(re.split(r"[<>=\[ ;]", dep, maxsplit=1)[0] == dist
                   for dep in pyproject["optional-dependencies"][extra]), (extra, dist)
    assert third_party - set(optional) <= declared, sorted(third_party - declared)
    assert pyproject["requires-python"] == ">=3.11"


def test_no_private_dagster_imports_in_the_package():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        assert "dagster._" not in text, f"{path.name} imports Dagster internals"


@pytest.mark.e2e
def test_importing_definitions_has_no_side_effects(tmp_path):
    """Loading the code location must not create folders or open databases."""
    env = {**os.environ, "PIPELINE_DATA_DIR": str(tmp_path / "data")}
    subprocess.run([sys.executable, "-c", "import pipeline_assets.definitions"],
                   cwd=tmp_path, env=env, check=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.e2e
def test_bad_settings_fail_loading_with_the_variable_named(tmp_path):
    env = {**os.environ, "LOOKBACK_DAYS": "two"}
    done = subprocess.run([sys.executable, "-c", "import pipeline_assets.definitions"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "LOOKBACK_DAYS='two'" in done.stderr
