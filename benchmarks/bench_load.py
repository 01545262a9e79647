"""The first and the incremental loads of ``orders``: rows/s, peak memory, and the floor.

    .venv/bin/python benchmarks/bench_load.py [--orders 1000000] [--repeat 2] [--workdir DIR]
        [--postgres postgresql+psycopg://postgres@127.0.0.1:5432/test [--pg-repeat 1]] [--quick]

In one run, on SQLite (and on PostgreSQL with ``--postgres ADMIN_URL``):

1. A demo source of N orders (``demo.init`` + ``demo.generate(orders=N, days=365, seed=1)``)
   and one of N/10 orders.
2. ``load_orders`` (tz UTC, lookback 2, a fixed ``now``), each call in a fresh subprocess
   that reports its resident memory after the imports and the connections, just before
   the load (``base RSS``), and its peak (``VmHWM``) after it: the first load into an
   empty warehouse at N and at N/10 (the growth must not scale with N: the load streams
   in chunks), the same read and diff as a dry run (nothing written), the second run with
   nothing changed, and a run after 1% of the orders changed.
3. The bulk paths, over the very rows the first load stored, into an empty ``orders``
   table with the warehouse's schema, one transaction, executemany in chunks of 10,000
   (the load's chunk), best of ``--repeat``: a raw driver INSERT (the floor); the load's
   upsert statement through the raw driver in ``order_id`` order and in ``updated_at``
   order, into the empty table, into a table already holding every row (each one
   changed), and into a table without the ``updated_at`` index; the same statement
   through ``Connection.exec_driver_sql`` on a pipeline engine (what ``core.load.upsert``
   does); SQLAlchemy Core ``conn.execute(insert().on_conflict_do_update(), list_of_dicts)``;
   on SQLite the raw upsert with a 64 MiB page cache, on PostgreSQL ``COPY`` (not an
   upsert; for scale only).

Ratios are times divided by the floor measured in the same run. Everything is written
under a temporary folder (removed at the end) or under ``--workdir`` (kept); PostgreSQL
databases are created through the admin URL and dropped at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from pipeline_assets.core import demo  # noqa: E402
from pipeline_assets.core.db import make_engine, orders, redact  # noqa: E402
from pipeline_assets.core.load import load_orders  # noqa: E402
from pipeline_assets.core.source import DEFAULT_CHUNK  # noqa: E402
from pipeline_assets.core.times import UTC, canonical, from_canonical, to_instant  # noqa: E402

NOW = datetime(2027, 2, 1, tzinfo=UTC)  # after every generated order; fixed, never the clock
LOOKBACK_DAYS = 2
CHANGED_FRACTION = 0.01
CHUNK = DEFAULT_CHUNK


# --- memory --------------------------------------------------------------------------------


def memory_kib() -> dict[str, int]:
    """``VmRSS`` (now) and ``VmHWM`` (peak so far) of this process, in KiB."""
    out: dict[str, int] = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    except OSError:
        pass
    if "VmHWM" not in out:  # not Linux: only the peak is known (bytes on macOS)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out["VmHWM"] = peak // 1024 if sys.platform == "darwin" else peak
        out.setdefault("VmRSS", out["VmHWM"])
    return out


def child_main(kind: str) -> int:
    """One ``load_orders`` call in this fresh process; prints its result as one JSON line."""
    source = make_engine(os.environ["BENCH_SOURCE_URL"], role="source")
    warehouse = make_engine(os.environ["BENCH_WAREHOUSE_URL"], role="warehouse")
    for engine in (source, warehouse):  # the driver's import and a pooled connection
        with engine.connect():
            pass
    gc.collect()
    before = memory_kib()
    started = time.perf_counter()
    result = load_orders(source, warehouse, tz=UTC, lookback_days=LOOKBACK_DAYS, now=NOW,
                         dry_run=(kind == "dry"))
    seconds = time.perf_counter() - started
    after = memory_kib()
    print(json.dumps({
        "seconds": seconds, "rows_read": result.rows_read, "inserted": result.inserted,
        "updated": result.updated, "unchanged": result.unchanged,
        "days_touched": len(result.days_touched),
        "base_rss_kib": before["VmRSS"], "base_peak_kib": before["VmHWM"],
        "peak_kib": after["VmHWM"],
        "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }))
    return 0


def run_child(kind: str, source_url: str, warehouse_url: str) -> dict:
    # URLs go through the environment, so a password never shows in a process list.
    env = dict(os.environ, BENCH_SOURCE_URL=source_url, BENCH_WAREHOUSE_URL=warehouse_url)
    proc = subprocess.run([sys.executable, __file__, "--child", kind], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the {kind} load failed in its subprocess:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- backends ------------------------------------------------------------------------------


class SqliteBackend:
    name = "sqlite"
    marker = "?"

    def __init__(self, folder: Path):
        self.folder = folder

    def new_url(self, label: str) -> str:
        path = self.folder / f"{label}.db"
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return f"sqlite:///{path}"

    def raw_connect(self, url: str):
        conn = sqlite3.connect(sa.make_url(url).database)
        conn.execute("PRAGMA journal_mode = WAL")  # as the warehouse engine sets it
        return conn

    def close(self) -> None:
        pass


class PostgresBackend:
    name = "postgresql"
    marker = "%s"

    def __init__(self, admin_url: str):
        self.admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        self.names: list[str] = []
        self.by_label: dict[str, str] = {}

    def new_url(self, label: str) -> str:
        if label in self.by_label:  # a fresh database under the same label
            self._drop([self.by_label.pop(label)])
        name = f"pa_bench_{label}_{uuid.uuid4().hex[:8]}"
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        self.names.append(name)
        self.by_label[label] = name
        return self.admin.url.set(database=name).render_as_string(hide_password=False)

    def raw_connect(self, url: str):
        import psycopg

        return psycopg.connect(sa.make_url(url).set(drivername="postgresql")
                               .render_as_string(hide_password=False))

    def _drop(self, names: list[str]) -> None:
        with self.admin.connect() as conn:
            for name in names:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.names = [n for n in self.names if n not in names]

    def close(self) -> None:
        self._drop(list(self.names))
        self.admin.dispose()


# --- the source ----------------------------------------------------------------------------


def build_source(url: str, n: int) -> dict:
    engine = make_engine(url, role="source")
    try:
        demo.init(engine)
        return demo.generate(engine, orders=n, days=365, seed=1)
    finally:
        engine.dispose()


def change_some(url: str, backend, fraction: float) -> int:
    """As the app would: change ``fraction`` of the orders, stamped after the newest row."""
    engine = make_engine(url, role="source")
    try:
        with engine.begin() as conn:
            ids = [r[0] for r in conn.exec_driver_sql("SELECT order_id FROM orders")]
            newest = to_instant(conn.exec_driver_sql(
                "SELECT max(updated_at) FROM orders").scalar(), UTC)
            rng = random.Random(2)
            picked = sorted(rng.sample(ids, max(1, int(len(ids) * fraction))))
            m = backend.marker
            conn.exec_driver_sql(
                f"UPDATE orders SET status = {m}, amount = {m}, updated_at = {m} "
                f"WHERE order_id = {m}",
                [("refunded", "1.00",
                  (newest + timedelta(seconds=i + 1)).isoformat(timespec="seconds"), order_id)
                 for i, order_id in enumerate(picked)],
            )
        return len(picked)
    finally:
        engine.dispose()


def stored_rows(url: str) -> list[tuple]:
    """The warehouse rows after the first load, in ``order_id`` order: the bulk paths' input."""
    engine = make_engine(url, role="warehouse")
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(
                sa.select(orders.c.order_id, orders.c.status, orders.c.amount,
                          orders.c.updated_at).order_by(orders.c.order_id))]
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
        yield rows[i:i + size]


