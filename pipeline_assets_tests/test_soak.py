"""The soak's smoke (``benchmarks/soak.py --minutes 2``): the production stack of
docs/deployment.md with two declared tables, an app writing both, parts killed at random,
and at the end nothing lost: ``verify --require-all`` clean for every table, no key
stored twice, every row the app deleted gone. The hour-long run and its figures are in
docs/benchmarks.md; this keeps the script working and its promises checked in CI."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.long,
    pytest.mark.postgres,
    pytest.mark.mysql,
    pytest.mark.s3,
    pytest.mark.celery,
    # a code server, a webserver, a daemon and two workers: one such stack at a time
    pytest.mark.xdist_group("stack-1"),
]


def test_a_two_minute_soak_loses_nothing(tmp_path, postgres_admin, mysql_admin, rabbit):
    workdir = tmp_path / "soak"
    argv = [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--minutes", "2"]
    argv += ["--kill-every", "20", "--settle-minutes", "8", "--workdir", str(workdir)]
    soak = subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        # the soak gives up by itself 8 minutes after its app stops, naming what is stuck
        out, err = soak.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        soak.send_signal(signal.SIGINT)  # its stack, databases and vhost cleaned up
        out, err = soak.communicate(timeout=120)
        raise AssertionError(
            f"the soak did not end in 15 minutes:\n{out[-4000:]}{err[-4000:]}"
        ) from None
    done = subprocess.CompletedProcess(argv, soak.returncode, out, err)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "OK: soak of 2 min" in done.stdout
    summary = json.loads((workdir / "soak.json").read_text())
    assert summary["ok"] and summary["verify_ok"]
    assert sum(summary["kills"].values()) >= 1, summary["kills"]
    for table in ("orders", "payments"):
        stored = summary["tables"][table]
        assert stored["keys stored twice"] == 0 and stored["deleted rows left"] == 0
        assert stored["app"]["new"] and stored["app"]["deleted"] and stored["rows loaded"]
    assert summary["runs"]["succeeded"] >= 4
    assert set(summary["memory"]) >= {"code server", "webserver", "daemon"}
    assert summary["load_run_seconds"]["first"] and summary["sensor_tick_seconds"]["first"]
