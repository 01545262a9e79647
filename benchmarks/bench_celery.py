"""What running every step as a Celery task costs, next to Dagster's default executor,
in the same run, through the same CLI.

    .venv/bin/python benchmarks/bench_celery.py [--days 365] [--paid-per-day 1000]
        [--runs 3] [--workers 2] [--broker URL] [--workdir DIR] [--quick]

One world: the year-long source and warehouse of ``bench_backfill.py`` (about
``days × paid-per-day / 0.7`` orders, days from 2025-01-01, SQLite files). The broker is
RabbitMQ on 127.0.0.1 in a virtual host of its own, made with ``rabbitmqctl`` and deleted
at the end (or ``--broker URL``); ``--workers`` workers of ``deploy/celery-worker.sh``
(each one process) run the steps, started once before the rounds (their start is
reported apart: a deployment starts them once, not per run). Then ``--runs`` rounds,
each case a fresh ``dagster asset materialize`` process on one DAGSTER_HOME, the two
executors one after the other:

- ``orders``, 1,000 rows changed (the app sets 1,000 orders picked over the whole history
  to ``paid``, so their old days spread over the year), then the incremental run;
- the range backfill of every day: ``paid_orders,daily_revenue --partition-range``;
- the trivial asset + check of ``trivial_location.py`` on the default executor: Dagster's
  own per-run floor, for scale.

Each line gives the median wall time; the ratio column divides the Celery run by the
default one of the same case. Nothing is written in the checkout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_backfill import FIRST_DAY, _pipeline_env, build_warehouse  # noqa: E402
from common import (  # noqa: E402
    BIN,
    TRIVIAL,
    change_some,
    dagster_home,
    materialize,
    workdir_for,
)

from pipeline_assets.core.broker import where  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHANGED = 1_000
ORDERS = ("-m", "pipeline_assets.definitions", "--select", "orders")


def rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


class Workers:
    """``count`` workers of deploy/celery-worker.sh with ``env``, logs under ``folder``."""

    def __init__(self, count: int, env: dict[str, str], folder: Path):
        self.procs = []
        started = time.perf_counter()
        for n in range(count):
            log = folder / f"worker{n + 1}.log"
            with open(log, "wb") as out:
                self.procs.append(
                    (
                        log,
                        subprocess.Popen(
                            [str(ROOT / "deploy" / "celery-worker.sh")],
                            env=env
                            | {"CELERY_WORKER_NAME": f"bench{n + 1}@%h", "PYTHON": sys.executable},
                            cwd=folder,
                            stdout=out,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                        ),
                    )
                )
        deadline = time.monotonic() + 120
        for log, proc in self.procs:
            while " ready." not in log.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise SystemExit(f"a worker did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.1)
        self.start_seconds = time.perf_counter() - started

    def steps(self) -> int:
        return sum(log.read_text(errors="replace").count("succeeded in") for log, _ in self.procs)

    def stop(self) -> None:
        for _, proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
        for _, proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--paid-per-day", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--broker", help="a broker URL (default: a new RabbitMQ virtual host)")
    parser.add_argument("--quick", action="store_true", help="10 days × 50 orders, one run")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    days, per_day, runs = (10, 50, 1) if args.quick else (args.days, args.paid_per_day, args.runs)
    folder = workdir_for(args, "bench_celery_")
    started = time.perf_counter()
    vhost = None
    broker = args.broker
    if not broker:
        vhost = f"pa_bench_{uuid.uuid4().hex[:8]}"
        rabbitmqctl("add_vhost", vhost)
        rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        broker = f"pyamqp://guest:guest@127.0.0.1:5672/{vhost}"
    workers = None
    try:
        data = folder / "data"
        data.mkdir()
        built = build_warehouse(data, days, per_day)
        last = FIRST_DAY.fromordinal(FIRST_DAY.toordinal() + days - 1).isoformat()
        backfill = (
            "-m",
            "pipeline_assets.definitions",
            "--select",
            "paid_orders,daily_revenue",
            "--partition-range",
            f"{FIRST_DAY.isoformat()}...{last}",
        )
        home = dagster_home(folder)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(
                ("PIPELINE_", "SOURCE_DATABASE", "WAREHOUSE_DATABASE", "PAID_ORDERS", "CELERY_")
            )
        }
        env |= _pipeline_env(data) | {
            "DAGSTER_HOME": str(home),
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        }
        celery = env | {"PIPELINE_EXECUTOR": "celery", "CELERY_BROKER_URL": broker}
        print(
            f"bench_celery: {built['orders']:,} orders over {days} days, {runs} run(s) "
            f"per case, {args.workers} worker(s) on {where(broker)}, workdir {folder}",
            flush=True,
        )
        workers = Workers(args.workers, celery, folder)
        print(f"{args.workers} worker(s) ready in {workers.start_seconds:.1f} s", flush=True)
        materialize(env, folder, *TRIVIAL)  # the instance's storage, made once

        cases = [
            (f"orders, {CHANGED:,} rows changed", ORDERS, True),
            (f"range backfill, {days} days", backfill, False),
        ]
        times: dict[tuple[str, str], list[float]] = {}
        for round_ in range(runs):
            for name, target, change in cases:
                for executor, run_env in (("default", env), ("celery", celery)):
                    if change:
                        change_some(
                            f"sqlite:///{data / 'app.db'}",
                            CHANGED,
                            seed=100 * round_ + len(times),
                            status="paid",
                            amount=f"{round_ + 1}.23",
                        )
                    times.setdefault((name, executor), []).append(
                        materialize(run_env, folder, *target)
                    )
            times.setdefault(("trivial asset + check", "default"), []).append(
                materialize(env, folder, *TRIVIAL)
            )
        steps = workers.steps()

        print(
            f"\nwhole `dagster asset materialize` (median of {runs}); ratio: Celery / "
            "default executor of the same case"
        )
        header = (
            f"{'case':<40} | {'default seconds':>15} | {'celery seconds':>14} | "
            f"{'ratio':>6} | runs: default / celery"
        )
        print(header)
        print("-" * len(header))
        for name, _target, _change in cases:
            base = statistics.median(times[(name, "default")])
            over = statistics.median(times[(name, "celery")])
            runs_text = " / ".join(
                " ".join(f"{t:.1f}" for t in times[(name, executor)])
                for executor in ("default", "celery")
            )
            print(
                f"{name:<40} | {base:>15.2f} | {over:>14.2f} | {over / base:>5.2f}x | {runs_text}"
            )
        floor = times[("trivial asset + check", "default")]
        print(
            f"{'trivial asset + check (Dagster floor)':<40} | "
            f"{statistics.median(floor):>15.2f} | {'':>14} | {1:>5.2f}x | "
            f"{' '.join(f'{t:.1f}' for t in floor)}"
        )
        print(
            f"\n{steps} step(s) ran on the workers; the default executor ran each step "
            "in a subprocess of its run"
        )
    finally:
        if workers is not None:
            workers.stop()
        if vhost:
            rabbitmqctl("delete_vhost", vhost)
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
