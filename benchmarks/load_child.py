"""One load in a fresh process, for ``bench_tables.py``: prints one JSON line.

    BENCH_SOURCE_URL=… BENCH_WAREHOUSE_URL=… python benchmarks/load_child.py orders|payments

``orders`` calls the load of whichever ``pipeline_assets`` this interpreter imports
(``load_table(spec=ORDERS)``; ``load_orders`` in the previous release): ``PYTHONPATH``
pointing at the previous release's tree makes it that release's;
``payments`` calls ``load_table(spec=PAYMENTS)`` (``pipeline_assets_tests/tables.py``, this
checkout). The JSON holds the seconds inside the call, the rows read, the resident memory
just before the call (``base_rss_kib``) and the peak of the process after it
(``peak_kib``, ``VmHWM``), and the file ``pipeline_assets`` was imported from.

Nothing here puts this checkout on ``sys.path`` for ``orders``: which release runs is the
caller's ``PYTHONPATH``.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from memory import memory_kib

NOW = datetime(2027, 2, 1, tzinfo=timezone.utc)  # after every generated row
LOOKBACK_DAYS = 2


def _orders_load():
    """``orders``' load in the tree this interpreter imports: the declared table's one
    path here, ``load_orders`` of its own in the release before (``core/load.py``)."""
    try:
        from pipeline_assets.core.load.batch import load_table
        from pipeline_assets.core.table import ORDERS
    except ImportError:  # the previous release
        from pipeline_assets.core.load import load_orders

        def load(source, warehouse):
            return load_orders(
                source, warehouse, tz=timezone.utc, lookback_days=LOOKBACK_DAYS, now=NOW
            )

        return load

    def load(source, warehouse):
        return load_table(
            source, warehouse, spec=ORDERS, tz=timezone.utc, lookback_days=LOOKBACK_DAYS, now=NOW
        )

    return load


def main(table: str) -> int:
    import pipeline_assets

    try:
        from pipeline_assets.core.db.engines import make_engine
    except ImportError:  # the previous release: core/db.py
        from pipeline_assets.core.db import make_engine

    if table == "payments":
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from pipeline_assets.core.load.batch import load_table
        from pipeline_assets_tests.tables import PAYMENTS

        def load(source, warehouse):
            return load_table(
                source,
                warehouse,
                spec=PAYMENTS,
                tz=timezone.utc,
                lookback_days=LOOKBACK_DAYS,
                now=NOW,
            )
    elif table == "orders":
        load = _orders_load()
    else:
        raise SystemExit(f"load_child: unknown table {table!r} (orders or payments)")
    source = make_engine(os.environ["BENCH_SOURCE_URL"], role="app")
    warehouse = make_engine(os.environ["BENCH_WAREHOUSE_URL"], role="warehouse")
    for engine in (source, warehouse):  # the driver's import and a pooled connection
        with engine.connect():
            pass
    import adbc_driver_postgresql.dbapi  # noqa: F401  (imported where the scan runs)
    import adbc_driver_sqlite.dbapi  # noqa: F401

    gc.collect()
    before = memory_kib()
    started = time.perf_counter()
    result = load(source, warehouse)
    seconds = time.perf_counter() - started
    after = memory_kib()
    print(
        json.dumps(
            {
                "seconds": seconds,
                "rows_read": result.rows_read,
                "inserted": result.inserted,
                "updated": result.updated,
                "base_rss_kib": before["VmRSS"],
                "peak_kib": after["VmHWM"],
                "package": pipeline_assets.__file__,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