def fresh_table(backend, label: str, prefill: list[tuple] | None = None, *,
                index: bool = True) -> str:
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


def raw_executemany(backend, url: str, sql: str, rows: list[tuple], *,
                    setup: str | None = None) -> None:
    conn = backend.raw_connect(url)
    try:
        cur = conn.cursor()
        if setup:
            cur.execute(setup)
        for part in chunks(rows):
            cur.executemany(sql, part)
        conn.commit()
    finally:
        conn.close()


def engine_driver_sql(url: str, sql: str, rows: list[tuple]) -> None:
    engine = make_engine(url, role="warehouse")
    try:
        with engine.begin() as conn:
            for part in chunks(rows):
                conn.exec_driver_sql(sql, part)
    finally:
        engine.dispose()


def core_upsert_statement(dialect: str):
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:
        from sqlalchemy.dialects.postgresql import insert
    stmt = insert(orders)
    return stmt.on_conflict_do_update(
        index_elements=[orders.c.order_id],
        set_={c: stmt.excluded[c] for c in ("status", "amount", "updated_at")},
    )


def engine_core(url: str, stmt, dicts: list[dict]) -> None:
    engine = make_engine(url, role="warehouse")
    try:
        with engine.begin() as conn:
            for part in chunks(dicts):
                conn.execute(stmt, part)
    finally:
        engine.dispose()


