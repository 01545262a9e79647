"""How long ``verify`` takes on a history of days, against plain reads of the same tables.

    .venv/bin/python benchmarks/bench_verify.py [--quick] [--days 60] [--per-day 16667]
                                                [--repeat 3] [--workdir DIR]

It builds, in a temporary folder (removed at the end; kept under ``--workdir``), a SQLite
source with ``days × per-day`` demo orders
(``--quick``: 30 × 1,000), loads them into a SQLite warehouse with the real load, and
builds every day file with a real ``paid_orders`` write. Then it times, in the same run
(best of ``--repeat``):

- ``count(*)``: ``SELECT count(*)`` over the source and the warehouse ``orders``;
- ``fetch``: every row of both tables fetched in ``order_id`` order, nothing done with it
  (the I/O floor of any full comparison);
- ``scan both``: the source through the load's scan (``scan_orders``: validated, one row
  per order) and the warehouse through its Arrow read, once each, nothing done with the
  rows: what any comparison of the two must read;
- ``verify``: the whole reconciliation (both passes, every day file and its comparison
  with the warehouse), and its two parts ``compare_orders`` and ``check_files``.

The target: the whole ``verify`` within 2x of ``scan both``. Verify grows with rows, not
with the number of days (there is no per-day query).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline_assets.core import demo  # noqa: E402
from pipeline_assets.core.daily_files import write_day_files  # noqa: E402
from pipeline_assets.core.days import days_between  # noqa: E402
from pipeline_assets.core.db import make_engine  # noqa: E402
from pipeline_assets.core.load import load_orders  # noqa: E402
from pipeline_assets.core.paid import paid_orders_by_day  # noqa: E402
from pipeline_assets.core.times import UTC  # noqa: E402
from pipeline_assets.core.verify import check_files, compare_orders, verify  # noqa: E402
from pipeline_assets.core.verify.sides import source_rows, warehouse_rows  # noqa: E402

START = date(2026, 1, 1)
NOW = datetime(2027, 1, 2, 6, 0, tzinfo=timezone.utc)


def build(folder: Path, days: int, per_day: int):
    source = make_engine(f"sqlite:///{folder / 'app.db'}", role="source")
    warehouse = make_engine(f"sqlite:///{folder / 'warehouse.db'}", role="warehouse")
    demo.init(source)
    demo.generate(source, orders=days * per_day, days=days, start=START, seed=1)
    t0 = time.perf_counter()
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    t1 = time.perf_counter()
    all_days = days_between(START - timedelta(days=6), START + timedelta(days=days - 1))
    for i in range(0, len(all_days), 31):  # a month per paid_orders run
        batch = all_days[i:i + 31]
        write_day_files(folder / "paid_orders", paid_orders_by_day(warehouse, batch, UTC),
                        run_id=f"bench-{i}", written_at=NOW, watermark=NOW)
    t2 = time.perf_counter()
    print(f"set-up: {days * per_day + 6:,} orders; load {t1 - t0:.1f}s, "
          f"{len(all_days)} day files {t2 - t1:.1f}s")
    return source, warehouse


def count_star(source, warehouse):
    for engine in (source, warehouse):
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT count(*) FROM orders")).scalar()


def fetch(source, warehouse):
    for engine in (source, warehouse):
        with engine.connect() as conn:
            result = conn.execution_options(stream_results=True, yield_per=10_000).execute(
                sa.text("SELECT order_id, status, amount, updated_at FROM orders "
                        "ORDER BY order_id"))
            for _part in result.partitions(10_000):
                pass


def scan_both(source, warehouse):
    for _rows in source_rows(source, UTC):
        pass
    for _rows in warehouse_rows(warehouse, UTC, ordered=True):
        pass


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) if repeat < 5 else statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 days × 1,000 orders, 1 repeat")
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--per-day", type=int, default=16_667)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, help="keep the databases and files here "
                        "(default: a temporary folder, removed at the end)")
    args = parser.parse_args()
    days, per_day, repeat = args.days, args.per_day, args.repeat
    if args.quick:
        days, per_day, repeat = 30, 1000, 1

    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="bench_verify_", dir=args.workdir))
    try:
        source, warehouse = build(folder, days, per_day)
        files = folder / "paid_orders"
        today = NOW.date()

        def run_verify():
            result = verify(source, warehouse, files, tz=UTC, today=today,
                            partitions_start=START - timedelta(days=6))
            assert result.ok, result.lines()[:5]

        def run_compare():
            compare_orders(source, warehouse, UTC)

        paid = {}

        def run_files():
            check_files(files, warehouse, UTC, sorted(p.stem for p in files.glob("*.json")
                                                      if not p.name.startswith("_")), paid)

        cases = [("count(*) both tables", lambda: count_star(source, warehouse)),
                 ("fetch both tables", lambda: fetch(source, warehouse)),
                 ("scan both (load's scan)", lambda: scan_both(source, warehouse)),
                 ("verify: compare_orders", run_compare),
                 ("verify: check_files", run_files),
                 ("verify (total)", run_verify)]
        results = [(name, best(fn, repeat)) for name, fn in cases]
        source.dispose()
        warehouse.dispose()
    finally:
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)

    base_count = results[0][1]
    base_fetch = results[1][1]
    base_scan = results[2][1]
    rows = days * per_day
    print(f"\n{days} days × {per_day} orders = {rows:,} rows per table, SQLite, "
          f"best of {repeat}")
    header = (f"{'case':<26} | {'seconds':>9} | {'µs/row':>8} | {'ratio count(*)':>14} | "
              f"{'ratio fetch':>11} | {'ratio scan':>10}")
    print(header)
    print("-" * len(header))
    for name, seconds in results:
        print(f"{name:<26} | {seconds:>9.3f} | {seconds / rows * 1e6:>8.2f} | "
              f"{seconds / base_count:>13.1f}x | {seconds / base_fetch:>10.2f}x | "
              f"{seconds / base_scan:>9.2f}x")
    print("\nratio count(*) / fetch / scan: seconds divided by those of that case, measured "
          "in this run; the target is verify (total) within 2x of the scan.")


if __name__ == "__main__":
    main()
