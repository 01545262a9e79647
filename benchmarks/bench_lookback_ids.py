"""An append-only table's lookback in ids: what reading the last K ids again costs.

    .venv/bin/python benchmarks/bench_lookback_ids.py [--rows 1000000] [--workdir DIR]
        [--quick]

A SQLite event log of N rows (``EVENTS`` of ``pipeline_assets_tests/tables.py``: an
integer cursor, a day column), loaded once; then, for each ``lookback_ids`` K, the median
of five incremental runs with nothing new (``load_table`` in process: each reads the ids
from ``watermark − K`` on, compares them with the warehouse and writes nothing). Beside
each, in the same run: the run with no lookback (K = 0, the run's own fixed cost) and
the databases' floor, the same K rows read from the source with ``sqlite3``. ``--quick``
(20,000 rows) is the smoke run CI makes.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import workdir_for  # noqa: E402
from pipeline_assets.core.db.engines import make_engine  # noqa: E402
from pipeline_assets.core.load.batch import load_table  # noqa: E402
from pipeline_assets.core.table.declare import declare  # noqa: E402
from pipeline_assets.core.times import UTC  # noqa: E402
from pipeline_assets_tests.tables import EVENTS_ATTRIBUTES  # noqa: E402

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def build(path: Path, n: int) -> None:
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE events (event_id INTEGER PRIMARY KEY, kind TEXT NOT NULL, "
            "amount TEXT NOT NULL, note TEXT, occurred_at TEXT NOT NULL)"
        )
        db.executemany(
            "INSERT INTO events VALUES (?, ?, '1.00', NULL, ?)",
            (
                (i, "purchase" if i % 3 else "view", (START + timedelta(seconds=5 * i)).isoformat())
                for i in range(1, n + 1)
            ),
        )


def median_run(source, warehouse, lookback: int) -> tuple[float, int]:
    spec = declare({**EVENTS_ATTRIBUTES, "lookback_ids": lookback})
    now = datetime.now(UTC)
    times, read = [], 0
    for _ in range(5):
        started = time.perf_counter()
        result = load_table(source, warehouse, spec=spec, tz=UTC, lookback_days=2, now=now)
        times.append(time.perf_counter() - started)
        read = result.rows_read
    return statistics.median(times), read


def floor(path: Path, n: int, lookback: int) -> float:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        with sqlite3.connect(path) as db:
            db.execute("SELECT * FROM events WHERE event_id >= ?", (n - lookback,)).fetchall()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else args.rows
    work = workdir_for(args, "bench-lookback-ids-")
    try:
        build(work / "app.db", n)
        source = make_engine(f"sqlite:///{work / 'app.db'}", role="source")
        warehouse = make_engine(f"sqlite:///{work / 'warehouse.db'}", role="warehouse")
        first = time.perf_counter()
        load_table(
            source,
            warehouse,
            spec=declare(EVENTS_ATTRIBUTES),
            tz=UTC,
            lookback_days=2,
            now=datetime.now(UTC),
        )
        print(f"{n:,} events, first load {time.perf_counter() - first:.2f} s")
        rows = [
            (k, *median_run(source, warehouse, k), floor(work / "app.db", n, k))
            for k in (0, 1_000, 10_000)
        ]
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    header = (
        f"{'lookback_ids':>12} | {'rows read':>9} | {'run s':>6} | {'ratio to none':>13} | "
        f"{'floor s':>7}"
    )
    base = rows[0][1]
    print(header)
    print("-" * len(header))
    for k, seconds, read, low in rows:
        print(f"{k:>12,} | {read:>9,} | {seconds:>6.3f} | {seconds / base:>12.2f}x | {low:>7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
