"""Every command the pipeline prints is built by ``core.commands``, and each form runs.

The forms: ``pipeline-assets demo init`` (the hint of a missing source), an explicit-range
``orders`` run with ``--config-json`` (verify, the ``orders_match_source`` check), and a
rebuild of one partition (an uncommitted day's error, verify) or of a range (verify).
The end-to-end case types each of them, as printed, into the real CLIs; the range load
that allows deletes, as ``verify`` prints it, runs in ``test_demo_delete.py``, and a
declared table's forms in a user's project in ``test_cli_location.py``.
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline_assets.core import commands
from pipeline_assets.core.daily_files import (
    UncommittedDayError,
    day_status,
    read_committed_day,
    read_committed_days,
    write_day_files,
)
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC
from pipeline_assets_tests.orders import orders_range_command, paid_orders_by_day

from .conftest import NOW
from .support import user_environment
from .tables import PAYMENTS

BIN = Path(sys.executable).parent
MATERIALIZE = "dagster asset materialize -m pipeline_assets.definitions"


@pytest.mark.parametrize(
    "command, expected",
    [
        (
            commands.rebuild_command("2026-01-25", spec=ORDERS),
            f"{MATERIALIZE} --select paid_orders,daily_revenue --partition 2026-01-25",
        ),
        (
            commands.rebuild_command("2026-01-24", "2026-01-26", spec=ORDERS),
            f"{MATERIALIZE} --select paid_orders,daily_revenue --partition-range "
            "2026-01-24...2026-01-26",
        ),
        (
            orders_range_command("2026-01-31", "2026-02-01"),
            f"{MATERIALIZE} --select orders --config-json "
            """'{"ops": {"orders": {"config": {"start": "2026-01-31", "end": "2026-02-02"}}}}'""",
        ),
        (
            orders_range_command("2026-01-31", "2026-01-31", allow_deletes=True),
            f"{MATERIALIZE} --select orders --config-json "
            """'{"ops": {"orders": {"config": {"start": "2026-01-31", "end": "2026-02-01", """
            """"allow_deletes": true}}}}'""",
        ),
    ],
)
def test_the_one_builder_prints_the_documented_forms(command, expected):
    assert command == expected


SHOP = "dagster asset materialize -m shop.definitions"


@pytest.mark.parametrize(
    "command, expected",
    [
        (
            commands.rebuild_command("2026-01-25", spec=PAYMENTS, module="shop.definitions"),
            f"{SHOP} --select captured_payments,captured_per_day --partition 2026-01-25",
        ),
        (
            commands.range_command(
                "2026-01-31", "2026-02-01", spec=PAYMENTS, module="shop.definitions"
            ),
            f"{SHOP} --select payments --config-json "
            """'{"ops": {"payments": {"config": {"start": "2026-01-31", "end": "2026-02-02"}}}}'""",
        ),
        (
            commands.range_command(
                "2026-01-31",
                "2026-01-31",
                spec=PAYMENTS,
                allow_deletes=True,
                module="shop.definitions",
            ),
            f"{SHOP} --select payments --config-json "
            """'{"ops": {"payments": {"config": {"start": "2026-01-31", "end": "2026-02-01", """
            """"allow_deletes": true}}}}'""",
        ),
    ],
)
def test_a_declared_tables_commands_name_its_location_and_its_assets(command, expected):
    """The code location the command was computed for, and the table's names by the rule
    (asset N, op N, files F with totals T): pasted in the user's project, it runs there."""
    assert command == expected


@pytest.mark.parametrize(
    "module", ["pipeline_assets.definitions", "shop.definitions", "my shop's.defs"]
)
def test_every_printed_command_is_one_shell_quoted_line(module):
    """Split as a shell splits it, each command gives back exactly the words it was made of,
    whatever the module is called: safe to paste as printed, one per line."""
    printed = commands.repair_commands(
        ["2026-01-24", "2026-01-25", "2026-01-28"],
        ["2026-01-25"],
        ["2026-01-28"],
        spec=PAYMENTS,
        module=module,
    )
    assert len(printed) == 3 and all("\n" not in line for line in printed)
    argv = [shlex.split(line) for line in printed]
    assert [a[:5] for a in argv] == [["dagster", "asset", "materialize", "-m", module]] * 3
    assert [a[5:7] for a in argv] == [["--select", "payments"]] * 2 + [
        ["--select", "captured_payments,captured_per_day"]
    ]
    assert json.loads(argv[0][8]) == {
        "ops": {"payments": {"config": {"start": "2026-01-24", "end": "2026-01-26"}}}
    }
    assert json.loads(argv[1][8]) == {
        "ops": {
            "payments": {
                "config": {"start": "2026-01-28", "end": "2026-01-29", "allow_deletes": True}
            }
        }
    }
    assert argv[2][7:] == ["--partition", "2026-01-25"]


