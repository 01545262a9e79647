"""How long ``verify`` takes on a history of days, against plain reads of the same tables.

    .venv/bin/python benchmarks/bench_verify.py [--quick] [--days 60] [--per-day 16667]
                                                [--repeat 3] [--workdir DIR]
        [--moved-orders 2000000] [--moved-days 300] [--moved 2000] [--deleted 100]
        [--postgres ADMIN_URL | --postgres-if-reachable ADMIN_URL] [--mysql ADMIN_URL]
        [--only verify|moved]

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

Then the ``orders_match_source`` check after an incremental run in which rows left the
compared days (``--moved-orders`` orders over ``--moved-days`` days, default 2,000,000
over 300; ``--quick``: 20,000 over 30): the app backdates ``--moved`` orders of the
last 7 days (RECONCILE_DAYS) to a month before them, where no incremental load reads
them, and deletes ``--deleted`` others. Timed in the same run, best of ``--repeat``:

- ``compare_days``: the 7-day comparison itself (per-day count and checksum of both
  sides), the baseline;
- ``add_deleted``, which tells the deleted orders from the moved ones, as it was (the
  warehouse rows of the days, one scan of every key of the source, the rows of the days
  again: the old function, copied here) and as it is (the keys of the days, the keys
  that left them looked up in the source by key, ``core/verify/lost.py``, then the
  warehouse rows of the lost keys by key);
- the whole check (``reconcile_horizon``), before (the old function put back in this
  process) and after. Before and after must find the same orders, ids and checksums.

The source is SQLite, or a PostgreSQL (``--postgres``) or MySQL/MariaDB (``--mysql``,
the warehouse then SQLite) database made for the run and dropped after it.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import sys
import tempfile
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    MysqlBackend,
    SqliteBackend,
    add_postgres_options,
    backend_for,
    postgres_url,
)

from pipeline_assets import demo
from pipeline_assets.core.daily_files import write_day_files
from pipeline_assets.core.days import days_between  # noqa: E402
from pipeline_assets.core.days import spans as day_spans
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.rows.digest import DayDigest, add_days
from pipeline_assets.core.source.scan import inspect_source, scan_keys
from pipeline_assets.core.table import ORDERS, working
from pipeline_assets.core.times import UTC  # noqa: E402
from pipeline_assets.core.times.arrays import day_text
from pipeline_assets.core.verify import check_files, verify
from pipeline_assets.core.verify import horizon as horizon_module
from pipeline_assets.core.verify.compare import (  # noqa: E402
    add_deleted,
    compare_days,
    differing_days,
)
from pipeline_assets.core.verify.horizon import reconcile_horizon
from pipeline_assets.core.verify.merge import DELETED_IDS_SHOWN
from pipeline_assets.core.verify.sides import source_rows, warehouse_rows  # noqa: E402
from pipeline_assets_tests.orders import compare_orders, load_orders, paid_orders_by_day

START = date(2026, 1, 1)
NOW = datetime(2027, 1, 2, 6, 0, tzinfo=timezone.utc)


def build(folder: Path, days: int, per_day: int):
    source = make_engine(f"sqlite:///{folder / 'app.db'}", role="app")
    warehouse = make_engine(f"sqlite:///{folder / 'warehouse.db'}", role="warehouse")
    demo.init(source)
    demo.generate(source, orders=days * per_day, days=days, start=START, seed=1)
    t0 = time.perf_counter()
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    t1 = time.perf_counter()
    all_days = days_between(START - timedelta(days=6), START + timedelta(days=days - 1))
    for i in range(0, len(all_days), 31):  # a month per paid_orders run
        batch = all_days[i : i + 31]
        write_day_files(
            folder / "paid_orders",
            paid_orders_by_day(warehouse, batch, UTC),
            run_id=f"bench-{i}",
            written_at=NOW,
            watermark=NOW,
            spec=ORDERS,
        )
    t2 = time.perf_counter()
    print(
        f"set-up: {days * per_day + 6:,} orders; load {t1 - t0:.1f}s, "
        f"{len(all_days)} day files {t2 - t1:.1f}s"
    )
    return source, warehouse


def count_star(source, warehouse):
    for engine in (source, warehouse):
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT count(*) FROM orders")).scalar()


def fetch(source, warehouse):
    for engine in (source, warehouse):
        with engine.connect() as conn:
            result = conn.execution_options(stream_results=True, yield_per=10_000).execute(
                sa.text("SELECT order_id, status, amount, updated_at FROM orders ORDER BY order_id")
            )
            for _part in result.partitions(10_000):
                pass


def scan_both(source, warehouse):
    for _rows in source_rows(source, UTC, spec=ORDERS):
        pass
    for _rows in warehouse_rows(warehouse, UTC, ordered=True, spec=ORDERS):
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
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep the databases and files here (default: a temporary folder, removed at the end)",
    )
    parser.add_argument("--moved-orders", type=int, default=2_000_000)
    parser.add_argument("--moved-days", type=int, default=300)
    parser.add_argument(
        "--moved", type=int, default=2_000, help="orders of the compared days the app backdates"
    )
    parser.add_argument(
        "--deleted", type=int, default=100, help="orders of the compared days the app deletes"
    )
    add_postgres_options(parser, "the moved-rows part: source and warehouse")
    parser.add_argument(
        "--mysql",
        metavar="ADMIN_URL",
        help="the moved-rows part: the "
        "source on this MySQL or MariaDB server, the warehouse SQLite",
    )
    parser.add_argument(
        "--only", choices=["verify", "moved"], help="run only that part (default: both)"
    )
    args = parser.parse_args()
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    if args.only != "moved":
        verify_part(args)
    if args.only != "verify":
        moved_part(args)


def verify_part(args) -> None:
    days, per_day, repeat = args.days, args.per_day, args.repeat
    if args.quick:
        days, per_day, repeat = 30, 1000, 1

    folder = Path(tempfile.mkdtemp(prefix="bench_verify_", dir=args.workdir))
    try:
        source, warehouse = build(folder, days, per_day)
        files = folder / "paid_orders"
        today = NOW.date()

        def run_verify():
            result = verify(
                source,
                warehouse,
                files,
                tz=UTC,
                today=today,
                partitions_start=START - timedelta(days=6),
                spec=ORDERS,
            )
            assert result.ok, result.lines()[:5]

        def run_compare():
            compare_orders(source, warehouse, UTC)

        paid = {}

        def run_files():
            check_files(
                files,
                warehouse,
                UTC,
                sorted(p.stem for p in files.glob("*.json") if not p.name.startswith("_")),
                paid,
                spec=ORDERS,
            )

        cases = [
            ("count(*) both tables", lambda: count_star(source, warehouse)),
            ("fetch both tables", lambda: fetch(source, warehouse)),
            ("scan both (load's scan)", lambda: scan_both(source, warehouse)),
            ("verify: compare_orders", run_compare),
            ("verify: check_files", run_files),
            ("verify (total)", run_verify),
        ]
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
    print(f"\n{days} days × {per_day} orders = {rows:,} rows per table, SQLite, best of {repeat}")
    header = (
        f"{'case':<26} | {'seconds':>9} | {'µs/row':>8} | {'ratio count(*)':>14} | "
        f"{'ratio fetch':>11} | {'ratio scan':>10}"
    )
    print(header)
    print("-" * len(header))
    for name, seconds in results:
        print(
            f"{name:<26} | {seconds:>9.3f} | {seconds / rows * 1e6:>8.2f} | "
            f"{seconds / base_count:>13.1f}x | {seconds / base_fetch:>10.2f}x | "
            f"{seconds / base_scan:>9.2f}x"
        )
    print(
        "\nratio count(*) / fetch / scan: seconds divided by those of that case, measured "
        "in this run; the target is verify (total) within 2x of the scan."
    )


# --- the check after rows left the compared days ------------------------------------------

RECONCILE_DAYS = 7


def add_deleted_before(source, warehouse, tz, days, *, spec) -> None:
    """``add_deleted`` as it was before the keyed lookup (before commit f33be05): the
    warehouse rows of the days, one scan of every key of the source, then the warehouse
    rows of the days again for those it lost (``orders`` only, as it was then)."""
    assert spec == ORDERS, "the old add_deleted knew orders only"
    if not days:
        return
    spans = day_spans(days, tz)
    keys = [t["order_id"] for t in warehouse_rows(warehouse, tz, spans, spec=ORDERS)]
    if not keys:
        return
    keys = pa.chunked_array(keys).combine_chunks()
    held = pa.array([False] * len(keys))
    for source_keys in scan_keys(source, inspect_source(source, spec=ORDERS)):
        held = pc.or_(held, pc.is_in(keys, value_set=source_keys.column(0)))
    lost = keys.filter(pc.invert(held))
    if not len(lost):
        return
    digests: dict[int, DayDigest] = {}
    shown: dict[int, list[int]] = {}
    for table in warehouse_rows(warehouse, tz, spans, ordered=True, spec=ORDERS):
        gone = table.filter(pc.is_in(table["order_id"], value_set=lost))
        add_days(digests, gone, spec=ORDERS)
        for number in pc.unique(gone[working.DAY]).to_pylist():
            ids = shown.setdefault(number, [])
            if len(ids) < DELETED_IDS_SHOWN:
                on_day = gone.filter(pc.equal(gone[working.DAY], number))["order_id"]
                ids.extend(on_day.slice(0, DELETED_IDS_SHOWN - len(ids)).to_pylist())
    for number, digest in digests.items():
        counts = days.get(day_text(number))
        if counts is not None:
            counts.only_in_warehouse = digest.rows
            counts.deleted_checksum = digest.checksum
            counts.deleted_ids = shown[number]


def backdate_and_delete(
    source, first_day: date, moved: int, deleted: int, seed: int = 3
) -> tuple[int, int]:
    """As the app would: ``moved`` orders stamped from ``first_day`` on get a stamp a month
    earlier (same time of day), ``deleted`` others are deleted."""
    import random

    marker = "?" if source.dialect.name == "sqlite" else "%s"
    with source.begin() as conn:
        rows = conn.exec_driver_sql(
            f"SELECT order_id, updated_at FROM orders WHERE updated_at >= {marker}",
            (first_day.isoformat(),),
        ).all()
        picked = random.Random(seed).sample(rows, min(len(rows), moved + deleted))
        gone, shifted = picked[:deleted], picked[deleted:]
        conn.exec_driver_sql(
            f"UPDATE orders SET updated_at = {marker} WHERE order_id = {marker}",
            [
                ((datetime.fromisoformat(str(u)) - timedelta(days=30)).isoformat(), k)
                for k, u in shifted
            ],
        )
        conn.exec_driver_sql(
            f"DELETE FROM orders WHERE order_id = {marker}", [(k,) for k, _ in gone]
        )
    return len(shifted), len(gone)


def moved_part(args) -> None:
    n, days, repeat = args.moved_orders, args.moved_days, args.repeat
    moved, deleted = args.moved, args.deleted
    if args.quick:
        n, days, repeat, moved, deleted = 20_000, 30, 1, 200, 10
    folder = Path(tempfile.mkdtemp(prefix="bench_verify_moved_", dir=args.workdir))
    warehouses = backend_for(folder, postgres_url(args))
    sources = MysqlBackend(args.mysql) if args.mysql else warehouses
    if args.mysql and not isinstance(warehouses, SqliteBackend):
        warehouses = SqliteBackend(folder)  # MySQL and MariaDB are sources only
    started = time.perf_counter()
    try:
        source = make_engine(sources.new_url("source"), role="app")
        warehouse = make_engine(warehouses.new_url("warehouse"), role="warehouse")
        demo.init(source)
        demo.generate(source, orders=n, days=days, start=START, seed=1)
        load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
        h, _, verdict = reconcile_horizon(
            source, warehouse, UTC, reconcile_days=RECONCILE_DAYS, spec=ORDERS
        )
        assert verdict.passed, verdict.description
        moved, deleted = backdate_and_delete(source, h.first, moved, deleted)
        print(
            f"\nset-up: {n + 6:,} orders over {days} days on {sources.name}, loaded; "
            f"{moved:,} orders of {h.first}…{h.last} backdated, {deleted:,} deleted "
            f"({time.perf_counter() - started:.0f}s)",
            flush=True,
        )

        compared = compare_days(source, warehouse, UTC, h.days, spec=ORDERS)
        differing = differing_days(compared)
        results: dict[str, object] = {}

        def find_deleted(label, how):
            def run():
                fresh = {d: dataclasses.replace(compared[d]) for d in differing}
                how(source, warehouse, UTC, fresh, spec=ORDERS)
                results[label] = {
                    d: (c.only_in_warehouse, c.deleted_ids, c.deleted_checksum)
                    for d, c in fresh.items()
                }

            return run

        def check(label):
            def run():
                _, _, verdict = reconcile_horizon(
                    source, warehouse, UTC, reconcile_days=RECONCILE_DAYS, spec=ORDERS
                )
                results[label] = verdict.description

            return run

        def before(fn):
            def run():
                horizon_module.add_deleted = add_deleted_before
                try:
                    fn()
                finally:
                    horizon_module.add_deleted = add_deleted

            return run

        cases = [
            (
                f"compare_days ({RECONCILE_DAYS} days)",
                lambda: compare_days(source, warehouse, UTC, h.days, spec=ORDERS),
            ),
            ("add_deleted, every key scanned (before)", find_deleted("before", add_deleted_before)),
            ("add_deleted, missing keys by key (after)", find_deleted("after", add_deleted)),
            ("the check, before", before(check("check before"))),
            ("the check, after", check("check after")),
        ]
        timings = [(name, best(fn, repeat)) for name, fn in cases]
        assert results["before"] == results["after"], (results["before"], results["after"])
        assert results["check before"] == results["check after"]
        assert sum(c[0] for c in results["after"].values()) == deleted, results["after"]
        source.dispose()
        warehouse.dispose()
    finally:
        sources.close()
        if warehouses is not sources:
            warehouses.close()
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)

    base = timings[0][1]
    print(
        f"\nthe check after {moved:,} rows left its {len(h.days)} days and {deleted:,} were "
        f"deleted: {n:,} orders over {days} days, {sources.name} source, "
        f"{len(differing)} day(s) differ, best of {repeat}"
    )
    header = f"{'case':<42} | {'seconds':>8} | {'ratio compare_days':>18}"
    print(header)
    print("-" * len(header))
    for name, seconds in timings:
        print(f"{name:<42} | {seconds:>8.3f} | {seconds / base:>17.2f}x")
    print(
        "\nratio: seconds divided by those of the 7-day comparison, measured in this run; "
        "before and after found the same deleted orders."
    )


if __name__ == "__main__":
    main()
