"""A user's own dg project, as Dagster's docs describe it, made under a test's tmp_path.

A ``pyproject.toml`` with ``[tool.dg]``, a ``definitions.py`` that loads the defs folder,
one folder per declared table (:func:`declare`); nothing from this repository but the
installed package. :func:`environment` is what its commands run with: the project's own
``DAGSTER_HOME`` and data folder, this venv's tools first on the PATH, none of the
caller's pipeline settings.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import yaml

from .support import RUNS_IN_PROCESS

BIN = Path(sys.executable).parent


def project(root: Path, module: str = "shop") -> Path:
    """``root`` made a dg project whose code location is ``<module>.definitions``."""
    (root / module / "defs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
        [project]
        name = "{module}"
        version = "0.1.0"

        [tool.dg]
        directory_type = "project"

        [tool.dg.project]
        root_module = "{module}"
        """)
    )
    (root / module / "__init__.py").write_text("")
    (root / module / "definitions.py").write_text(
        textwrap.dedent("""\
        from pathlib import Path

        import dagster as dg


        @dg.definitions
        def defs():
            return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
        """)
    )
    return root


def declare(root: Path, folder: str, attributes: dict, module: str = "shop") -> Path:
    """``<module>/defs/<folder>/defs.yaml`` declaring a table with ``attributes``."""
    path = root / module / "defs" / folder / "defs.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {"type": "pipeline_assets.IncrementalTable", "attributes": attributes}, sort_keys=False
        )
    )
    return path


def environment(root: Path, **settings: str) -> dict[str, str]:
    """The environment the project's commands run with (``settings`` on top)."""
    base = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(
            ("PIPELINE_", "SOURCE_DATABASE", "WAREHOUSE_DATABASE", "PAID_ORDERS", "DAGSTER_")
        )
    }
    home = root / "home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return base | {
        "DAGSTER_HOME": str(home),
        "PIPELINE_DATA_DIR": str(root / "data"),
        "VIRTUAL_ENV": str(BIN.parent),
        "PATH": f"{BIN}{os.pathsep}{base.get('PATH', '')}",
        "PYTHONPATH": str(root),
        **RUNS_IN_PROCESS,
        **settings,
    }
