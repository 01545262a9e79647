"""A table without a change stamp (``cursor: null``): each run compares it whole.

    .venv/bin/python benchmarks/bench_whole_table.py [--rows 1000000] [--workdir DIR]
        [--quick]

A SQLite source of N generated prices (``PRICES`` of ``pipeline_assets_tests/tables.py``:
an integer key, text, an exact decimal, a nullable note, a date day column, 60 days),
at N and N/10 rows. For each size, three cases, each in a fresh process (so its peak
memory is its own): the first load into an empty SQLite warehouse, a run with nothing
changed, and a run after the app changed 1,000 prices, deleted 100 and added 100. Beside
each, measured in the same run:

- **floor**: what the comparison costs the databases alone, in one ``sqlite3``
  connection with no Python per row: the source attached, copied whole into a
  temporary table, and joined with the warehouse table by key and every column (the
  rows that differ counted). Ours does this and more: it reads the source through Arrow,
  checks every value against its declared type, and writes the changes and the batch;
- **read**: one plain read of the source, every row fetched through ``sqlite3``
  (``SELECT * FROM prices``): the issue's floor for a run that changes nothing (target
  ≤ 1.5× of it);
- **dlt** (the ``bench`` extra's dlt): ``sql_table(..., backend="connectorx",
  primary_key="sku", write_disposition="merge")`` without an incremental into duckdb, in
  process (its ``pipeline.run``): the peer a user picks for a table without a cursor. It
  reads the whole table every run too, but does not see deletes.

The table gives seconds, ours as a ratio to the floor and to dlt, the rows written, and
the peak memory of our process: it should not grow with the table (the source is
streamed in batches into the warehouse's temporary table; the join runs there).
``--quick`` (2,000 and 20,000 rows) is the smoke run CI makes.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import workdir_for  # noqa: E402
from benchmarks.memory import memory_kib  # noqa: E402

DAYS = 60
FIRST = date(2026, 1, 1)


def build_source(path: Path, n: int, seed: int = 1) -> None:
    """The app's ``prices`` table of ``n`` rows."""
    rng = random.Random(seed)
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE prices (sku INTEGER PRIMARY KEY, status TEXT NOT NULL, "
            "price TEXT NOT NULL, note TEXT, listed_on TEXT NOT NULL)"
        )
        db.executemany(
            "INSERT INTO prices VALUES (?, ?, ?, ?, ?)",
            (
                (
                    sku,
                    "listed" if sku % 3 else "hidden",
                    f"{rng.randint(1, 99999) / 100:.2f}",
                    None if sku % 2 == 0 else f"note {sku} ☕",
                    (FIRST + timedelta(days=sku % DAYS)).isoformat(),
                )
                for sku in range(1, n + 1)
            ),
        )


