"""An append-only table: its first load, its lookback in ids, and a whole run of new ids.

    .venv/bin/python benchmarks/bench_lookback_ids.py [--rows 1000000] [--runs 3]
        [--workdir DIR] [--quick]

A SQLite event log of N rows (``EVENTS`` of ``pipeline_assets_tests/tables.py``: an
integer cursor, a day column), loaded once; then, for each ``lookback_ids`` K, the median
of five incremental runs with nothing new (``load_table`` in process: each reads the ids
from ``watermark − K`` on, compares them with the warehouse and writes nothing). Beside
each, in the same run: the run with no lookback (K = 0, the run's own fixed cost) and
the databases' floor, the same K rows read from the source with ``sqlite3``.

Two more tables, in the same run:

- **holes**: the same runs on a log whose last 10,000 ids miss every tenth: 1,000 holes
  remembered and read again by key on every run;
- **first load**: the same N rows declared append-only (``cursor: event_id``) and with a
  stamp cursor (``cursor: occurred_at``), each into a fresh warehouse, in process, the
  best of ``--runs`` (target: append-only within 1.05× of the stamp);
- **whole runs**: ``dagster asset materialize`` of ``events`` (``events_location.py``:
  the default ``lookback_ids``, the check in the step) after the app appended 1,000 new
  ids, against Dagster's trivial asset + check run (``trivial_location.py``) through the
  same CLI, medians of ``--runs`` rounds (target: within 1.1×).

``--quick`` (20,000 rows, one round) is the smoke run CI makes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import TRIVIAL, dagster_home, materialize, workdir_for  # noqa: E402
from pipeline_assets.core.db.engines import make_engine  # noqa: E402
from pipeline_assets.core.load.batch import load_table  # noqa: E402
from pipeline_assets.core.table.declare import declare  # noqa: E402
from pipeline_assets.core.times import UTC  # noqa: E402
from pipeline_assets_tests.tables import EVENTS_ATTRIBUTES  # noqa: E402

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


HERE = Path(__file__).resolve().parent
EVENTS_LOCATION = ("-f", str(HERE / "events_location.py"), "--select", "events")
STAMPED = {
    **{k: v for k, v in EVENTS_ATTRIBUTES.items() if k != "lookback_ids"},
    "cursor": "occurred_at",
}


def build(path: Path, n: int, first: int = 1) -> None:
    """Events ``first``…``first + n − 1``, five seconds apart (an index on the stamp)."""
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS events (event_id INTEGER PRIMARY KEY, "
            "kind TEXT NOT NULL, amount TEXT NOT NULL, note TEXT, occurred_at TEXT NOT NULL)"
        )
        db.execute("CREATE INDEX IF NOT EXISTS events_occurred ON events (occurred_at)")
        db.executemany(
            "INSERT INTO events VALUES (?, ?, '1.00', NULL, ?)",
            (
                (i, "purchase" if i % 3 else "view", (START + timedelta(seconds=5 * i)).isoformat())
                for i in range(first, first + n)
            ),
        )


def load(source, warehouse, attributes: dict):
    """One run of the table ``attributes`` declare, in process, the clock now."""
    return load_table(
        source, warehouse, spec=declare(attributes), tz=UTC, lookback_days=2, now=datetime.now(UTC)
    )


def with_holes(work: Path, n: int) -> list[tuple[str, float, int, int]]:
    """The median run with nothing new (the default lookback_ids) on the log, and on the
    same log built with every tenth of its last 10,000 ids missing (1,000 holes
    remembered, read again by key each run), each loaded first into a fresh warehouse:
    (case, seconds, rows read, holes remembered)."""
    gappy = work / "gappy.db"
    build(gappy, n)
    with sqlite3.connect(gappy) as db:
        db.execute("DELETE FROM events WHERE event_id > ? AND event_id % 10 = 0", (n - 10_000,))
    default = {k: v for k, v in EVENTS_ATTRIBUTES.items() if k != "lookback_ids"}
    out = []
    for case, path in (("no holes", work / "app.db"), ("1,000 holes", gappy)):
        source = make_engine(f"sqlite:///{path}", role="source")
        warehouse = make_engine(f"sqlite:///{path.with_suffix('.wh.db')}", role="warehouse")
        first = load(source, warehouse, default)
        seconds, read = median_run(source, warehouse, 1_000)
        out.append((case, seconds, read, first.holes_remembered))
        source.dispose()
        warehouse.dispose()
    return out


def first_loads(work: Path, source, runs: int) -> list[tuple[str, float]]:
    """The best first load of each declaration, each into a fresh warehouse."""
    best = {}
    for round_ in range(runs):
        for name, attributes in (
            ("append-only (event_id)", EVENTS_ATTRIBUTES),
            ("stamp (occurred_at)", STAMPED),
        ):
            warehouse = make_engine(
                f"sqlite:///{work / f'first-{round_}-{len(best)}-{name[:5]}.db'}", role="warehouse"
            )
            started = time.perf_counter()
            load(source, warehouse, attributes)
            seconds = time.perf_counter() - started
            warehouse.dispose()
            best[name] = min(best.get(name, seconds), seconds)
    return list(best.items())


def whole_runs(work: Path, n: int, runs: int) -> dict[str, float]:
    """Medians of whole CLI runs: events after 1,000 new ids, and the trivial run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_")}
    env.update(
        DAGSTER_HOME=str(dagster_home(work)),
        SOURCE_DATABASE_URL=f"sqlite:///{work / 'app.db'}",
        WAREHOUSE_DATABASE_URL=f"sqlite:///{work / 'cli-warehouse.db'}",
        PIPELINE_DATA_DIR=str(work / "data"),
        PIPELINE_AUTOMATION="off",
    )
    materialize(env, work, *EVENTS_LOCATION)  # the first load, and the instance's storage
    times: dict[str, list[float]] = {"events, 1,000 new ids": [], "trivial asset + check": []}
    for round_ in range(runs):
        build(work / "app.db", 1_000, first=n + 1 + 1_000 * round_)
        times["events, 1,000 new ids"].append(materialize(env, work, *EVENTS_LOCATION))
        times["trivial asset + check"].append(materialize(env, work, *TRIVIAL))
    return {name: statistics.median(seconds) for name, seconds in times.items()}


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
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else args.rows
    runs = 1 if args.quick else args.runs
    work = workdir_for(args, "bench-lookback-ids-")
    try:
        build(work / "app.db", n)
        source = make_engine(f"sqlite:///{work / 'app.db'}", role="source")
        warehouse = make_engine(f"sqlite:///{work / 'warehouse.db'}", role="warehouse")
        first = time.perf_counter()
        load(source, warehouse, EVENTS_ATTRIBUTES)
        print(f"{n:,} events, first load {time.perf_counter() - first:.2f} s")
        rows = [
            (k, *median_run(source, warehouse, k), floor(work / "app.db", n, k))
            for k in (0, 1_000, 10_000)
        ]
        holes = with_holes(work, n)
        firsts = first_loads(work, source, runs)
        whole = whole_runs(work, n, runs)
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
    print("\nholes: runs with nothing new, lookback_ids 1,000, fresh warehouses, median of 5")
    header = f"{'case':<12} | {'holes':>5} | {'rows read':>9} | {'run s':>6} | {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for case, seconds, read, kept in holes:
        print(
            f"{case:<12} | {kept:>5,} | {read:>9,} | {seconds:>6.3f} | "
            f"{seconds / holes[0][1]:>6.2f}x"
        )
    table(f"first load of {n:,} events, best of {runs}", "declared cursor", firsts)
    table(f"whole runs through the CLI, median of {runs}", "run", list(whole.items()))
    return 0


def table(title: str, what: str, rows: list[tuple[str, float]]) -> None:
    """``rows``' seconds and their ratio to the last row's (the baseline)."""
    print(f"\n{title}")
    header = f"{what:<24} | {'s':>6} | {'ratio':>7}"
    print(header)
    print("-" * len(header))
    base = rows[-1][1]
    for name, seconds in rows:
        print(f"{name:<24} | {seconds:>6.2f} | {seconds / base:>6.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
