"""What one whole ``dagster asset materialize --select orders`` costs, next to Dagster's own
per-run cost measured through the same CLI in the same run.

    .venv/bin/python benchmarks/bench_run_cost.py [--orders 100000] [--runs 3] [--workdir DIR]
        [--quick]

A SQLite source of N orders is loaded once (in process, not timed). Then, ``--runs``
times each, round-robin, every case a fresh ``dagster`` process on one DAGSTER_HOME:

- ``orders``, 1,000 rows changed: the app changes 1,000 orders, then the incremental run;
- ``orders``, nothing changed: the incremental run that finds nothing new;
- ``trivial`` (``benchmarks/trivial_location.py``): one asset whose check is declared on
  it (``check_specs``), so both run in one step: Dagster's floor for an asset + check;
- ``trivial_separate``: the same with the check as its own ``@asset_check``, which runs
  as a second step (a second process under the default executor).

Each line gives the median wall time of the whole CLI and its ratio to ``trivial``.
Nothing is written in the checkout (DAGSTER_HOME and the data live in the workdir).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
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

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
CHANGED = 1_000


def change_some(source_url: str, count: int, seed: int) -> None:
    """The app changes ``count`` orders, stamped just after the newest row (as it writes)."""
    engine = make_engine(source_url, role="source")
    try:
        with engine.begin() as conn:
            ids = [r[0] for r in conn.exec_driver_sql("SELECT order_id FROM orders")]
            newest = to_instant(conn.exec_driver_sql(
                "SELECT max(updated_at) FROM orders").scalar(), UTC)
            picked = random.Random(seed).sample(ids, min(count, len(ids)))
            conn.exec_driver_sql(
                "UPDATE orders SET status = ?, amount = ?, updated_at = ? WHERE order_id = ?",
                [("paid", f"{seed}.00", (newest + timedelta(seconds=i + 1))
                  .isoformat(timespec="seconds"), oid) for i, oid in enumerate(picked)])
    finally:
        engine.dispose()


def materialize(env: dict, cwd: Path, *target: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run([str(BIN / "dagster"), "asset", "materialize", *target], cwd=cwd,
                          env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"dagster asset materialize {' '.join(target)} failed:\n"
                         f"{proc.stderr[-3000:]}")
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2,000 orders, one run each")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    n, runs = (2_000, 1) if args.quick else (args.orders, args.runs)
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="bench_run_cost_", dir=args.workdir))
    else:
        folder = Path(tempfile.mkdtemp(prefix="bench_run_cost_"))
    started = time.perf_counter()
    try:
        home = folder / "dagster_home"
        home.mkdir()
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        source_url = f"sqlite:///{folder / 'app.db'}"
        warehouse_url = f"sqlite:///{folder / 'warehouse.db'}"
        source = make_engine(source_url, role="source")
        demo.init(source)
        demo.generate(source, orders=n, days=60, seed=1)
        warehouse = make_engine(warehouse_url, role="warehouse")
        load_orders(source, warehouse, tz=UTC, lookback_days=2,
                    now=datetime(2027, 2, 1, tzinfo=UTC))
        source.dispose()
        warehouse.dispose()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_CRASH")}
        env.update(DAGSTER_HOME=str(home), SOURCE_DATABASE_URL=source_url,
                   WAREHOUSE_DATABASE_URL=warehouse_url, PIPELINE_DATA_DIR=str(folder / "data"))
        ours = ("-m", "pipeline_assets.definitions", "--select", "orders")
        trivial = ("-f", str(HERE / "trivial_location.py"), "--select")
        print(f"bench_run_cost: {n:,} orders, {runs} run(s) per case, workdir {folder}",
              flush=True)
        materialize(env, folder, *trivial, "trivial")  # creates the instance's storage
        times: dict[str, list[float]] = {}
        cases = [
            (f"orders, {CHANGED:,} rows changed", ours, True),
            ("orders, nothing changed", ours, False),
            ("trivial asset + check, one step (baseline)", (*trivial, "trivial"), False),
            ("trivial asset + separate check, two steps", (*trivial, "trivial_separate"),
             False),
        ]
        for round_ in range(runs):
            for name, target, change in cases:
                if change:
                    change_some(source_url, CHANGED, seed=round_ + 10)
                times.setdefault(name, []).append(materialize(env, folder, *target))
        base = statistics.median(times[cases[2][0]])
        print("\nwhole `dagster asset materialize` (median of the runs); ratio: / the baseline")
        header = f"{'case':<46} | {'seconds':>8} | {'ratio':>6} | {'runs':>20}"
        print(header)
        print("-" * len(header))
        for name, _target, _change in cases:
            med = statistics.median(times[name])
            runs_text = " ".join(f"{t:.1f}" for t in times[name])
            print(f"{name:<46} | {med:>8.2f} | {med / base:>5.2f}x | {runs_text:>20}")
    finally:
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
