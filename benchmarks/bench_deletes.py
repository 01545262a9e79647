"""What replacing a range by key costs: range loads of ``orders`` with and without deletes.

    .venv/bin/python benchmarks/bench_deletes.py [--orders 1000000] [--repeat 3]
        [--postgres ADMIN_URL | --postgres-if-reachable ADMIN_URL] [--workdir DIR] [--quick]

One generated source of N orders over 60 days (SQLite files, or PostgreSQL databases with
``--postgres``), loaded once into a warehouse. Then, in this process, best of
``--repeat`` each, every case a range load of ``load_orders``:

- ``30-day range, nothing deleted, without the delete step``: the range load as it was
  before ranges were replaced by key (the delete step switched off in this process): the
  baseline;
- ``30-day range, nothing deleted``: the same with the delete step, which finds no
  warehouse row without its source row (one anti-join in the warehouse, no source read);
- ``30-day range, 1,000 deleted``: the app deletes 1,000 orders of the range first, so the
  step also scans the source's keys and deletes them (the key comparison);
- ``7-day range (RECONCILE_DAYS), nothing deleted``: what the daily schedule would pay to
  replace its last week every day (docs/automation.md says why it does not).

Ratios divide by the baseline. Nothing is written in the checkout.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    DAYS,
    add_postgres_options,
    backend_for,
    build_source,
    postgres_url,
)

import pipeline_assets.core.load.batch as load_module  # noqa: E402
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, to_instant  # noqa: E402

NOW = datetime(2027, 2, 1, tzinfo=UTC)
DELETED = 1_000


def timed(source, warehouse, start, end, repeat: int, *, prepare=None) -> tuple[float, int]:
    """Best seconds of ``repeat`` range loads of ``[start, end)``; rows deleted by the last."""
    best, deleted = float("inf"), 0
    for _ in range(repeat):
        if prepare is not None:
            prepare()
        started = time.perf_counter()
        result = load_module.load_table(
            source, warehouse, spec=ORDERS, tz=UTC, lookback_days=2, now=NOW, start=start, end=end
        )
        best = min(best, time.perf_counter() - started)
        deleted = result.rows_deleted or 0
    return best, deleted


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    add_postgres_options(parser, "source and warehouse")
    parser.add_argument("--quick", action="store_true", help="5,000 orders, one run each")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    n, repeat = (5_000, 1) if args.quick else (args.orders, args.repeat)
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="bench_deletes_", dir=args.workdir))
    backend = backend_for(folder, postgres_url(args))
    started = time.perf_counter()
    try:
        source_url = backend.new_url("source")
        build_source(source_url, n)
        source = make_engine(source_url, role="app")
        warehouse = make_engine(backend.new_url("warehouse"), role="warehouse")
        load_module.load_table(source, warehouse, spec=ORDERS, tz=UTC, lookback_days=2, now=NOW)
        with source.connect() as conn:
            newest = to_instant(
                conn.exec_driver_sql("SELECT max(updated_at) FROM orders").scalar(), UTC
            )
        end = datetime.combine(newest.date(), datetime.min.time(), tzinfo=UTC)
        month, week = (end - timedelta(days=30), end), (end - timedelta(days=7), end)
        print(
            f"bench_deletes: {n:,} orders over {DAYS} days on {backend.name}, loaded in "
            f"{time.perf_counter() - started:.0f}s; ranges end {end.date()}",
            flush=True,
        )

        marker = "?" if source.dialect.name == "sqlite" else "%s"

        def delete_some():
            with source.begin() as conn:
                ids = [
                    r[0]
                    for r in conn.exec_driver_sql(
                        f"SELECT order_id FROM orders WHERE updated_at >= {marker} "
                        f"AND updated_at < {marker} ORDER BY order_id LIMIT {DELETED}",
                        (month[0].date().isoformat(), month[1].date().isoformat()),
                    )
                ]
                conn.exec_driver_sql(
                    f"DELETE FROM orders WHERE order_id = {marker}", [(i,) for i in ids]
                )

        real_delete = load_module.delete_lost
        load_module.delete_lost = lambda *a, **k: None  # the range load before this step
        try:
            base, _ = timed(source, warehouse, *month, repeat)
        finally:
            load_module.delete_lost = real_delete
        cases = [("30-day range, nothing deleted, without the delete step", base, 0)]
        cases.append(("30-day range, nothing deleted", *timed(source, warehouse, *month, repeat)))
        cases.append(
            (
                f"30-day range, {DELETED:,} deleted",
                *timed(source, warehouse, *month, repeat, prepare=delete_some),
            )
        )
        cases.append(
            (
                "7-day range (RECONCILE_DAYS), nothing deleted",
                *timed(source, warehouse, *week, repeat),
            )
        )
        source.dispose()
        warehouse.dispose()
    finally:
        backend.close()
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    print(
        f"\nrange loads of orders, {n:,} orders, {backend.name}, best of {repeat}; "
        "ratio: / the range load without the delete step"
    )
    header = f"{'case':<56} | {'deleted':>7} | {'seconds':>8} | {'ratio':>6}"
    print(header)
    print("-" * len(header))
    for name, seconds, deleted in cases:
        print(f"{name:<56} | {deleted:>7,} | {seconds:>8.2f} | {seconds / base:>5.2f}x")
    print(f"\ntotal {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
