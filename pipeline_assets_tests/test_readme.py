"""The README's "Your own tables" runs as written, from an empty folder.

Its shell blocks are the test, so the README cannot drift from what works. They run in
one shell, in order, the way a user types them: in an empty folder of a fresh ``HOME``,
with ``PIPELINE_ASSETS`` naming a clone of this repository (its files, copied), none of
the caller's pipeline or Dagster variables, and this checkout's venv off the ``PATH``:
the path makes a venv of its own, installs the package with its ``dg`` extra, writes the
project, makes a sample app database, scaffolds and completes a declaration, loads,
builds the days, verifies, and repairs a deleted row with the commands verify printed.

Every command must exit 0 but one whose comment says ``# exit N``. What the README shows
beside the commands is held against what they did: the scaffolded ``defs.yaml`` it
prints, and the runs it says ``verify`` prints, which must be exactly those it printed.
One test: the install and the real ``dg`` and ``dagster`` commands cost minutes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Your own tables"
PATH_END = "**Every attribute.**"  # the path ends here; the reference that follows is not run
MARK = "@@readme-command@@"
# what a user's clone of the repository holds: not this checkout's local state
NOT_CLONED = shutil.ignore_patterns(
    ".git", ".venv", "data", ".dagster_home", "build", "*.egg-info", "__pycache__", ".*cache"
)


def section(readme: str) -> str:
    """The path of "Your own tables": from its heading to the reference after it."""
    start = readme.index(SECTION)
    return readme[start : readme.index(PATH_END, start)]


def blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block, in order."""
    return re.findall(r"^```(\w+)\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def commands(script: str) -> list[str]:
    """The commands of a shell block: a line each, a here-document with its body."""
    out: list[str] = []
    lines = iter(script.splitlines())
    for line in lines:
        if not line.strip():
            continue
        command = [line]
        if "<<'EOF'" in line:
            for body in lines:
                command.append(body)
                if body == "EOF":
                    break
        out.append("\n".join(command))
    return out


def expected_exit(command: str) -> int:
    found = re.search(r"#\s*exit (\d+)", command.splitlines()[0])
    return int(found.group(1)) if found else 0


def run(typed: list[str], cwd: Path, env: dict[str, str]) -> list[tuple[str, int, str]]:
    """``(command, exit code, output)`` of each command, run in one shell in order."""
    script = "".join(f"{command}\nprintf '\\n{MARK} %s\\n' \"$?\"\n" for command in typed)
    done = subprocess.run(
        ["bash", "--noprofile", "--norc"],
        input=script,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=1800,
    )
    parts = re.split(rf"\n{MARK} (\d+)\n", done.stdout)
    outputs, codes = parts[0::2], [int(code) for code in parts[1::2]]
    assert len(codes) == len(typed), f"the shell stopped early:\n{done.stdout[-3000:]}"
    return list(zip(typed, codes, outputs, strict=False))


@pytest.mark.e2e
@pytest.mark.long
def test_your_own_tables_runs_as_written(tmp_path):
    readme = section((ROOT / "README.md").read_text(encoding="utf-8"))
    found = blocks(readme)
    typed = [command for language, body in found if language == "sh" for command in commands(body)]
    assert any("dg scaffold defs" in command for command in typed)

    home, folder = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    folder.mkdir()
    clone = home / "src" / "pipeline_assets"
    shutil.copytree(ROOT, clone, ignore=NOT_CLONED)
    ours = str(Path(sys.executable).parent)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(
            ("PIPELINE_", "SOURCE_DATABASE", "WAREHOUSE_DATABASE", "PAID_ORDERS", "DAGSTER_")
        )
        and key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    }
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != ours]
    env |= {
        "HOME": str(home),
        "PIPELINE_ASSETS": str(clone),
        # the Python this project runs on, without its venv: a user's python3
        "PATH": os.pathsep.join([str(Path(sys.base_prefix) / "bin"), *path]),
    }

    ran = run(typed, folder, env)
    for command, code, output in ran:
        assert code == expected_exit(command), f"$ {command}\n(exit {code})\n{output[-4000:]}"

    # what the README shows is what the commands did
    project = folder / "shop"
    shown = next(body for language, body in found if language == "yaml")
    written = (project / "shop" / "defs" / "invoices" / "defs.yaml").read_text()
    assert written.startswith(shown), written
    [failing] = [i for i, command in enumerate(typed) if expected_exit(command) == 1]
    report, printed = ran[failing][2], typed[failing + 1 : failing + 3]  # "the two runs below"
    assert all(command.startswith("dagster asset materialize") for command in printed)
    said = [line.strip() for line in report.splitlines() if line.strip().startswith("dagster ")]
    assert said == printed, report
    assert "invoices (id=2)" in report
    day = json.loads((project / "data" / "paid_invoices" / "2026-01-05.json").read_text())
    assert [(row["id"], row["amount"], row["paid"], row["day"]) for row in day] == [
        (1, "12.50", True, "2026-01-05")
    ]
