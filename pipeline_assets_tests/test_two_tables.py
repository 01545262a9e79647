"""The whole story, told by a user's own project that declares two tables side by side.

``shop`` declares ``orders`` (the chapter's table) and ``payments`` (a key of two
columns, every type, NULLs, Unicode) in ``defs.yaml`` files, and is driven only through
the real ``dagster`` and ``pipeline-assets`` commands, as its user would: the first load
of both, the day files of a filtered view with the declared columns and their totals, a
late row and an update that moves a row to another day, the refresh sensor asking for
exactly the days touched, ``verify`` naming a row the app deleted with the command that
repairs it, and that command run as printed. One test: each command costs seconds.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from pipeline_assets import demo
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table.orders import ORDERS_ATTRIBUTES

from .tables import PAYMENTS_ATTRIBUTES, delete_payment, make_payments, put_payments
from .user_project import BIN, declare, environment, project

MODULE = "shop.definitions"


def days_ago(n: int) -> date:
    return datetime.now(UTC).date() - timedelta(days=n)


def stamp(n: int, clock: str) -> str:
    return f"{days_ago(n).isoformat()} {clock}"


def payment(
    pid,
    attempt,
    status,
    cents,
    fee,
    day,
    clock,
    *,
    note=None,
    settle=None,
    rate=None,
    refundable=True,
) -> tuple:
    return (pid, attempt, status, cents, fee, rate, note, refundable, settle, stamp(day, clock))


class Shop:
    """The project's commands, run in its folder with its environment."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root, self.env = root, env

    def run(self, *argv: str, ok: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [str(BIN / argv[0]), *argv[1:]],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if ok:
            assert done.returncode == 0, (
                f"{shlex.join(argv)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def materialize(self, select: str, first: date | None = None, last: date | None = None):
        argv = ["dagster", "asset", "materialize", "-m", MODULE, "--select", select]
        if first is not None:
            argv += ["--partition-range", f"{first}...{last or first}"]
        return self.run(*argv)

    def day_file(self, day: date) -> list[dict]:
        return json.loads(
            (self.root / "data" / "captured_payments" / f"{day}.json").read_text(encoding="ascii")
        )


def refresh_requests(shop: Shop, sensor: str, monkeypatch) -> list[list[str]]:
    """One tick of the project's ``sensor``, from a fresh cursor, on its instance: the
    ``[first, last]`` days of each run it requests (the code location imported as Dagster
    imports it, with the project's environment)."""
    from dagster import DagsterInstance, build_sensor_context

    from pipeline_assets.location import location_definitions

    for key, value in shop.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(shop.root))
    defs = location_definitions(MODULE)
    with DagsterInstance.from_config(shop.env["DAGSTER_HOME"]) as instance:
        result = defs.get_sensor_def(sensor)(
            build_sensor_context(instance=instance, definitions=defs)
        )
    spans = []
    for request in result.run_requests:
        tags = request.tags
        first = tags.get("dagster/asset_partition_range_start", request.partition_key)
        spans.append([first, tags.get("dagster/asset_partition_range_end", first)])
    return spans


@pytest.mark.e2e
@pytest.mark.long
def test_two_declared_tables_tell_the_whole_story(tmp_path, monkeypatch):
    root = project(tmp_path / "shop")
    declare(root, "orders", ORDERS_ATTRIBUTES)
    declare(root, "payments", PAYMENTS_ATTRIBUTES)
    source_url = f"sqlite:///{tmp_path / 'app.db'}"
    warehouse_url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    source = make_engine(source_url, role="app")
    demo.init(source)  # the chapter's orders, before PARTITIONS_START_DATE
    make_payments(
        source,
        rows=[
            payment(
                1,
                1,
                "captured",
                1000,
                "1.10",
                4,
                "10:00:00",
                note="Grüße ☕ 𝄞",
                settle=days_ago(3).isoformat(),
                rate=0.5,
            ),
            payment(1, 2, "failed", 1000, "0.00", 4, "11:00:00", refundable=False),
            payment(2, 1, "captured", 250, "0.25", 3, "09:00:00"),
            payment(3, 1, "captured", 999, "9.99", 3, "12:00:00", note="x"),
        ],
    )
    shop = Shop(
        root,
        environment(
            root,
            SOURCE_DATABASE_URL=source_url,
            WAREHOUSE_DATABASE_URL=warehouse_url,
            PARTITIONS_START_DATE=days_ago(10).isoformat(),
            PIPELINE_AUTOMATION="off",
        ),
    )
    warehouse = sa.create_engine(warehouse_url)
    try:
        # the first load of both tables, one run; each its own watermark
        shop.materialize("orders,payments")
        shown = json.loads(
            shop.run(
                "pipeline-assets", "watermark", "show", "-m", MODULE, "--table", "payments"
            ).stdout
        )
        assert datetime.fromisoformat(shown["watermark"]) == datetime.fromisoformat(
            f"{stamp(3, '12:00:00')}+00:00"
        )

        # day files of captured payments, with the declared columns; their totals
        shop.materialize("captured_payments,captured_per_day", days_ago(4), days_ago(3))
        (first,) = shop.day_file(days_ago(4))
        assert first == {
            "payment_id": 1,
            "attempt": 1,
            "amount_cents": 1000,
            "fee": "1.10",
            "note": "Grüße ☕ 𝄞",
            "refundable": True,
            "settle_on": days_ago(3).isoformat(),
            "modified_at": first["modified_at"],
        }
        assert datetime.fromisoformat(first["modified_at"]) == datetime.fromisoformat(
            f"{stamp(4, '10:00:00')}+00:00"
        )
        assert [(r["payment_id"], r["attempt"], r["note"]) for r in shop.day_file(days_ago(3))] == [
            (2, 1, None),
            (3, 1, "x"),
        ]
        with warehouse.connect() as conn:
            totals = conn.execute(
                sa.text("SELECT day, rows, amount_cents, fee FROM captured_per_day ORDER BY day")
            ).all()
        assert [tuple(t) for t in totals] == [
            (days_ago(4).isoformat(), 1, "1000", "1.10"),
            (days_ago(3).isoformat(), 2, "1249", "10.24"),
        ]

        # a late row (before the watermark, inside the lookback) and an update that
        # moves (3, 1) to another day; the refresh sensor asks for exactly those days
        put_payments(
            source,
            [
                payment(4, 1, "captured", 500, "5.00", 4, "08:00:00"),
                payment(3, 1, "captured", 999, "9.99", 2, "09:00:00"),
            ],
        )
        shop.materialize("payments")
        requested = refresh_requests(shop, "captured_payments_refresh_sensor", monkeypatch)
        assert [days_ago(4).isoformat(), days_ago(2).isoformat()] in requested
        assert all(
            days_ago(4).isoformat() <= first <= last <= days_ago(2).isoformat()
            for first, last in requested
        ), requested  # payments' days only
        shop.materialize("captured_payments,captured_per_day", days_ago(4), days_ago(2))
        assert [(r["payment_id"], r["attempt"]) for r in shop.day_file(days_ago(4))] == [
            (1, 1),
            (4, 1),
        ]
        assert [r["payment_id"] for r in shop.day_file(days_ago(3))] == [2]
        assert [r["payment_id"] for r in shop.day_file(days_ago(2))] == [3]

        # the app deletes one payment: verify names it and prints the repair, which works
        delete_payment(source, 2, 1)
        found = shop.run("pipeline-assets", "verify", "-m", MODULE, "--table", "payments", ok=False)
        assert found.returncode != 0
        said = found.stdout + found.stderr
        assert "payment_id=2, attempt=1" in said, said
        printed = found.stdout.splitlines()
        repairs = [
            line.strip() for line in printed[printed.index("to repair, run in this order:") + 1 :]
        ]
        assert repairs and all(
            line.startswith(f"dagster asset materialize -m {MODULE} ") for line in repairs
        ), said
        for line in repairs:
            shop.run(*shlex.split(line))
        shop.run("pipeline-assets", "verify", "-m", MODULE)  # every table agrees
        assert shop.day_file(days_ago(3)) == []
        with warehouse.connect() as conn:
            assert (
                conn.execute(sa.text("SELECT count(*) FROM payments WHERE payment_id = 2")).scalar()
                == 0
            )
    finally:
        source.dispose()
        warehouse.dispose()
