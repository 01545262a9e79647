"""The load of ``orders``: rows/s, peak memory, incremental cost, against the floors.

    .venv/bin/python benchmarks/bench_load.py [--orders 1000000] [--small 20000]
        [--repeat 2] [--workdir DIR] [--postgres ADMIN_URL] [--quick]

In one run, on SQLite (and on PostgreSQL with ``--postgres ADMIN_URL``):

1. A demo source of N orders (``demo.init`` + ``demo.generate(orders=N, days=60,
   seed=1)``: ids in order, ``updated_at`` over 60 days, amounts as text), one of N/10
   and one of ``--small`` orders.
2. ``load_orders`` (tz UTC, lookback 2, a fixed ``now``), each call in a fresh subprocess
   that reports the seconds inside the call, its resident memory just before the load
   (``base RSS``) and its peak (``VmHWM``) after it: the first load of N and of N/10 (the
   growth must not scale with N: the load streams), the second run with nothing changed,
   a run after 1,000 orders changed and one after 1 % changed, a dry run into an empty
   warehouse, 1,000 changed orders on the small table, and 1,000 changed orders on a
   copy of the big source's last four days alone (the same lookback window without the
   history: the incremental cost must not grow with the table).
3. The floors, over the very rows the first load stored, into an empty ``orders`` table
   with the warehouse's schema and index, one transaction, best of ``--repeat``: a raw
   driver upsert (``executemany`` of the row path's ``INSERT … ON CONFLICT``, chunks of
   10,000), a raw ``INSERT``, and a raw ``INSERT`` with the ``updated_at`` index dropped
   first and built after (what a first load writes, with nothing read or checked); on
   PostgreSQL also a raw ``COPY`` of the rows (the text prepared beforehand).

Ratios divide by a floor measured in the same run: SQLite by the raw upsert, PostgreSQL
by the raw ``COPY``. Then each target of the load is printed with what was measured.
Everything is written under a temporary folder (removed at the end) or under
``--workdir`` (kept); PostgreSQL databases are created through the admin URL and
dropped at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sqlalchemy as sa  # noqa: E402
from common import (  # noqa: E402
    PostgresBackend,
    SqliteBackend,
    add_postgres_options,
    build_source,
    change_some,
    postgres_url,
    workdir_for,
)
from memory import memory_kib  # noqa: E402

from pipeline_assets import demo  # noqa: E402
from pipeline_assets.core.db.engines import make_engine  # noqa: E402
from pipeline_assets.core.db.schema import warehouse_table  # noqa: E402
from pipeline_assets.core.secrets import redact
from pipeline_assets.core.table import ORDERS  # noqa: E402
from pipeline_assets.core.times import UTC, to_instant  # noqa: E402
from pipeline_assets_tests.orders import load_orders

orders = warehouse_table(ORDERS)  # orders' warehouse table

NOW = datetime(2027, 2, 1, tzinfo=UTC)  # after every generated order; fixed, never the clock
LOOKBACK_DAYS = 2
RECENT_DAYS = 4  # the lookback window and more, for the "without the history" case
CHUNK = 10_000  # rows per executemany of the raw floors


# --- one load in a fresh process, its memory measured ---------------------------------


def child_main(kind: str) -> int:
    """One ``load_orders`` call in this fresh process; prints its result as one JSON line."""
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
    result = load_orders(
        source, warehouse, tz=UTC, lookback_days=LOOKBACK_DAYS, now=NOW, dry_run=(kind == "dry")
    )
    seconds = time.perf_counter() - started
    after = memory_kib()
    print(
        json.dumps(
            {
                "seconds": seconds,
                "rows_read": result.rows_read,
                "inserted": result.inserted,
                "updated": result.updated,
                "unchanged": result.unchanged,
                "days_touched": len(result.days_touched),
                "base_rss_kib": before["VmRSS"],
                "base_peak_kib": before["VmHWM"],
                "peak_kib": after["VmHWM"],
                "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            }
        )
    )
    return 0


def run_child(kind: str, source_url: str, warehouse_url: str) -> dict:
    # URLs go through the environment, so a password never shows in a process list.
    env = dict(os.environ, BENCH_SOURCE_URL=source_url, BENCH_WAREHOUSE_URL=warehouse_url)
    proc = subprocess.run(
        [sys.executable, __file__, "--child", kind], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"the {kind} load failed in its subprocess:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- the source ----------------------------------------------------------------------------


def recent_copy(url: str, backend, days: int) -> tuple[str, int]:
    """A new source holding only the rows of ``url`` from its last ``days`` days: the same
    recent rows (so the same lookback window) without the history."""
    engine = make_engine(url, role="app")
    try:
        with engine.connect() as conn:
            newest = to_instant(
                conn.exec_driver_sql("SELECT max(updated_at) FROM orders").scalar(), UTC
            )
            since = (newest - timedelta(days=days)).date().isoformat()
            m = backend.marker
            rows = [
                tuple(r)
                for r in conn.exec_driver_sql(
                    "SELECT order_id, status, amount, updated_at FROM orders "
                    f"WHERE updated_at >= {m} ORDER BY order_id",
                    (since,),
                )
            ]
    finally:
        engine.dispose()
    copy_url = backend.new_url("source_recent")
    copy = make_engine(copy_url, role="app")
    try:
        demo.init(copy)
        with copy.begin() as conn:
            conn.exec_driver_sql("DELETE FROM orders")
            conn.exec_driver_sql(
                f"INSERT INTO orders (order_id, status, amount, updated_at) "
                f"VALUES ({m}, {m}, {m}, {m})",
                rows,
            )
    finally:
        copy.dispose()
    return copy_url, len(rows)


def stored_rows(url: str) -> list[tuple]:
    """The warehouse rows after the first load, in ``order_id`` order: the bulk paths' input."""
    engine = make_engine(url, role="warehouse")
    try:
        with engine.connect() as conn:
            return [
                tuple(r)
                for r in conn.execute(
                    sa.select(
                        orders.c.order_id, orders.c.status, orders.c.amount, orders.c.updated_at
                    ).order_by(orders.c.order_id)
                )
            ]
    finally:
        engine.dispose()


