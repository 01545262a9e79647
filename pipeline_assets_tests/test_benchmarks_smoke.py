"""The benchmark scripts keep working: each runs with ``--quick`` in a subprocess.

Speed is never asserted here (a wall-time assert is flaky and proves nothing on a busy CI
machine); ``benchmarks/`` prints ratios against baselines measured in the same run. This
only keeps the scripts from rotting as the core changes: they exit 0, print their table,
and write under the folder they are given, not in the checkout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("bench_*.py"))
# The scripts whose tables start with a "case" column (the others name their rows by size).
CASE_TABLES = {
    "bench_load.py",
    "bench_backfill.py",
    "bench_sensor_tick.py",
    "bench_celery.py",
    "bench_schema.py",
    "bench_history.py",
    "bench_payments_peers.py",
}


def test_every_benchmark_script_is_run_by_make_bench_and_documented():
    """``make bench`` runs every benchmark, and docs/benchmarks.md says how to run each and
    what it measured: a new script that is in neither would go unmeasured."""
    makefile = (BENCHMARKS.parent / "Makefile").read_text()
    bench_target = makefile.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    docs = (BENCHMARKS.parent / "docs" / "benchmarks.md").read_text()
    for script in SCRIPTS:
        assert f"benchmarks/{script}" in bench_target, f"make bench does not run {script}"
        assert f"benchmarks/{script}" in docs, f"docs/benchmarks.md does not describe {script}"


@pytest.mark.e2e
@pytest.mark.long
@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_quick(script: str, tmp_path: Path):
    if script == "bench_peer.py" and not os.environ.get("CI"):  # CI installs the extra
        pytest.importorskip("dlt", reason="the peer benchmark needs the bench extra")
    if script == "bench_celery.py":  # a virtual host on the local RabbitMQ (CI has one)
        from .brokers import RabbitVhost

        RabbitVhost().delete()  # skips on a laptop without RabbitMQ, fails in CI
    workdir = tmp_path / "work"
    proc = subprocess.run(  # bench_run_cost runs five `dagster asset materialize`
        [sys.executable, str(BENCHMARKS / script), "--quick", "--workdir", str(workdir)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if script == "bench_payments_peers.py" and os.environ.get("CI"):  # CI installs the extra
        assert "peers skipped" not in proc.stdout, proc.stdout  # (a laptop: ours alone)
    lines = proc.stdout.splitlines()
    if script in CASE_TABLES:
        headers = [
            i
            for i, line in enumerate(lines)
            if line.startswith("case ") and "seconds" in line and "ratio" in line
        ]
        assert headers, proc.stdout
        for i in headers:  # each header has its rule and at least one row of numbers
            assert set(lines[i + 1]) == {"-"}, lines[i + 1]
            assert re.search(r"\|\s+\d[\d.,]*x(\s|$)", lines[i + 2]), lines[i + 2]  # a ratio
    # Every script: tables with a header in columns, ruled with dashes, then a row with a
    # ratio ("1.23x") in a column; at least one header names its ratio.
    rules = [i for i, line in enumerate(lines) if len(line) > 10 and set(line) == {"-"}]
    assert rules, proc.stdout
    for i in rules:
        assert "|" in lines[i - 1], lines[i - 1]
        assert re.search(r"\|\s+\d[\d.,]*x(\s|$)", lines[i + 1]), lines[i + 1]
    assert any("ratio" in lines[i - 1] for i in rules), proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]  # nothing beside it
    assert any(workdir.iterdir())  # it did write under --workdir
