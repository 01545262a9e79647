"""Our load next to dlt's, on the same generated source, in the same run.

    .venv/bin/python benchmarks/bench_peer.py [--orders 1000000] [--postgres ADMIN_URL]
        [--workdir DIR] [--quick]

Needs the ``bench`` extra (``pip install -e '.[bench]'``: dlt 1.31 with duckdb and the
SQL source, connectorx); without it the script says so and exits 0.

One source of N orders (``demo.generate``, ``updated_at`` over 60 days, amounts as text):
a SQLite file, or with ``--postgres`` a PostgreSQL database (and our warehouse beside it).
Each contender loads it first into its own empty destination, then 1 % of the orders
change (stamped after the newest row, as an app writes them) and each runs its
incremental load:

- ours: ``load_orders`` into a warehouse (tz UTC, lookback 2 days), in this process; the
  time is the call;
- ours, whole run: ``dagster asset materialize --select orders`` into its own empty
  warehouse, the ``orders_match_source`` check included, minus the trivial asset + check
  run through the same CLI (Dagster's own per-run cost, ``benchmarks/trivial_location.py``)
  measured just before it: what a user's run costs beyond Dagster's;
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
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    OURS,
    TRIVIAL,
    MysqlBackend,
    add_postgres_options,
    backend_for,
    build_source,
    change_some,
    dagster_home,
    materialize,
    postgres_url,
    workdir_for,
)

from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.times import UTC  # noqa: E402
from pipeline_assets_tests.orders import load_orders

NOW = datetime(2027, 2, 1, tzinfo=UTC)


class Ours:
    def __init__(self, source_url: str, warehouse_url: str, backend_name: str):
        self.name = f"pipeline_assets load_orders -> {backend_name}"
        self.source = make_engine(source_url, role="app")
        self.warehouse = make_engine(warehouse_url, role="warehouse")

    def run(self) -> tuple[float, int]:
        started = time.perf_counter()
        result = load_orders(self.source, self.warehouse, tz=UTC, lookback_days=2, now=NOW)
        return time.perf_counter() - started, result.rows_read


class OursWholeRun:
    """The whole run through the CLI, minus the trivial asset + check run before it."""

    def __init__(self, source_url: str, warehouse_url: str, folder: Path):
        self.name = "pipeline_assets whole run (CLI) - trivial run"
        self.folder = folder
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_")}
        self.env.update(
            DAGSTER_HOME=str(dagster_home(folder)),
            SOURCE_DATABASE_URL=source_url,
            WAREHOUSE_DATABASE_URL=warehouse_url,
            PIPELINE_DATA_DIR=str(folder / "data"),
        )
        materialize(self.env, folder, *TRIVIAL)  # the instance's storage, made once
        self.trivial: list[float] = []
        self.whole: list[float] = []

    def run(self) -> tuple[float, int]:
        self.trivial.append(materialize(self.env, self.folder, *TRIVIAL))
        self.whole.append(materialize(self.env, self.folder, *OURS))
        engine = make_engine(self.env["WAREHOUSE_DATABASE_URL"], role="warehouse")
        try:
            with engine.connect() as conn:
                read = conn.exec_driver_sql(
                    "SELECT rows_read FROM pipeline_batches ORDER BY id DESC"
                ).scalar()
        finally:
            engine.dispose()
        return self.whole[-1] - self.trivial[-1], int(read)


class Dlt:
    def __init__(self, credentials: str, folder: Path, backend: str):
        import dlt
        from dlt.sources.sql_database import sql_table

        self.name = f"dlt {dlt.__version__} sql_table({backend}) -> duckdb"
        self.backend = backend
        self._sql_table = sql_table
        self._dlt = dlt
        self.credentials = credentials
        self.pipeline = dlt.pipeline(
            pipeline_name=f"peer_{backend}",
            pipelines_dir=str(folder / "pipelines"),
            destination=dlt.destinations.duckdb(str(folder / f"peer_{backend}.duckdb")),
            dataset_name="peer",
        )

    def run(self) -> tuple[float, int]:
        table = self._sql_table(
            credentials=self.credentials,
            table="orders",
            backend=self.backend,
            incremental=self._dlt.sources.incremental("updated_at"),
            primary_key="order_id",
            write_disposition="merge",
        )
        started = time.perf_counter()
        info = self.pipeline.run(table)
        seconds = time.perf_counter() - started
        info.raise_on_failed_jobs()
        return seconds, self._rows()

    def _rows(self) -> int:
        trace = self.pipeline.last_trace
        counts = trace.last_normalize_info.row_counts if trace and trace.last_normalize_info else {}
        return int(counts.get("orders", 0))


def table(rows: list[tuple[str, float, int, float]]) -> None:
    header = f"{'case':<52} | {'rows read':>9} | {'seconds':>8} | {'rows/s':>9} | {'ratio':>6}"
    print(header)
    print("-" * len(header))
    for case, seconds, read, ratio in rows:
        print(
            f"{case:<52} | {read:>9,} | {seconds:>8.2f} | {read / seconds:>9,.0f} | {ratio:>5.2f}x"
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    add_postgres_options(parser, "source and warehouse")
    parser.add_argument(
        "--changed", type=int, help="orders changed before the incremental run (default: 1 %%)"
    )
    parser.add_argument(
        "--mysql",
        metavar="ADMIN_URL",
        help="the source on this MySQL or MariaDB server instead "
        "(mysql+pymysql://root@127.0.0.1:3306/test), the warehouses SQLite",
    )
    parser.add_argument("--quick", action="store_true", help="5,000 orders: a smoke run")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    try:
        import dlt  # noqa: F401
    except ImportError:
        print(
            "bench_peer: dlt is not installed; install the bench extra "
            "(pip install -e '.[bench]') to compare with it"
        )
        return 0
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    n = 5_000 if args.quick else args.orders
    folder = workdir_for(args, "bench_peer_")
    os.environ.setdefault("DLT_DATA_DIR", str(folder / "dlt_data"))
    started = time.perf_counter()
    backend = backend_for(folder, postgres_url(args))
    # --mysql: the source on that server, our warehouses where the backend puts them
    sources = MysqlBackend(args.mysql) if args.mysql else backend
    try:
        source_url = sources.new_url("source")
        build_source(source_url, n)
        print(
            f"bench_peer: {n:,} orders on {sources.name}, warehouse on {backend.name}, "
            f"source built in "
            f"{time.perf_counter() - started:.1f}s, workdir {folder}",
            flush=True,
        )
        credentials = source_url.replace("postgresql+psycopg://", "postgresql://")
        contenders = [
            Ours(source_url, backend.new_url("warehouse"), backend.name),
            OursWholeRun(source_url, backend.new_url("warehouse_cli"), folder),
        ]
        for name in ("connectorx", "pyarrow"):
            contenders.append(Dlt(credentials, folder, name))
        first = {c.name: c.run() for c in contenders}
        changed = change_some(source_url, args.changed or max(1, n // 100))
        second = {c.name: c.run() for c in contenders}
        ours = contenders[0].name
        whole = contenders[1]
        for title, results in (
            (f"first load, {n:,} orders", first),
            (f"incremental after {changed:,} orders changed", second),
        ):
            print(f"\n{title}; ratio: our load_orders seconds / this contender's seconds")
            table([(name, s, read, results[ours][0] / s) for name, (s, read) in results.items()])
        print(
            f"\nthe whole runs through the CLI: {', '.join(f'{t:.2f}' for t in whole.whole)}"
            f" s; the trivial runs before them: "
            f"{', '.join(f'{t:.2f}' for t in whole.trivial)} s"
        )
        dlt_first = first[contenders[2].name][0]
        print(
            f"whole first run - trivial run = {first[whole.name][0]:.2f} s, "
            f"{first[whole.name][0] / dlt_first:.2f}x dlt + connectorx ({dlt_first:.2f} s)"
        )
    finally:
        backend.close()
        if sources is not backend:
            sources.close()
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
