"""The code location loads, names resolve, and the layers point one way only."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, Definitions, JsonMetadataValue

import pipeline_assets
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.table.declare import declare
from pipeline_assets.definitions import build_definitions, defs
from pipeline_assets.location import DECLARATION
from pipeline_assets.settings import from_env

from .tables import PAYMENTS, PAYMENTS_ATTRIBUTES

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
    assert (
        workspace["load_from"][0]["python_module"]["module_name"] == "pipeline_assets.definitions"
    )
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


def test_the_layers_hold():
    """pyproject.toml's import-linter contracts, checked by the tool itself: core never
    imports Dagster nor the shell above it, its packages import only those below them, and
    no two modules import each other, even through others (docs/design.md)."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],  # none in the checkout
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    for contract in (
        "core never imports Dagster",
        "The Dagster shell and the command line stand above core",
        "core's packages, in one order",
        "No cycle between modules",
    ):
        assert f"{contract}" in done.stdout and "0 broken" in done.stdout, contract
    offenders = [  # and without the tool: not one import of Dagster under core/
        str(p.relative_to(PACKAGE))
        for p in (PACKAGE / "core").rglob("*.py")
        if "dagster" in _imports(p)
    ]
    assert offenders == []


MODULE_LINES, FUNCTION_LINES = 400, 60


def test_every_module_and_function_reads_in_one_sitting():
    """The house rule that keeps the package readable in an hour: no module over 400
    lines, no function over 60 (from ``def`` to its last line, docstring included)."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        name = str(path.relative_to(PACKAGE))
        if (count := text.count("\n")) > MODULE_LINES:
            long.append(f"{name}: {count} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > FUNCTION_LINES:
                    long.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert long == []


def test_pyproject_declares_every_package_the_code_imports():
    """Installing the project must bring what it imports, not rely on Dagster's own
    dependencies; and the Python it claims must be the one the code needs (tomllib)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {
        re.split(r"[<>=\[ ;]", dep, maxsplit=1)[0].lower().replace("-", "_")
        for dep in pyproject["dependencies"]
    }
    imported = set()
    for path in PACKAGE.rglob("*.py"):
        imported |= _imports(path)
    third_party = imported - set(sys.stdlib_module_names) - {"pipeline_assets"}
    # the distributions whose import name differs from their name
    third_party = {
        {"upath": "universal_pathlib", "yaml": "pyyaml"}.get(name, name) for name in third_party
    }
    # imported only where an extra's feature runs, and that extra must bring it:
    # import name -> (extra, distribution)
    optional = {
        "connectorx": ("mysql", "connectorx"),
        "celery": ("celery", "celery"),
        "kombu": ("celery", "kombu"),
        "dagster_celery": ("celery", "dagster-celery"),
    }
    for extra, dist in optional.values():
        assert any(
            re.split(r"[<>=\[ ;]", dep, maxsplit=1)[0] == dist
            for dep in pyproject["optional-dependencies"][extra]
        ), (extra, dist)
    assert third_party - set(optional) <= declared, sorted(third_party - declared)
    assert pyproject["requires-python"] == ">=3.11"


# The one exception: a run launcher's health check returns these two types, which Dagster
# exports nowhere else (its own launchers, dagster-celery's and dagster-k8s's, import
# them from here too); run_launcher.py is the only module that may.
HEALTH_CHECK_TYPES = "from dagster._core.launcher import CheckRunHealthResult, WorkerStatus"


def test_no_private_dagster_imports_in_the_package():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        if path.name == "run_launcher.py":
            assert text.count(HEALTH_CHECK_TYPES) == 1
            text = text.replace(HEALTH_CHECK_TYPES, "")
        assert "dagster._" not in text, f"{path.name} imports Dagster internals"


