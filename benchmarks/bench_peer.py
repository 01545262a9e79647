"""Our load next to dlt's, on the same generated source, in the same run.

    .venv/bin/python benchmarks/bench_peer.py [--orders 1000000] [--workdir DIR] [--quick]

Needs the ``bench`` extra (``pip install -e '.[bench]'``: dlt 1.31 with duckdb and the
SQL source, connectorx); without it the script says so and exits 0.

One SQLite source of N orders (``demo.generate``, ``updated_at`` over 60 days, amounts as
text). Each contender loads it first into its own empty destination, then 1 % of the
orders change (stamped after the newest row, as an app writes them) and each runs its
incremental load:

- ours: ``load_orders`` into a SQLite warehouse (tz UTC, lookback 2 days), in this
  process; the time is the call.
- dlt: ``sql_table(..., backend=B, incremental=dlt.sources.incremental("updated_at"))``
  with ``primary_key="order_id"`` and ``write_disposition="merge"``, into duckdb, for
  B = connectorx and pyarrow; the time is ``pipeline.run``.

Ratios are our seconds over theirs (below 1.0: we are faster). dlt's incremental keeps
no lookback (it re-reads only rows at or after its last value), ours re-reads the
lookback window, so our incremental reads more rows.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline_assets.core import demo  # noqa: E402
from pipeline_assets.core.db import make_engine  # noqa: E402
from pipeline_assets.core.load import load_orders  # noqa: E402
from pipeline_assets.core.times import UTC, to_instant  # noqa: E402

NOW = datetime(2027, 2, 1, tzinfo=UTC)


def build_source(path: Path, n: int) -> str:
    url = f"sqlite:///{path}"
    engine = make_engine(url, role="source")
    try:
        demo.init(engine)
        demo.generate(engine, orders=n, days=60, seed=1)
    finally:
        engine.dispose()
    return url


def change_some(url: str, fraction: float) -> int:
    engine = make_engine(url, role="source")
    try:
        with engine.begin() as conn:
            ids = [r[0] for r in conn.exec_driver_sql("SELECT order_id FROM orders")]
            newest = to_instant(conn.exec_driver_sql(
                "SELECT max(updated_at) FROM orders").scalar(), UTC)
            picked = sorted(random.Random(2).sample(ids, max(1, int(len(ids) * fraction))))
            conn.exec_driver_sql(
                "UPDATE orders SET status = ?, amount = ?, updated_at = ? WHERE order_id = ?",
                [("refunded", "1.00",
                  (newest + timedelta(seconds=i + 1)).isoformat(timespec="seconds"), oid)
                 for i, oid in enumerate(picked)])
        return len(picked)
    finally:
        engine.dispose()


class Ours:
    name = "pipeline_assets load_orders -> SQLite"

    def __init__(self, source_url: str, folder: Path):
        self.source = make_engine(source_url, role="source")
        self.warehouse = make_engine(f"sqlite:///{folder / 'warehouse.db'}", role="warehouse")

    def run(self) -> tuple[float, int]:
        started = time.perf_counter()
        result = load_orders(self.source, self.warehouse, tz=UTC, lookback_days=2, now=NOW)
        return time.perf_counter() - started, result.rows_read


class Dlt:
    def __init__(self, source_path: Path, folder: Path, backend: str):
        import dlt
        from dlt.sources.sql_database import sql_table

        self.name = f"dlt {dlt.__version__} sql_table({backend}) -> duckdb"
        self.backend = backend
        self._sql_table = sql_table
        self._dlt = dlt
        self.credentials = f"sqlite:///{source_path}"
        self.pipeline = dlt.pipeline(
            pipeline_name=f"peer_{backend}", pipelines_dir=str(folder / "pipelines"),
            destination=dlt.destinations.duckdb(str(folder / f"peer_{backend}.duckdb")),
            dataset_name="peer")

    def run(self) -> tuple[float, int]:
        table = self._sql_table(
            credentials=self.credentials, table="orders", backend=self.backend,
            incremental=self._dlt.sources.incremental("updated_at"),
            primary_key="order_id", write_disposition="merge")
        started = time.perf_counter()
        info = self.pipeline.run(table)
        seconds = time.perf_counter() - started
        info.raise_on_failed_jobs()
        return seconds, self._rows()

    def _rows(self) -> int:
        trace = self.pipeline.last_trace
        counts = trace.last_normalize_info.row_counts if trace and trace.last_normalize_info \
            else {}
        return int(counts.get("orders", 0))


def table(rows: list[tuple[str, float, int, float]]) -> None:
    header = (f"{'case':<52} | {'rows read':>9} | {'seconds':>8} | {'rows/s':>9} | "
              f"{'ratio':>6}")
    print(header)
    print("-" * len(header))
    for case, seconds, read, ratio in rows:
        print(f"{case:<52} | {read:>9,} | {seconds:>8.2f} | {read / seconds:>9,.0f} | "
              f"{ratio:>5.2f}x")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="5,000 orders: a smoke run")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    try:
        import dlt  # noqa: F401
    except ImportError:
        print("bench_peer: dlt is not installed; install the bench extra "
              "(pip install -e '.[bench]') to compare with it")
        return 0
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    n = 5_000 if args.quick else args.orders
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="bench_peer_", dir=args.workdir))
    else:
        folder = Path(tempfile.mkdtemp(prefix="bench_peer_"))
    os.environ.setdefault("DLT_DATA_DIR", str(folder / "dlt_data"))
    started = time.perf_counter()
    try:
        source_path = folder / "app.db"
        source_url = build_source(source_path, n)
        print(f"bench_peer: {n:,} orders, source built in "
              f"{time.perf_counter() - started:.1f}s, workdir {folder}", flush=True)
        contenders = [Ours(source_url, folder)]
        for backend in ("connectorx", "pyarrow"):
            contenders.append(Dlt(source_path, folder, backend))
        first = {c.name: c.run() for c in contenders}
        changed = change_some(source_url, 0.01)
        second = {c.name: c.run() for c in contenders}
        ours = contenders[0].name
        for title, results in ((f"first load, {n:,} orders", first),
                               (f"incremental after {changed:,} orders changed (1%)", second)):
            print(f"\n{title}; ratio: our seconds / this contender's seconds")
            table([(name, s, read, results[ours][0] / s)
                   for name, (s, read) in results.items()])
    finally:
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
