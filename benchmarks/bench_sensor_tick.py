"""What one tick of ``new_orders_sensor`` costs as the source table grows.

    .venv/bin/python benchmarks/bench_sensor_tick.py [--quick] [--sizes 10000,1000000]
        [--repeat N] [--workdir DIR]

For each size N it builds a SQLite demo source (``pipeline_assets.demo``): N orders
of history spread over two years, then the same 2,000 recent orders over the last three
days (5 % of them late), and a warehouse whose watermark is the newest ``updated_at``.
Every size therefore has the same lookback window (LOOKBACK_DAYS=2) and a table 100
times larger at 1M than at 10k. It times, in the same run:

- ``observe``: the observation query alone (one indexed aggregate over the window);
- ``tick``: a whole tick, ``check_source``: reflect the table, read the watermark,
  observe, decide;
- ``naive``: the same aggregate over the whole table, what a sensor without a window
  would pay.

``observe`` and ``tick`` should stay flat in N (ratio ≈ 1); ``naive`` grows with N.
``--quick`` uses 10,000 and 100,000 rows and fewer repetitions (a smoke run).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from datetime import date, datetime, timezone
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from pipeline_assets import demo  # noqa: E402
from pipeline_assets.core import sensing  # noqa: E402
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.db.state import prepare_warehouse
from pipeline_assets.core.source.scan import inspect_source
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, to_instant  # noqa: E402
from pipeline_assets.core.warehouse import watermark as wm

RECENT = 2_000
LOOKBACK_DAYS = 2
NOW = datetime(2026, 2, 4, tzinfo=timezone.utc)


def build(folder: Path, size: int):
    """A source with ``size`` orders (history + the same recent window) and a warehouse."""
    source = make_engine(f"sqlite:///{folder / 'app.db'}", role="app")
    warehouse = make_engine(f"sqlite:///{folder / 'warehouse.db'}", role="warehouse")
    demo.init(source)
    demo.generate(
        source, orders=size - RECENT, days=730, start=date(2024, 1, 1), late_fraction=0.0, seed=size
    )
    demo.generate(source, orders=RECENT, days=3, start=date(2026, 2, 1), late_fraction=0.05, seed=1)
    newest = to_instant(sensing.observe(source, UTC, None, spec=ORDERS).newest, UTC)
    prepare_warehouse(warehouse, spec=ORDERS)
    with warehouse.begin() as conn:
        wm.write(conn, None, newest, kind="load", at=NOW, batch_id="bench", table=ORDERS.name)
    return source, warehouse, wm.window_start(newest, LOOKBACK_DAYS)


def naive(source, src):
    t = src.table
    with source.connect() as conn:
        return conn.execute(
            sa.select(sa.func.count(), sa.func.sum(t.c.order_id), sa.func.max(t.c.updated_at))
        ).one()


def per_call(fn, repeat: int) -> float:
    """Median seconds per call over ``repeat`` calls (after one warm-up)."""
    fn()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def measure(folder: Path, size: int, repeat: int) -> tuple:
    started = time.perf_counter()
    source, warehouse, start = build(folder, size)
    built = time.perf_counter() - started
    try:
        src = inspect_source(source, spec=ORDERS)
        seen = sensing.observe(source, UTC, start, src, spec=ORDERS)
        tick = partial(
            sensing.check_source,
            source,
            warehouse,
            tz=UTC,
            lookback_days=LOOKBACK_DAYS,
            cursor=seen.to_cursor(),
            spec=ORDERS,
        )
        decision = tick()
        assert not decision.run, decision.reason  # a steady tick: nothing changed
        return (
            size,
            seen.rows,
            per_call(partial(sensing.observe, source, UTC, start, src, spec=ORDERS), repeat),
            per_call(tick, repeat),
            per_call(partial(naive, source, src), max(3, repeat // 20)),
            built,
        )
    finally:
        source.dispose()
        warehouse.dispose()


CASES = (
    ("observe", "the observation query"),
    ("tick", "a whole tick"),
    ("naive", "the aggregate over the whole table"),
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        help="comma-separated table sizes (default: 10000,1000000; with --quick 10000,100000)",
    )
    parser.add_argument(
        "--repeat", type=int, help="timed calls per size (default 200; with --quick 20)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep the databases here (default: a temporary folder, removed at the end)",
    )
    args = parser.parse_args(argv)
    sizes = [
        int(s)
        for s in (args.sizes or ("10000,100000" if args.quick else "10000,1000000")).split(",")
    ]
    repeat = args.repeat or (20 if args.quick else 200)

    root = args.workdir or Path(tempfile.mkdtemp(prefix="bench_sensor_tick_"))
    results = {}
    try:
        for size in sizes:
            folder = root / f"rows_{size}"
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            results[size] = measure(folder, size, repeat)
            print(
                f"built and measured {size:,} rows ({results[size][-1]:.1f} s to build)", flush=True
            )
    finally:
        if args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)

    base = sizes[0]
    header = f"{'case':<8} | {'rows':>10} | {'in window':>9} | {'seconds':>9} | {'ratio':>7}"
    print()
    print(header)
    print("-" * len(header))
    for column, (case, _) in enumerate(CASES, start=2):
        for size in sizes:
            seconds = results[size][column]
            print(
                f"{case:<8} | {size:>10,} | {results[size][1]:>9,} | {seconds:>9.5f} | "
                f"{seconds / results[base][column]:>6.2f}x"
            )
    print(
        f"\nratio: seconds / seconds at {base:,} rows, measured in this run. "
        + "; ".join(f"{case}: {what}" for case, what in CASES)
        + f". Medians of {repeat} calls (naive: {max(3, repeat // 20)}); SQLite; window "
        f"updated_at >= watermark - {LOOKBACK_DAYS} days (the text bound a day wider). "
        "observe and tick should stay near 1x; naive grows with the table."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