def change_source(path: Path, n: int, seed: int = 2) -> None:
    """The app changes 1,000 prices, deletes 100 and adds 100 (fewer at small sizes)."""
    rng = random.Random(seed)
    changed = min(1_000, n // 10)
    picked = rng.sample(range(1, n + 1), changed + changed // 10)
    with sqlite3.connect(path) as db:
        db.executemany(
            "UPDATE prices SET price = ? WHERE sku = ?",
            ((f"{rng.randint(1, 99999) / 100:.2f}", sku) for sku in picked[:changed]),
        )
        db.executemany("DELETE FROM prices WHERE sku = ?", ((sku,) for sku in picked[changed:]))
        db.executemany(
            "INSERT INTO prices VALUES (?, 'listed', '1.00', NULL, '2026-01-05')",
            ((n + i,) for i in range(1, changed // 10 + 1)),
        )


def ours(source: Path, warehouse: Path) -> dict:
    """One load in a fresh process: seconds, rows written, peak memory (KiB)."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps([str(source), str(warehouse)])],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def child(source: str, warehouse: str) -> None:
    from pipeline_assets.core.db.engines import make_engine
    from pipeline_assets.core.load.batch import load_table
    from pipeline_assets.core.times import UTC, utc_now
    from pipeline_assets_tests.tables import PRICES

    src = make_engine(f"sqlite:///{source}", role="source")
    wh = make_engine(f"sqlite:///{warehouse}", role="warehouse")
    before = memory_kib()["VmHWM"]
    started = time.perf_counter()
    result = load_table(src, wh, spec=PRICES, tz=UTC, lookback_days=2, now=utc_now())
    seconds = time.perf_counter() - started
    written = result.inserted + result.updated + (result.rows_deleted or 0)
    peak = memory_kib()["VmHWM"]
    print(json.dumps({"seconds": seconds, "written": written, "peak": peak, "base": before}))


def floor(source: Path, warehouse: Path) -> float:
    """The databases' own comparison: copy the source whole, join it with the table."""
    started = time.perf_counter()
    with sqlite3.connect(warehouse) as db:
        db.execute(f"ATTACH DATABASE '{source}' AS app")
        db.execute("CREATE TEMP TABLE stage AS SELECT * FROM app.prices")
        db.execute(
            "SELECT count(*) FROM stage s LEFT JOIN main.prices o ON o.sku = s.sku "
            "WHERE o.sku IS NULL OR o.status IS NOT s.status OR o.price IS NOT s.price "
            "OR o.note IS NOT s.note OR o.listed_on IS NOT s.listed_on"
        ).fetchone()
        db.execute("DROP TABLE stage")
    return time.perf_counter() - started


def plain_read(source: Path) -> float:
    """Every row of the source fetched once through ``sqlite3``."""
    started = time.perf_counter()
    with sqlite3.connect(source) as db:
        for _ in db.execute("SELECT * FROM prices"):
            pass
    return time.perf_counter() - started


def dlt_run(source: Path, folder: Path) -> float | None:
    """dlt's whole-table merge into duckdb (None without the bench extra)."""
    try:
        import dlt
        from dlt.sources.sql_database import sql_table
    except ImportError:
        return None
    pipeline = dlt.pipeline(
        pipeline_name="prices",
        pipelines_dir=str(folder / "dlt"),
        destination=dlt.destinations.duckdb(str(folder / "prices.duckdb")),
        dataset_name="peer",
    )
    table = sql_table(
        credentials=f"sqlite:///{source}",
        table="prices",
        backend="connectorx",
        primary_key="sku",
        write_disposition="merge",
    )
    started = time.perf_counter()
    pipeline.run(table).raise_on_failed_jobs()
    return time.perf_counter() - started


def measure(folder: Path, n: int) -> list[tuple]:
    folder.mkdir(parents=True)
    source, warehouse = folder / "app.db", folder / "warehouse.db"
    build_source(source, n)
    rows = []
    for case in ("first load", "nothing changed", "changed"):
        if case == "changed":
            change_source(source, n)
        mine = ours(source, warehouse)
        low = floor(source, warehouse)
        read = plain_read(source)
        peer = dlt_run(source, folder)
        rows.append((n, case, mine, low, read, peer))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child")
    args = parser.parse_args(argv)
    if args.child:
        child(*json.loads(args.child))
        return 0
    n = 20_000 if args.quick else args.rows
    work = workdir_for(args, "bench-whole-table-")
    try:
        rows = [*measure(work / "small", n // 10), *measure(work / "large", n)]
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    header = (
        f"{'rows':>9} | {'case':<15} | {'ours s':>6} | {'floor s':>7} | {'ratio to floor':>14} | "
        f"{'read s':>6} | {'ratio to read':>13} | {'dlt s':>6} | {'ratio to dlt':>12} | "
        f"{'written':>7} | {'peak MiB':>8}"
    )
    print(header)
    print("-" * len(header))
    for size, case, mine, low, read, peer in rows:
        seconds = mine["seconds"]
        versus = f"{peer:>6.2f} | {seconds / peer:>11.2f}x" if peer else f"{'-':>6} | {'-':>12}"
        print(
            f"{size:>9,} | {case:<15} | {seconds:>6.2f} | {low:>7.2f} | {seconds / low:>13.1f}x | "
            f"{read:>6.2f} | {seconds / read:>12.1f}x | {versus} | {mine['written']:>7,} | "
            f"{mine['peak'] / 1024:>8.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