@pytest.mark.e2e
def test_importing_definitions_has_no_side_effects(tmp_path):
    """Loading the code location must not create folders or open databases."""
    env = {**os.environ, "PIPELINE_DATA_DIR": str(tmp_path / "data")}
    subprocess.run(
        [sys.executable, "-c", "import pipeline_assets.definitions"],
        cwd=tmp_path,
        env=env,
        check=True,
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.e2e
def test_bad_settings_fail_loading_with_the_variable_named(tmp_path):
    env = {**os.environ, "LOOKBACK_DAYS": "two"}
    done = subprocess.run(
        [sys.executable, "-c", "import pipeline_assets.definitions"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "LOOKBACK_DAYS='two'" in done.stderr


# --- any declared table: names, metadata, resources ----------------------------------------


def _settings(tmp_path: Path, **env: str):
    return from_env({"PIPELINE_DATA_DIR": str(tmp_path / "data"), **env}, cwd=tmp_path)


def test_a_declared_table_gets_every_name_by_the_rule(tmp_path):
    built = build_definitions(_settings(tmp_path), spec=PAYMENTS)
    assert {k.to_user_string() for k in built.resolve_all_asset_keys()} == {
        "payments",
        "captured_payments",
        "captured_per_day",
    }
    assert {
        (k.asset_key.to_user_string(), k.name) for k in built.resolve_asset_graph().asset_check_keys
    } == {("payments", "payments_match_source"), ("payments", "lateness_within_lookback")}
    jobs = {
        "payments_job": {"payments"},
        "captured_payments_job": {"captured_payments", "captured_per_day"},
        "payments_daily_job": {"payments", "captured_payments", "captured_per_day"},
    }
    for name, assets in jobs.items():
        job = built.resolve_job_def(name)
        assert {k.to_user_string() for k in job.asset_layer.selected_asset_keys} == assets
    assert built.resolve_sensor_def("new_payments_sensor").job_name == "payments_job"
    assert (
        built.resolve_sensor_def("captured_payments_refresh_sensor").job_name
        == "captured_payments_job"
    )
    schedule = built.resolve_schedule_def("payments_daily_schedule")
    assert (schedule.job_name, schedule.cron_schedule) == ("payments_daily_job", "30 0 * * *")
    # the op of N is N, so a range load's run config is {"ops": {"payments": …}}
    assert [n.name for n in built.resolve_job_def("payments_job").graph.nodes] == ["payments"]


def test_day_files_and_totals_are_daily_partitions_run_as_one_range(tmp_path):
    settings = _settings(
        tmp_path, PARTITIONS_START_DATE="2026-01-05", PIPELINE_TIMEZONE="Europe/Paris"
    )
    built = build_definitions(settings, spec=PAYMENTS).resolve_asset_graph()
    for name in ("captured_payments", "captured_per_day"):
        node = built.get(AssetKey(name))
        assert node.partitions_def.start.date().isoformat() == "2026-01-05"
        assert node.partitions_def.timezone == "Europe/Paris"
        assert node.backfill_policy.max_partitions_per_run is None  # one run per range
    assert built.get(AssetKey("captured_payments")).pools == {"captured_payments_files"}
    assert _orders_graph().get(AssetKey("paid_orders")).pools == {"paid_orders_files"}


def _orders_graph():
    return defs.resolve_asset_graph()


@pytest.mark.parametrize("spec", [ORDERS, PAYMENTS], ids=["orders", "payments"])
def test_the_table_asset_carries_its_declaration(tmp_path, spec):
    """What `pipeline-assets -m MODULE` declares each table again from."""
    built = build_definitions(_settings(tmp_path), spec=spec)
    (asset_spec,) = [s for s in built.resolve_all_asset_specs() if s.key.path == [spec.name]]
    held = asset_spec.metadata[DECLARATION]
    assert isinstance(held, JsonMetadataValue) and held.value == spec.attributes
    assert declare(held.value) == spec


def test_a_declared_password_is_not_shown_in_metadata(tmp_path):
    url = "postgresql+psycopg://loader:s3cret@db.internal/app"
    spec = declare(PAYMENTS_ATTRIBUTES | {"source_url": url})
    built = build_definitions(_settings(tmp_path), spec=spec)
    (asset_spec,) = [s for s in built.resolve_all_asset_specs() if s.key.path == ["payments"]]
    assert "s3cret" not in json.dumps(asset_spec.metadata[DECLARATION].value)
    assert built.resources["source_payments"].url == url


def test_two_declarations_load_together_sharing_what_they_share(tmp_path):
    settings = _settings(tmp_path)
    orders = build_definitions(settings, spec=ORDERS)
    payments = build_definitions(settings, spec=PAYMENTS)
    merged = Definitions.merge(orders, payments)
    assert {k.to_user_string() for k in merged.resolve_all_asset_keys()} == {
        "orders",
        "paid_orders",
        "daily_revenue",
        "payments",
        "captured_payments",
        "captured_per_day",
    }
    assert set(merged.resources) == {"source", "warehouse", "watermark", "day_files"}
    for key in merged.resources:  # same key, same object: how Dagster merges them
        assert orders.resources[key] is payments.resources[key]
    assert merged.resources["day_files"].base_dir == str(settings.data_dir)
    merged.resolve_job_def("daily_job")
    merged.resolve_job_def("payments_daily_job")


def test_what_a_table_has_of_its_own_is_keyed_by_its_name(tmp_path):
    settings = _settings(tmp_path, PAID_ORDERS_URL="s3://bucket/paid")
    own = declare(
        PAYMENTS_ATTRIBUTES
        | {
            "source_url": f"sqlite:///{tmp_path / 'payments.db'}",
            "lookback_days": 5,
            "daily_files": [PAYMENTS_ATTRIBUTES["daily_files"][0] | {"url": "s3://bucket/cap"}],
        }
    )
    orders = build_definitions(settings, spec=ORDERS)
    payments = build_definitions(settings, spec=own)
    merged = Definitions.merge(orders, payments)
    assert set(merged.resources) == {
        "source",
        "warehouse",
        "watermark",
        "day_files_paid_orders",
        "source_payments",
        "watermark_payments",
        "day_files_captured_payments",
    }
    assert merged.resources["source_payments"].url == own.source_url
    assert merged.resources["watermark_payments"].lookback_days == 5
    assert merged.resources["watermark"].lookback_days == 2
    assert merged.resources["day_files_paid_orders"].url == "s3://bucket/paid"
    assert merged.resources["day_files_captured_payments"].url == "s3://bucket/cap"
    graph = merged.resolve_asset_graph()
    assert graph.get(AssetKey("captured_payments")).io_manager_key == "day_files_captured_payments"


def test_two_declarations_share_one_celery_executor(tmp_path):
    settings = _settings(tmp_path, PIPELINE_EXECUTOR="celery")
    merged = Definitions.merge(
        build_definitions(settings, spec=ORDERS), build_definitions(settings, spec=PAYMENTS)
    )
    assert merged.executor.name == "celery"
    assert merged.resolve_job_def("payments_job").executor_def is merged.executor
