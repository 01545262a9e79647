"""The README's delete story, as a user types it: ``pipeline-assets demo delete ORDER_ID``
(the app deleting a row), ``verify`` naming the order and printing the repair, and the
printed commands, pasted into the real ``dagster`` CLI, removing the order from the
warehouse and from its day file. SQLite files under tmp_path; the loads before the
deletion go through core, as the asset runs them.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline_assets.core.commands import range_command, rebuild_command
from pipeline_assets.core.daily_files import read_committed_day
from pipeline_assets.core.table import ORDERS

from .plain import source_rows, warehouse_rows
from .support import user_environment
from .worlds import Pipeline

BIN = Path(sys.executable).parent
PAID_DAYS = ["2026-01-03", "2026-01-08", "2026-01-15", "2026-01-21"]  # 101, 102, 104, 106


@pytest.fixture
def data(env) -> Path:
    return Path(env["PIPELINE_DATA_DIR"])


def fingerprint(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_deleting_an_order_the_source_lacks_fails_in_one_line_and_writes_nothing(cli, data):
    assert cli("demo", "init", "--history-days", "0")[0] == 0
    before = fingerprint(data)
    code, out, err = cli("demo", "delete", "999")
    assert (code, out) == (1, "")
    assert err == (
        f"pipeline-assets: error: order 999 is not in the source "
        f"sqlite:///{data / 'app.db'}: nothing deleted\n"
    )
    assert fingerprint(data) == before


def test_deleting_from_a_source_without_orders_names_demo_init(cli, data):
    code, out, err = cli("demo", "delete", "102")
    assert (code, out) == (1, "")
    assert "does not exist: create the demo with `pipeline-assets demo init`" in err
    assert not data.exists()


@pytest.mark.e2e
def test_a_deleted_order_is_named_by_verify_and_the_printed_range_load_removes_it(
    cli, data, tmp_path
):
    # phase 1: the demo's story loaded, and its days' files built
    assert cli("demo", "init", "--history-days", "0")[0] == 0
    pipeline = Pipeline(data)
    try:
        pipeline.load()
        pipeline.build(PAID_DAYS)
    finally:
        pipeline.close()
    folder = data / "paid_orders"
    assert 102 in [row["order_id"] for row in read_committed_day(folder, "2026-01-08")]
    assert cli("verify")[0] == 0

    # phase 2: the app deletes order 102
    code, out, err = cli("demo", "delete", "102")
    assert (code, out, err) == (0, "order 102 deleted: it was paid 15.50 2026-01-08\n", "")
    assert 102 not in [row[0] for row in source_rows(f"sqlite:///{data / 'app.db'}")]

    # phase 3: verify names it, and prints the commands that repair its day
    code, out, _ = cli("verify")
    assert code == 1
    assert (
        "FAIL 2026-01-08 differs from source: source 0 rows, warehouse 1 rows: 1 only "
        "in the warehouse: the source no longer has them (order 102); a range load of "
        "the day deletes them; that is more than MAX_DELETE_SHARE=0.5 of the day, so its "
        "command allows the deletes"
    ) in out.splitlines()
    printed = out.split("to repair, run in this order:\n", 1)[1].splitlines()
    repair = [line.strip() for line in printed]
    # the whole day is the deletion: more than MAX_DELETE_SHARE, so the load allows it
    assert repair == [
        range_command("2026-01-08", "2026-01-08", allow_deletes=True, spec=ORDERS),
        rebuild_command("2026-01-08", spec=ORDERS),
    ]
    assert json.loads(cli("verify", "--json")[1])["repair"] == repair

    # phase 4: the printed commands, pasted as printed
    env = user_environment(data=data, home=tmp_path / "home")
    for command in repair:
        argv = shlex.split(command)
        done = subprocess.run(
            [str(BIN / argv[0]), *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (command, done.stderr[-3000:])

    # phase 5: gone from the warehouse and from its day file; everything agrees
    assert 102 not in [row[0] for row in warehouse_rows(f"sqlite:///{data / 'warehouse.db'}")]
    assert read_committed_day(folder, "2026-01-08") == []
    code, out, _ = cli("verify")
    assert code == 0, out
    assert out.splitlines()[-1] == "OK: source, warehouse and committed day files agree"
