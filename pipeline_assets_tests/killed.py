"""A step of the pipeline in a process of its own, to be killed for real at a crash point.

    python pipeline_assets_tests/killed.py load SOURCE_URL WAREHOUSE_URL [START END]
    python pipeline_assets_tests/killed.py files WAREHOUSE_URL FOLDER FIRST LAST RUN_ID
    python pipeline_assets_tests/killed.py load-table TABLE SOURCE_URL WAREHOUSE_URL

``load`` does what the ``orders`` asset does (``load_orders``, a range when ``START`` and
``END`` are given); ``files`` what ``paid_orders`` and its IO manager do for days
``FIRST``…``LAST`` (the warehouse's paid orders, written with ``write_day_files`` under
``RUN_ID``; ``FOLDER`` a path or a bucket URL); ``load-table`` an incremental load of one of
``tables``' specs by its name (``table_sources.load``). With ``PIPELINE_CRASH_AT`` naming a point,
``core/crash.py`` kills the process there with SIGKILL, as a killed pod dies.

Through the core, without Dagster: the process starts in half a second where a ``dagster
asset materialize`` costs five, and a SIGKILL at a crash point lands in the same code
either way. What a Dagster run adds around these calls (its step process, its events, the
rerun of a killed run) is killed through the real CLI in ``test_dagster_cli.py`` and
under ``dagster dev`` in ``test_heal_after_kill.py``. :func:`run` starts it.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from pipeline_assets.core.table import ORDERS

NOW = datetime(2026, 1, 27, 6, 0, tzinfo=timezone.utc)  # conftest.NOW: the tests' clock


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """This module in a new process, with ``env`` (``PIPELINE_CRASH_AT`` to kill it)."""
    return subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def main(argv: list[str]) -> int:
    from pipeline_assets.core.daily_files import write_day_files
    from pipeline_assets.core.days import days_between
    from pipeline_assets.core.db.engines import make_engine
    from pipeline_assets.core.times import UTC, parse_day, to_instant
    from pipeline_assets.core.warehouse import watermark as wm
    from pipeline_assets_tests.orders import load_orders, paid_orders_by_day

    kind, *rest = argv
    if kind == "load-table":
        from pipeline_assets_tests import tables
        from pipeline_assets_tests.table_sources import TableSource, load

        name, source, warehouse = rest
        spec = next(s for s in vars(tables).values() if getattr(s, "name", None) == name)
        app = TableSource(make_engine(source, role="source"), spec)
        load(app, make_engine(warehouse, role="warehouse"))
        return 0
    if kind == "load":
        source, warehouse, *bounds = rest
        span = dict(zip(("start", "end"), (to_instant(b, UTC) for b in bounds), strict=False))
        load_orders(
            make_engine(source, role="source"),
            make_engine(warehouse, role="warehouse"),
            tz=UTC,
            lookback_days=2,
            now=NOW,
            **span,
        )
        return 0
    warehouse_url, folder, first, last, run_id = rest
    warehouse = make_engine(warehouse_url, role="warehouse")
    days = days_between(parse_day(first), parse_day(last))
    write_day_files(
        folder,
        paid_orders_by_day(warehouse, days, UTC),
        run_id=run_id,
        written_at=NOW,
        watermark=wm.current(warehouse, table=ORDERS.name),
        spec=ORDERS,
    )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main(sys.argv[1:]))