def raw_copy(backend, url: str, rows: list[tuple]) -> None:
    conn = backend.raw_connect(url)
    try:
        with conn.cursor() as cur, cur.copy(
                "COPY orders (order_id, status, amount, updated_at) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        conn.commit()
    finally:
        conn.close()


def bulk_paths(backend, rows: list[tuple], repeat: int) -> list[tuple[str, str, float]]:
    """(path, order, best seconds) for each bulk path over ``rows``."""
    p = backend.marker
    insert_sql, upsert_sql = _INSERT.format(p=p), _UPSERT.format(p=p)
    by_time = sorted(rows, key=lambda r: (r[3], r[0]))
    # Every row changed: a new status and a day later, so the updated_at index moves too.
    changed = [(r[0], "refunded", r[2], canonical(from_canonical(r[3]) + timedelta(days=1)))
               for r in rows]
    changed_by_time = sorted(changed, key=lambda r: (r[3], r[0]))
    columns = ("order_id", "status", "amount", "updated_at")
    dicts = [dict(zip(columns, r, strict=True)) for r in rows]
    stmt = core_upsert_statement(backend.name)

    def empty(run: Callable[[str], None], *, index: bool = True):
        def step():
            url = fresh_table(backend, "bulk", index=index)
            started = time.perf_counter()
            run(url)
            return time.perf_counter() - started
        return step

    def full(data: list[tuple]):
        def step():
            url = fresh_table(backend, "bulk", prefill=rows)
            started = time.perf_counter()
            raw_executemany(backend, url, upsert_sql, data)
            return time.perf_counter() - started
        return step

    def raw(sql: str, data: list[tuple], setup: str | None = None):
        return lambda url: raw_executemany(backend, url, sql, data, setup=setup)

    cases = [
        ("raw INSERT (floor)", "order_id", empty(raw(insert_sql, rows))),
        ("raw upsert", "order_id", empty(raw(upsert_sql, rows))),
        ("raw upsert", "updated_at", empty(raw(upsert_sql, by_time))),
        ("raw upsert, every row exists", "order_id", full(changed)),
        ("raw upsert, every row exists", "updated_at", full(changed_by_time)),
        ("raw upsert, no updated_at index", "order_id", empty(raw(upsert_sql, rows),
                                                              index=False)),
        ("raw upsert, no updated_at index", "updated_at", empty(raw(upsert_sql, by_time),
                                                                index=False)),
        ("engine exec_driver_sql upsert", "order_id",
         empty(lambda url: engine_driver_sql(url, upsert_sql, rows))),
        ("engine Core execute(dicts) upsert", "order_id",
         empty(lambda url: engine_core(url, stmt, dicts))),
    ]
    if backend.name == "sqlite":
        cases.append(("raw upsert, cache_size 64 MiB", "order_id",
                      empty(raw(upsert_sql, rows, "PRAGMA cache_size = -65536"))))
    if backend.name == "postgresql":
        cases.append(("raw COPY (no upsert)", "order_id",
                      empty(lambda url: raw_copy(backend, url, rows))))
    best: dict[int, float] = {}
    for _ in range(repeat):  # round-robin, so a slow moment does not hit one path only
        for i, (_name, _order, step) in enumerate(cases):
            gc.collect()
            seconds = step()
            best[i] = min(best.get(i, seconds), seconds)
    return [(name, order, best[i]) for i, (name, order, _step) in enumerate(cases)]


# --- the report ----------------------------------------------------------------------------


def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def print_loads(title: str, loads: list[tuple[str, dict]], floor_per_row: float) -> None:
    print(f"\n{title}")
    header = (f"{'case':<34} | {'rows read':>9} | {'ins/upd/unch':>22} | {'seconds':>8} | "
              f"{'rows/s':>9} | {'ratio':>6} | {'base RSS':>9} | {'peak RSS':>9} | "
              f"{'growth':>8}")
    print(header)
    print("-" * len(header))
    for name, r in loads:
        per_row = r["seconds"] / max(r["rows_read"], 1)
        counts = f"{r['inserted']:,}/{r['updated']:,}/{r['unchanged']:,}"
        print(f"{name:<34} | {r['rows_read']:>9,} | {counts:>22} | {r['seconds']:>8.2f} | "
              f"{r['rows_read'] / r['seconds']:>9,.0f} | {per_row / floor_per_row:>5.1f}x | "
              f"{mib(r['base_rss_kib']):>9} | {mib(r['peak_kib']):>9} | "
              f"{mib(r['peak_kib'] - r['base_rss_kib']):>8}")
    print("ratio: seconds per row read / seconds per row of the raw INSERT floor below. "
          "base RSS: the subprocess after imports and connections, before the load; "
          "peak RSS: its VmHWM after the load; growth: peak - base.")


def print_bulk(title: str, results: list[tuple[str, str, float]], n: int) -> None:
    floor = results[0][2]
    print(f"\n{title}")
    header = f"{'case':<34} | {'order':>10} | {'seconds':>8} | {'rows/s':>10} | {'ratio':>6}"
    print(header)
    print("-" * len(header))
    for name, order, seconds in results:
        print(f"{name:<34} | {order:>10} | {seconds:>8.2f} | {n / seconds:>10,.0f} | "
              f"{seconds / floor:>5.2f}x")


def print_claims(results: list[tuple[str, str, float]]) -> None:
    t = {(name, order): seconds for name, order, seconds in results}
    raw_key = t[("raw upsert", "order_id")]
    claims = [
        ("upsert, empty table: updated_at order / order_id order", "3-5x",
         t[("raw upsert", "updated_at")] / raw_key),
        ("upsert, rows exist: updated_at order / order_id order", "3-5x",
         t[("raw upsert, every row exists", "updated_at")]
         / t[("raw upsert, every row exists", "order_id")]),
        ("upsert, no updated_at index: updated_at / order_id order", "3-5x",
         t[("raw upsert, no updated_at index", "updated_at")]
         / t[("raw upsert, no updated_at index", "order_id")]),
        ("Core execute(dicts) / raw upsert", "2-3x",
         t[("engine Core execute(dicts) upsert", "order_id")] / raw_key),
        ("Core execute(dicts) / engine exec_driver_sql", "2-3x",
         t[("engine Core execute(dicts) upsert", "order_id")]
         / t[("engine exec_driver_sql upsert", "order_id")]),
        ("engine exec_driver_sql / raw upsert", "1x",
         t[("engine exec_driver_sql upsert", "order_id")] / raw_key),
    ]
    header = f"{'claim of the issue':<56} | {'issue':>6} | {'measured':>8}"
    print(header)
    print("-" * len(header))
    for text, said, measured in claims:
        print(f"{text:<56} | {said:>6} | {measured:>7.2f}x")


def bench_backend(backend, n: int, repeat: int) -> None:
    small = max(n // 10, 1)
    print(f"\n== {backend.name}: building the sources ({n:,} and {small:,} orders) ==",
          flush=True)
    started = time.perf_counter()
    source = backend.new_url("source")
    build_source(source, n)
    source_small = backend.new_url("source_small")
    build_source(source_small, small)
    print(f"sources built in {time.perf_counter() - started:.1f}s", flush=True)

    loads = []
    warehouse = backend.new_url("warehouse")
    loads.append((f"first load, {n:,}", run_child("first", source, warehouse)))
    rows = stored_rows(warehouse)
    loads.append(("second run, nothing changed", run_child("noop", source, warehouse)))
    changed = change_some(source, backend, CHANGED_FRACTION)
    loads.append((f"after {changed:,} rows changed (1%)", run_child("changed", source,
                                                                    warehouse)))
    loads.append((f"dry run into empty, {n:,}",
                  run_child("dry", source, backend.new_url("warehouse_dry"))))
    loads.append((f"first load, {small:,} (N/10)",
                  run_child("first", source_small, backend.new_url("warehouse_small"))))
    print("load_orders done; measuring the bulk paths", flush=True)
    results = bulk_paths(backend, rows, repeat)
    floor_per_row = results[0][2] / len(rows)
    print_loads(f"{backend.name}: load_orders, each in a fresh subprocess (tz UTC, lookback "
                f"{LOOKBACK_DAYS}, chunk {CHUNK:,})", loads, floor_per_row)
    print_bulk(f"{backend.name}: bulk paths over the {len(rows):,} stored rows (one "
               f"transaction, executemany per {CHUNK:,} rows, best of {repeat})", results,
               len(rows))
    print()
    print_claims(results)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000,
                        help="orders in the source (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=2,
                        help="best of this many runs per bulk path (default: %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="2,000 orders, one repeat: a smoke run of a few seconds")
    parser.add_argument("--workdir", type=Path,
                        help="write here and keep it (default: a temporary folder, removed)")
    parser.add_argument("--postgres", metavar="ADMIN_URL",
                        help="also run against PostgreSQL, in throw-away databases made "
                        "through this URL")
    parser.add_argument("--pg-repeat", type=int, default=1,
                        help="best of this many runs per bulk path on PostgreSQL "
                        "(default: %(default)s)")
    parser.add_argument("--child", choices=["first", "noop", "changed", "dry"],
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args.child)
    n, repeat = (2_000, 1) if args.quick else (args.orders, args.repeat)
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix="bench_load_", dir=args.workdir))
    else:
        workdir = Path(tempfile.mkdtemp(prefix="bench_load_"))
    print(f"bench_load: {n:,} orders, workdir {workdir}, python {sys.version.split()[0]}, "
          f"sqlite {sqlite3.sqlite_version}, sqlalchemy {sa.__version__}, "
          f"{os.cpu_count()} cpu", flush=True)
    started = time.perf_counter()
    try:
        bench_backend(SqliteBackend(workdir), n, repeat)
        print(f"\nsqlite part: {time.perf_counter() - started:.0f}s", flush=True)
        if args.postgres:
            print(f"\nPostgreSQL through {redact(args.postgres)}")
            backend = PostgresBackend(args.postgres)
            pg_started = time.perf_counter()
            try:
                bench_backend(backend, n, 1 if args.quick else args.pg_repeat)
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