def test_the_default_location_is_this_projects():
    assert commands.repair_commands(
        ["2026-01-25"], ["2026-01-25"], spec=ORDERS
    ) == commands.repair_commands(
        ["2026-01-25"], ["2026-01-25"], spec=ORDERS, module="pipeline_assets.definitions"
    )
    assert commands.daily_assets(ORDERS) == ["paid_orders", "daily_revenue"]


def test_an_uncommitted_day_names_the_same_rebuild_command(tmp_path):
    folder = tmp_path / "paid_orders"
    write_day_files(folder, {"2026-01-25": []}, run_id="run-1", written_at=NOW, spec=ORDERS)
    (folder / "2026-01-25.json").write_text("[]\n\n")  # edited by hand
    with pytest.raises(UncommittedDayError) as err:
        read_committed_day(folder, "2026-01-25")
    assert str(err.value).endswith(
        f"Rebuild it: {commands.rebuild_command('2026-01-25', spec=ORDERS)}"
    )
    assert day_status(folder, "2026-01-25").repair_command == commands.rebuild_command(
        "2026-01-25", spec=ORDERS
    )


def test_several_uncommitted_days_name_one_rebuild_per_line(tmp_path):
    """Each command alone on its line, with nothing after it: pasted line by line, each
    runs as printed."""
    folder = tmp_path / "paid_orders"
    write_day_files(
        folder, {"2026-01-24": [], "2026-01-26": []}, run_id="run-1", written_at=NOW, spec=ORDERS
    )
    for day in ("2026-01-24", "2026-01-26"):
        (folder / f"{day}.json").write_text("[]\n\n")  # edited by hand
    with pytest.raises(UncommittedDayError) as err:
        read_committed_days(folder, ["2026-01-24", "2026-01-26"])
    lines = str(err.value).splitlines()
    assert lines[0].endswith(" Rebuild them, one command per line:")
    assert lines[1:] == [
        commands.rebuild_command("2026-01-24", spec=ORDERS),
        commands.rebuild_command("2026-01-26", spec=ORDERS),
    ]


@pytest.mark.e2e
def test_each_printed_form_runs_through_the_real_cli(tmp_path):
    data = tmp_path / "data"
    env = user_environment(data=data, home=tmp_path / "home")

    def run(command: str) -> None:
        argv = shlex.split(command)
        done = subprocess.run(
            [str(BIN / argv[0]), *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-3000:])

    run(commands.DEMO_INIT)
    # the demo is dated by the real clock: its days come from the data
    with sqlite3.connect(data / "app.db") as conn:
        days = dict(
            conn.execute(
                "SELECT order_id, substr(updated_at, 1, 10) FROM orders "
                "WHERE order_id BETWEEN 101 AND 102"
            ).fetchall()
        )
        first, last = conn.execute(
            "SELECT min(substr(updated_at, 1, 10)), max(substr(updated_at, 1, 10)) FROM orders"
        ).fetchone()
    day = days[102]
    run(orders_range_command(first, last))  # loads every order
    run(commands.rebuild_command(days[101], day, spec=ORDERS))
    folder = data / "paid_orders"
    assert 102 in [row["order_id"] for row in read_committed_day(folder, day)]

    # the range load with allow_deletes, and the rebuild of one day: test_demo_delete.py
    # runs them as verify prints them after the app deleted an order

    (folder / f"{day}.json").write_text("[]\n")  # edited by hand
    with pytest.raises(UncommittedDayError) as err:
        read_committed_day(folder, day)
    printed = re.search(r"Rebuild it: (.*)$", str(err.value)).group(1)
    run(printed)

    warehouse = make_engine(f"sqlite:///{data / 'warehouse.db'}", role="warehouse")
    try:
        expected = paid_orders_by_day(warehouse, [day], UTC)[day]
    finally:
        warehouse.dispose()
    assert read_committed_day(folder, day) == expected