# --- the bulk paths ------------------------------------------------------------------------

# The row path's statement (executemany of one upsert per row): the bulk floor to beat.
_UPSERT = (
    "INSERT INTO orders (order_id, status, amount, updated_at) VALUES ({p}, {p}, {p}, {p}) "
    "ON CONFLICT (order_id) DO UPDATE SET status = excluded.status, "
    "amount = excluded.amount, updated_at = excluded.updated_at"
)
_INSERT = "INSERT INTO orders (order_id, status, amount, updated_at) VALUES ({p}, {p}, {p}, {p})"


def chunks(rows: list, size: int = CHUNK):
    for i in range(0, len(rows), size):
        yield rows[i : i + size]


def fresh_table(
    backend, label: str, prefill: list[tuple] | None = None, *, index: bool = True
) -> str:
    """An empty database holding the warehouse's ``orders`` table (same columns, index)."""
    url = backend.new_url(label)
    engine = make_engine(url, role="warehouse")
    try:
        with engine.begin() as conn:
            orders.create(conn)
            if not index:
                conn.exec_driver_sql("DROP INDEX orders_updated_at_idx")
    finally:
        engine.dispose()
    if prefill:
        raw_executemany(backend, url, _INSERT.format(p=backend.marker), prefill)
    os.sync()  # the previous case's dirty pages must not be flushed during this one
    return url


def raw_executemany(
    backend,
    url: str,
    sql: str,
    rows: list[tuple],
    *,
    setup: str | None = None,
    finish: str | None = None,
) -> None:
    conn = backend.raw_connect(url)
    try:
        cur = conn.cursor()
        if setup:
            cur.execute(setup)
        for part in chunks(rows):
            cur.executemany(sql, part)
        if finish:
            cur.execute(finish)
        conn.commit()
    finally:
        conn.close()


