"""What whole runs of ``orders`` cost — the load and its ``orders_match_source`` check, through
the real ``dagster asset materialize`` — next to Dagster's own per-run cost measured through
the same CLI in the same run, at the sizes users have.

    .venv/bin/python benchmarks/bench_run_cost.py [--orders 100000,1000000] [--runs 3]
        [--postgres ADMIN_URL] [--workdir DIR] [--quick]

For each size N, one source of N generated orders over 60 days (SQLite files, or with
``--postgres`` PostgreSQL databases for source and warehouse, made through the admin URL
and dropped at the end). Then ``--runs`` rounds, each case a fresh ``dagster`` process on
one DAGSTER_HOME, in this order:

- ``orders``, first load: into a new empty warehouse, the whole source;
- ``orders``, nothing changed: the incremental run that finds nothing new;
- ``orders``, 1,000 rows changed: the app sets 1,000 orders picked over the whole history
  to ``paid`` (their old days: every day), then the incremental run;
- ``trivial`` (``benchmarks/trivial_location.py``): one asset whose check is declared on
  it, so both run in one step: Dagster's floor for an asset + check (the baseline);
- ``trivial_separate``: the same with the check as its own ``@asset_check`` (two steps).

Each line gives the median wall time and its ratio to the baseline. After the rounds, the
same first load and 1,000-row change once more in this process, on a fresh warehouse, split
into ``load_orders`` and the check (``reconcile_horizon`` with the batch's
``days_touched``), the check also without the days the load read whole (``read_whole``):
where the seconds of a whole run go. Nothing is written in the checkout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    OURS,
    TRIVIAL,
    TRIVIAL_SEPARATE,
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
from pipeline_assets.core.secrets import redact
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC  # noqa: E402
from pipeline_assets.core.verify.horizon import reconcile_horizon
from pipeline_assets_tests.orders import load_orders

CHANGED = 1_000
NOW = datetime(2027, 2, 1, tzinfo=UTC)  # after every generated order
RECONCILE_DAYS = 7


def cases() -> list[tuple[str, tuple, str | None]]:
    """(name, target, what happens first: "fresh warehouse", "change" or None)."""
    return [
        ("orders, first load", OURS, "fresh warehouse"),
        ("orders, nothing changed", OURS, None),
        (f"orders, {CHANGED:,} rows changed", OURS, "change"),
        ("trivial asset + check, one step (baseline)", TRIVIAL, None),
        ("trivial asset + separate check, two steps", TRIVIAL_SEPARATE, None),
    ]


def in_process(source_url: str, warehouse_url: str, round_seed: int) -> list[tuple[str, float]]:
    """The first load and a 1,000-row change, each split into its load and its check."""
    source = make_engine(source_url, role="app")
    warehouse = make_engine(warehouse_url, role="warehouse")
    out = []
    try:
        for name, change in (("first load", False), (f"{CHANGED:,} rows changed", True)):
            if change:
                change_some(
                    source_url, CHANGED, seed=round_seed, status="paid", amount=f"{round_seed}.23"
                )
            started = time.perf_counter()
            result = load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
            load = time.perf_counter() - started
            checks = []
            for read_whole in (result.read_whole, None):
                started = time.perf_counter()
                _, days, verdict = reconcile_horizon(
                    source,
                    warehouse,
                    UTC,
                    reconcile_days=RECONCILE_DAYS,
                    days_touched=result.days_touched,
                    read_whole=read_whole,
                    spec=ORDERS,
                )
                checks.append(time.perf_counter() - started)
                if not verdict.passed:
                    raise SystemExit(f"the check failed after the {name}: {verdict.description}")
            out.append((f"{name}: load_orders ({result.rows_read:,} rows read)", load))
            out.append((f"{name}: the check ({len(days)} days compared)", checks[0]))
            out.append((f"{name}: the check, reading the source again", checks[1]))
    finally:
        source.dispose()
        warehouse.dispose()
    return out


def bench_size(backend, folder: Path, home: Path, n: int, runs: int) -> None:
    started = time.perf_counter()
    source_url = backend.new_url("source")
    build_source(source_url, n)
    print(
        f"\n{n:,} orders on {backend.name}: source built in "
        f"{time.perf_counter() - started:.0f}s ({redact(source_url)})",
        flush=True,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_CRASH")}
    env.update(
        DAGSTER_HOME=str(home),
        SOURCE_DATABASE_URL=source_url,
        PIPELINE_DATA_DIR=str(folder / "data"),
        RECONCILE_DAYS=str(RECONCILE_DAYS),
    )
    times: dict[str, list[float]] = {}
    for round_ in range(runs):
        for name, target, before in cases():
            if before == "fresh warehouse":
                env["WAREHOUSE_DATABASE_URL"] = backend.new_url("warehouse")
            elif before == "change":
                change_some(
                    source_url, CHANGED, seed=round_ + 10, status="paid", amount=f"{round_ + 10}.23"
                )
            times.setdefault(name, []).append(materialize(env, folder, *target))
    split = in_process(source_url, backend.new_url("warehouse"), round_seed=99)
    base = statistics.median(times[cases()[3][0]])
    print(
        f"\nwhole `dagster asset materialize`, {n:,} orders, {backend.name} "
        "(median of the runs); ratio: / the baseline"
    )
    header = f"{'case':<46} | {'seconds':>8} | {'ratio':>6} | {'runs':>20}"
    print(header)
    print("-" * len(header))
    for name, _target, _before in cases():
        med = statistics.median(times[name])
        runs_text = " ".join(f"{t:.1f}" for t in times[name])
        print(f"{name:<46} | {med:>8.2f} | {med / base:>5.2f}x | {runs_text:>20}")
    print(f"\nthe same in this process, split ({n:,} orders, {backend.name})")
    for name, seconds in split:
        print(f"  {name:<62} {seconds:>7.2f} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--orders",
        default="100000,1000000",
        help="sizes, comma-separated (default: 100000,1000000)",
    )
    parser.add_argument("--runs", type=int, default=3)
    add_postgres_options(parser, "source and warehouse")
    parser.add_argument("--quick", action="store_true", help="2,000 orders, one run each")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    sizes = [2_000] if args.quick else [int(x) for x in args.orders.split(",")]
    runs = 1 if args.quick else args.runs
    folder = workdir_for(args, "bench_run_cost_")
    started = time.perf_counter()
    backend = backend_for(folder, postgres_url(args))
    try:
        home = dagster_home(folder)
        print(
            f"bench_run_cost: sizes {sizes}, {runs} run(s) per case, workdir {folder}", flush=True
        )
        materialize({**os.environ, "DAGSTER_HOME": str(home)}, folder, *TRIVIAL)  # storage
        for n in sizes:
            bench_size(backend, folder, home, n, runs)
    finally:
        backend.close()
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
