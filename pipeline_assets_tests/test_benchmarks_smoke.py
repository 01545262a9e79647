"""The benchmark scripts keep working: each runs with ``--quick`` in a subprocess.

Speed is never asserted here (a wall-time assert is flaky and proves nothing on a busy CI
machine); ``benchmarks/`` prints ratios against baselines measured in the same run. This
only keeps the scripts from rotting as the core changes: they exit 0, print their table,
and write under the folder they are given, not in the checkout.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.parametrize("script", ["bench_load.py", "bench_backfill.py", "bench_sensor_tick.py"])
def test_benchmark_runs_quick(script: str, tmp_path: Path):
    workdir = tmp_path / "work"
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick", "--workdir", str(workdir)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    headers = [i for i, line in enumerate(lines)
               if line.startswith("case ") and "seconds" in line and "ratio" in line]
    assert headers, proc.stdout
    for i in headers:  # each header has its rule and at least one row of numbers
        assert set(lines[i + 1]) == {"-"}, lines[i + 1]
        assert re.search(r"\|\s+\d[\d.,]*x(\s|$)", lines[i + 2]), lines[i + 2]  # a ratio
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]  # nothing beside it
    assert any(workdir.iterdir())  # it did write under --workdir