def raw_copy(backend, url: str, rows: list[tuple]) -> float:
    """COPY the rows (their text prepared before the clock starts) and commit."""
    text = "".join(f"{r[0]}\t{r[1]}\t{r[2]}\t{r[3]}\n" for r in rows).encode()
    conn = backend.raw_connect(url)
    try:
        started = time.perf_counter()
        with (
            conn.cursor() as cur,
            cur.copy("COPY orders (order_id, status, amount, updated_at) FROM STDIN") as copy,
        ):
            copy.write(text)
        conn.commit()
        return time.perf_counter() - started
    finally:
        conn.close()


def floors(backend, rows: list[tuple], repeat: int) -> dict[str, float]:
    """Best seconds of each floor over ``rows``, into an empty table with the schema."""
    p = backend.marker

    def timed(run: Callable[[str], None]) -> Callable[[], float]:
        def step():
            url = fresh_table(backend, "floor")
            started = time.perf_counter()
            run(url)
            return time.perf_counter() - started

        return step

    cases = {
        "raw upsert (executemany)": timed(
            lambda url: raw_executemany(backend, url, _UPSERT.format(p=p), rows)
        ),
        "raw INSERT (executemany)": timed(
            lambda url: raw_executemany(backend, url, _INSERT.format(p=p), rows)
        ),
        # what a first load writes: the rows, then the updated_at index built once
        "raw INSERT, index built after": timed(
            lambda url: raw_executemany(
                backend,
                url,
                _INSERT.format(p=p),
                rows,
                setup="DROP INDEX orders_updated_at_idx",
                finish="CREATE INDEX orders_updated_at_idx ON orders (updated_at)",
            )
        ),
    }
    if backend.name == "postgresql":
        cases["raw COPY"] = lambda: raw_copy(backend, fresh_table(backend, "floor"), rows)
    best: dict[str, float] = {}
    for _ in range(repeat):  # round-robin, so a slow moment does not hit one path only
        for name, step in cases.items():
            gc.collect()
            seconds = step()
            best[name] = min(best.get(name, seconds), seconds)
    return best


# --- the report ----------------------------------------------------------------------------


def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def print_loads(
    title: str, loads: list[tuple[str, dict]], floor_name: str, floor_per_row: float
) -> None:
    print(f"\n{title}")
    header = (
        f"{'case':<40} | {'rows read':>9} | {'ins/upd/unch':>22} | {'seconds':>8} | "
        f"{'rows/s':>9} | {'ratio':>6} | {'base RSS':>9} | {'peak RSS':>9} | "
        f"{'growth':>8}"
    )
    print(header)
    print("-" * len(header))
    for name, r in loads:
        per_row = r["seconds"] / max(r["rows_read"], 1)
        counts = f"{r['inserted']:,}/{r['updated']:,}/{r['unchanged']:,}"
        print(
            f"{name:<40} | {r['rows_read']:>9,} | {counts:>22} | {r['seconds']:>8.2f} | "
            f"{r['rows_read'] / r['seconds']:>9,.0f} | {per_row / floor_per_row:>5.2f}x | "
            f"{mib(r['base_rss_kib']):>9} | {mib(r['peak_kib']):>9} | "
            f"{mib(r['peak_kib'] - r['base_rss_kib']):>8}"
        )
    print(
        f"seconds: inside load_orders. ratio: seconds per row read / seconds per row of "
        f"the {floor_name} below. base RSS: the subprocess before the load; peak RSS: its "
        "VmHWM after it; growth: peak - base."
    )


def print_floors(title: str, results: dict[str, float], n: int, floor_name: str) -> None:
    print(f"\n{title}")
    header = f"{'case':<40} | {'seconds':>8} | {'rows/s':>10} | {'ratio':>6}"
    print(header)
    print("-" * len(header))
    for name, seconds in results.items():
        print(
            f"{name:<40} | {seconds:>8.2f} | {n / seconds:>10,.0f} | "
            f"{seconds / results[floor_name]:>5.2f}x"
        )


