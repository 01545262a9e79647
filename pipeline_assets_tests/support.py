"""Small helpers every kind of test shares: one home each.

- :func:`unavailable`: what a test does when something it needs is missing — skip on a
  laptop, saying what to install or start, but fail in CI (``CI`` set), where every test
  must run;
- :func:`free_port`: a TCP port on 127.0.0.1 that nothing listens on;
- :func:`database_urls`: source and warehouse URLs on one backend, a SQLite file each or
  fresh PostgreSQL databases (the ``postgres`` fixture makes and drops them);
- :func:`dg_project`: a user's own dg project declaring some tables.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import textwrap
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml


def unavailable(problem: str, *, ci_hint: str) -> None:
    """Skip with ``problem`` on a laptop; in CI fail with it and ``ci_hint`` (how CI gets it)."""
    if os.environ.get("CI"):
        pytest.fail(f"{problem}; {ci_hint}")
    pytest.skip(problem)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_urls(backend: str, tmp_path: Path, request) -> dict[str, str]:
    """``{"source": …, "warehouse": …}`` on ``backend``: "sqlite", "postgresql", or
    "mariadb" (the source on the MariaDB server, the warehouse a SQLite file)."""
    if backend == "sqlite":
        # the app's database exists before the pipeline reads it (it never creates one)
        sqlite3.connect(tmp_path / "app.db").close()
        return {
            "source": f"sqlite:///{tmp_path / 'app.db'}",
            "warehouse": f"sqlite:///{tmp_path / 'warehouse.db'}",
        }
    if backend == "mariadb":
        return {
            "source": request.getfixturevalue("mysql").url("source"),
            "warehouse": f"sqlite:///{tmp_path / 'warehouse.db'}",
        }
    dbs = request.getfixturevalue("postgres")
    return {"source": dbs.url("source"), "warehouse": dbs.url("warehouse")}


# The pipeline's own settings: a command a test runs as a user would sees none of the
# caller's (a developer's shell may set them).
SETTINGS = (
    "PIPELINE_",
    "SOURCE_DATABASE",
    "WAREHOUSE_DATABASE",
    "LOOKBACK_DAYS",
    "PARTITIONS_START",
    "PAID_ORDERS",
)


# The runs a test starts with the real `dagster` CLI execute their steps in the run's own
# process (PIPELINE_EXECUTOR=in_process): two seconds less a run, the same code in it. The
# default executor's process per step is what `dagster dev`, the deployment and the
# kill tests of those run with (devserver.py, test_deploy.py, test_heal_after_kill.py),
# and the README's path as a user types it (test_readme.py).
RUNS_IN_PROCESS = {"PIPELINE_EXECUTOR": "in_process"}


def user_environment(*, data: Path, home: Path) -> dict[str, str]:
    """The caller's environment without the pipeline's settings, with ``data`` as
    PIPELINE_DATA_DIR and ``home`` (made here) as DAGSTER_HOME; runs in process."""
    home.mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith(SETTINGS)}
    return env | {"PIPELINE_DATA_DIR": str(data), "DAGSTER_HOME": str(home), **RUNS_IN_PROCESS}


def dg_project(root: Path, tables: dict[str, dict], package: str | None = None) -> str:
    """A user's dg project declaring ``tables`` (Dagster's layout: one folder per
    declaration under ``defs/``) in ``root``, its package ``package`` (default
    ``shop_<8 hex>``, a name no other test imports); returns its code location's module."""
    package = package or f"shop_{uuid.uuid4().hex[:8]}"
    (root / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
        [project]
        name = "{package}"
        version = "0.1.0"

        [tool.dg]
        directory_type = "project"

        [tool.dg.project]
        root_module = "{package}"
        """)
    )
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    (root / package / "definitions.py").write_text(
        textwrap.dedent("""\
        from pathlib import Path

        import dagster as dg


        @dg.definitions
        def defs():
            return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
        """)
    )
    for name, attributes in tables.items():
        (root / package / "defs" / name).mkdir(parents=True)
        (root / package / "defs" / name / "defs.yaml").write_text(
            yaml.safe_dump(
                {"type": "pipeline_assets.IncrementalTable", "attributes": attributes},
                sort_keys=False,
            )
        )
    return f"{package}.definitions"


@contextmanager
def crashing_at(point: str):
    """Make the next pass through ``point`` raise SimulatedCrash; plain os.environ."""
    os.environ["PIPELINE_CRASH_AT"] = point
    os.environ["PIPELINE_CRASH_MODE"] = "raise"
    try:
        yield
    finally:
        os.environ.pop("PIPELINE_CRASH_AT", None)
        os.environ.pop("PIPELINE_CRASH_MODE", None)