def print_targets(targets: list[tuple[str, str, str, float, bool]]) -> None:
    print("\ntargets; ratio: measured / wanted")
    header = f"{'target':<58} | {'wanted':>12} | {'measured':>14} | {'ratio':>7} | met"
    print(header)
    print("-" * len(header))
    for text, wanted, measured, ratio, met in targets:
        print(
            f"{text:<58} | {wanted:>12} | {measured:>14} | {ratio:>6.2f}x | "
            f"{'yes' if met else 'NO'}"
        )


def bench_backend(backend, n: int, small_n: int, repeat: int) -> None:
    tenth = max(n // 10, 1)
    print(
        f"\n== {backend.name}: building the sources ({n:,}, {tenth:,} and {small_n:,} orders) ==",
        flush=True,
    )
    started = time.perf_counter()
    source = backend.new_url("source")
    build_source(source, n)
    source_tenth = backend.new_url("source_tenth")
    build_source(source_tenth, tenth)
    source_small = backend.new_url("source_small")
    build_source(source_small, small_n)
    print(f"sources built in {time.perf_counter() - started:.1f}s", flush=True)

    few = min(1_000, max(n // 100, 1))
    loads = []
    warehouse = backend.new_url("warehouse")
    loads.append((f"first load, {n:,}", run_child("first", source, warehouse)))
    rows = stored_rows(warehouse)
    # the same recent rows as the big table, without its history: what history costs
    source_recent, recent_n = recent_copy(source, backend, RECENT_DAYS)
    loads.append(("second run, nothing changed", run_child("noop", source, warehouse)))
    changed = change_some(source, few, seed=2)
    loads.append((f"after {changed:,} rows changed", run_child("changed", source, warehouse)))
    changed = change_some(source, max(n // 100, 1), seed=3)
    loads.append((f"after {changed:,} rows changed (1%)", run_child("changed", source, warehouse)))
    loads.append(
        (f"dry run into empty, {n:,}", run_child("dry", source, backend.new_url("warehouse_dry")))
    )
    loads.append(
        (
            f"first load, {tenth:,} (N/10)",
            run_child("first", source_tenth, backend.new_url("warehouse_tenth")),
        )
    )
    small_wh = backend.new_url("warehouse_small")
    run_child("first", source_small, small_wh)
    changed_small = change_some(source_small, few, seed=2)
    loads.append(
        (
            f"{small_n:,}-row table: after {changed_small:,} changed",
            run_child("changed", source_small, small_wh),
        )
    )
    recent_wh = backend.new_url("warehouse_recent")
    run_child("first", source_recent, recent_wh)
    changed_recent = change_some(source_recent, few, seed=2)
    loads.append(
        (
            f"{recent_n:,} recent rows only: after {changed_recent:,} changed",
            run_child("changed", source_recent, recent_wh),
        )
    )
    print("load_orders done; measuring the floors", flush=True)
    results = floors(backend, rows, repeat)
    floor_name = "raw COPY" if backend.name == "postgresql" else "raw upsert (executemany)"
    floor_per_row = results[floor_name] / len(rows)
    print_loads(
        f"{backend.name}: load_orders, each in a fresh subprocess (tz UTC, lookback "
        f"{LOOKBACK_DAYS})",
        loads,
        floor_name,
        floor_per_row,
    )
    print_floors(
        f"{backend.name}: floors over the {len(rows):,} stored rows (one "
        f"transaction, best of {repeat}); ratio: / {floor_name}",
        results,
        len(rows),
        floor_name,
    )
    by = dict(loads)
    first = by[f"first load, {n:,}"]
    rate = first["rows_read"] / first["seconds"]
    incr = by[loads[2][0]]["seconds"]
    incr_small = by[loads[6][0]]["seconds"]
    growth = (first["peak_kib"] - first["base_rss_kib"]) / max(
        by[loads[5][0]]["peak_kib"] - by[loads[5][0]]["base_rss_kib"], 1
    )
    incr_recent = by[loads[7][0]]["seconds"]
    wanted_rate = 200_000 if backend.name == "postgresql" else 400_000
    cost = incr / incr_small
    history = incr / incr_recent
    targets = [
        (
            f"first load, {n:,} rows: rows/s inside the step",
            f">= {wanted_rate:,}",
            f"{rate:,.0f}",
            rate / wanted_rate,
            rate >= wanted_rate,
        ),
        (
            "first load: peak RSS",
            "<= 300 MiB",
            mib(first["peak_kib"]),
            first["peak_kib"] / (300 * 1024),
            first["peak_kib"] <= 300 * 1024,
        ),
        (
            "first load: memory growth at N / at N/10 (flat in N)",
            "<= 1.3x",
            f"{growth:.2f}x",
            growth / 1.3,
            growth <= 1.3,
        ),
        (
            f"incremental, {few:,} rows changed on {n:,}: seconds",
            "<= 0.3 s",
            f"{incr:.2f} s",
            incr / 0.3,
            incr <= 0.3,
        ),
        (
            f"incremental cost, {n:,}-row table / {small_n:,}-row table",
            "<= 1.3x",
            f"{cost:.2f}x",
            cost / 1.3,
            cost <= 1.3,
        ),
        (
            f"... {n:,}-row table / its last {RECENT_DAYS} days alone (same window)",
            "<= 1.3x",
            f"{history:.2f}x",
            history / 1.3,
            history <= 1.3,
        ),
    ]
    if backend.name == "postgresql":
        ratio = first["seconds"] / results["raw COPY"]
        targets.append(
            (
                "first load / raw COPY of the same rows",
                "<= 1.5x",
                f"{ratio:.2f}x",
                ratio / 1.5,
                ratio <= 1.5,
            )
        )
    print_targets(targets)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--orders", type=int, default=1_000_000, help="orders in the source (default: %(default)s)"
    )
    parser.add_argument(
        "--small",
        type=int,
        default=20_000,
        help="orders in the small table of the incremental comparison (default: %(default)s)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=2,
        help="best of this many runs per floor (default: %(default)s)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="2,000 orders (small table 500), one repeat: a smoke run",
    )
    parser.add_argument(
        "--workdir", type=Path, help="write here and keep it (default: a temporary folder, removed)"
    )
    add_postgres_options(parser, "also run")
    parser.add_argument(
        "--pg-repeat",
        type=int,
        default=1,
        help="best of this many runs per floor on PostgreSQL (default: %(default)s)",
    )
    parser.add_argument(
        "--child", choices=["first", "noop", "changed", "dry"], help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args.child)
    args.postgres = postgres_url(args)
    n, small, repeat = (2_000, 500, 1) if args.quick else (args.orders, args.small, args.repeat)
    workdir = workdir_for(args, "bench_load_")
    print(
        f"bench_load: {n:,} orders, workdir {workdir}, python {sys.version.split()[0]}, "
        f"sqlite {sqlite3.sqlite_version}, sqlalchemy {sa.__version__}, "
        f"{os.cpu_count()} cpu",
        flush=True,
    )
    started = time.perf_counter()
    try:
        bench_backend(SqliteBackend(workdir), n, small, repeat)
        print(f"\nsqlite part: {time.perf_counter() - started:.0f}s", flush=True)
        if args.postgres:
            print(f"\nPostgreSQL through {redact(args.postgres)}")
            backend = PostgresBackend(args.postgres)
            pg_started = time.perf_counter()
            try:
                bench_backend(backend, n, small, 1 if args.quick else args.pg_repeat)
            finally:
                backend.close()
            print(f"\npostgresql part: {time.perf_counter() - pg_started:.0f}s")
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
