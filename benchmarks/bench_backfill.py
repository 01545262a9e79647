"""A year-long range backfill of ``paid_orders`` and ``daily_revenue``, next to plain writes.

    .venv/bin/python benchmarks/bench_backfill.py [--days 365] [--paid-per-day 1000]
        [--repeat 1] [--no-cli] [--workdir DIR] [--quick]
        [--store local|s3] [--paid-orders-url s3://bucket/prefix]

``--store s3`` writes the day files to a bucket instead of a local folder: the bucket of
``--paid-orders-url`` (credentials and endpoint from the AWS_* variables, as in
production) or, without it, a bucket on an S3-compatible server the benchmark starts on
127.0.0.1 (moto's standalone server, from the dev extra). The baseline is then plain
whole-object PUTs of the same payloads.

It builds a warehouse of about ``days × paid-per-day`` paid orders (the demo generator,
70% of its orders paid, into a SQLite source, loaded with ``load_orders``), days from
2025-01-01, then times in the same run:

- the baseline: the same day payloads (``paid_orders_by_day``) each written with a plain
  atomic write (``json.dumps``, temp file, fsync, ``os.replace``) and nothing else;
- its parts and the pipeline's own pieces, called directly: the one query
  (``paid_orders_by_day``), ``serialize_day`` alone, a plain atomic write plus the folder
  fsync, ``write_day_files`` (day files, manifest, pointers), and what ``daily_revenue``
  does (read the committed days, total them, store the totals);
- the real range backfill through Dagster in process: ``daily_files_job`` executed with
  the ``dagster/asset_partition_range_start``/``_end`` tags on an ephemeral instance,
  broken down by step from the run's event log;
- Dagster's own cost of the same range: the same two-asset, single-run, per-day-metadata
  shape with nothing inside (``trivial_backfill_location.py``), in process and through
  the CLI;
- with the CLI (skip with ``--no-cli``): ``dagster asset materialize -m
  pipeline_assets.definitions --select paid_orders,daily_revenue --partition-range A...B``
  in a subprocess, and, for scale, the same subprocess only importing the definitions.

It ends with the target: ours over (Dagster's own + the plain writes), wanted <= 1.2x.

The day files that Dagster wrote are checked byte for byte against ``write_day_files``'s.
Everything is written under a temporary folder (removed) or ``--workdir`` (kept).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import workdir_for  # noqa: E402

from pipeline_assets import demo  # noqa: E402
from pipeline_assets.core.daily_files import (
    open_store,
    read_committed_days,
    serialize_day,
    write_day_files,
)
from pipeline_assets.core.daily_files.views import day_totals, store_totals
from pipeline_assets.core.days import days_between  # noqa: E402
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table import ORDERS  # noqa: E402
from pipeline_assets.core.times import UTC  # noqa: E402
from pipeline_assets_tests.orders import load_orders, paid_orders_by_day

FIRST_DAY = date(2025, 1, 1)  # a past year, so every daily partition of the range exists
NOW = datetime(2026, 2, 1, tzinfo=UTC)
WRITTEN_AT = "2026-02-01T00:00:00+00:00"
PAID_SHARE = 0.70  # demo.STATUSES: 70 of 100 orders are paid

# Milestones of a step in the event log, in the order they happen, and what lies between.
MILESTONES = (
    "STEP_START",
    "LOADED_INPUT",
    "STEP_OUTPUT",
    "ASSET_MATERIALIZATION",
    "HANDLED_OUTPUT",
    "STEP_SUCCESS",
)
SPANS = {
    ("paid_orders", "STEP_START", "STEP_OUTPUT"): "the asset: query + per-day metadata",
    ("paid_orders", "STEP_OUTPUT", "ASSET_MATERIALIZATION"): "IO manager: files + manifest",
    ("paid_orders", "ASSET_MATERIALIZATION", "HANDLED_OUTPUT"): "materialization events",
    ("daily_revenue", "STEP_START", "LOADED_INPUT"): "IO manager: read committed days",
    ("daily_revenue", "LOADED_INPUT", "STEP_OUTPUT"): "the asset: totals + store",
    ("daily_revenue", "ASSET_MATERIALIZATION", "STEP_SUCCESS"): "materialization events",
}
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def plain_atomic_write(final: Path, data: bytes, *, fsync_folder: bool = False) -> None:
    """Temp file beside ``final``, write, fsync, rename: nothing else."""
    temp = final.with_name(f".{final.name}.tmp")
    with open(temp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, final)
    if fsync_folder:
        fd = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def timed(fn, repeat: int) -> float:
    """Best of ``repeat`` calls, in seconds."""
    best = None
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        fn()
        seconds = time.perf_counter() - started
        best = seconds if best is None else min(best, seconds)
    return best


def build_warehouse(data_dir: Path, days: int, paid_per_day: int) -> dict:
    """The demo source and the warehouse loaded from it, under ``data_dir``."""
    n = round(days * paid_per_day / PAID_SHARE)
    source = make_engine(f"sqlite:///{data_dir / 'app.db'}", role="app")
    warehouse = make_engine(f"sqlite:///{data_dir / 'warehouse.db'}", role="warehouse")
    try:
        demo.init(source)
        demo.generate(source, orders=n, days=days, start=FIRST_DAY, seed=1)
        result = load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    finally:
        source.dispose()
        warehouse.dispose()
    return {"orders": n, "loaded": result.inserted}


def dagster_breakdown(instance, run_id: str) -> list[tuple[str, float]]:
    """Seconds between the milestones of each step, from the run's event log."""
    first: dict[tuple[str, str], float] = {}
    stamps = []
    for entry in instance.all_logs(run_id):
        stamps.append(entry.timestamp)
        event = entry.dagster_event
        if event is not None and entry.step_key and event.event_type_value in MILESTONES:
            first.setdefault((entry.step_key, event.event_type_value), entry.timestamp)
    out = [
        (
            "run: first event -> first step (plan, resources)",
            first[("paid_orders", "STEP_START")] - min(stamps),
        )
    ]
    for step in ("paid_orders", "daily_revenue"):
        marks = [(kind, first[(step, kind)]) for kind in MILESTONES if (step, kind) in first]
        for (a, t_a), (b, t_b) in zip(marks, marks[1:], strict=False):
            what = SPANS.get((step, a, b), f"{a.lower()} -> {b.lower()}")
            out.append((f"{step}: {what}", t_b - t_a))
    out.append(
        ("run: last step -> last event", max(stamps) - first[("daily_revenue", "STEP_SUCCESS")])
    )
    return out


def run_dagster(
    data_dir: Path,
    first: str,
    last: str,
    url: str | None = None,
) -> tuple[float, float, list]:
    """(definitions seconds, run seconds, breakdown) of one in-process range backfill."""
    from pipeline_assets.definitions import build_definitions
    from pipeline_assets.settings import from_env

    started = time.perf_counter()
    settings = from_env(_pipeline_env(data_dir, url))
    job = build_definitions(settings).resolve_job_def("daily_files_job")
    built = time.perf_counter() - started
    with range_run(job, first, last, "the in-process backfill") as (instance, result, ran):
        return built, ran, dagster_breakdown(instance, result.run_id)


@contextmanager
def range_run(job, first: str, last: str, what: str):
    """Run ``job`` in process over the days ``first``...``last`` on an ephemeral instance;
    yield (instance, result, seconds) while the instance is open."""
    from dagster import DagsterInstance

    with DagsterInstance.ephemeral() as instance:
        started = time.perf_counter()
        result = job.execute_in_process(
            instance=instance,
            run_config=QUIET,
            tags={
                "dagster/asset_partition_range_start": first,
                "dagster/asset_partition_range_end": last,
            },
        )
        ran = time.perf_counter() - started
        if not result.success:
            raise SystemExit(f"{what} failed")
        yield instance, result, ran


def run_trivial(first: str, last: str) -> float:
    """Seconds of Dagster's own in-process run of the same range: the same two-asset,
    single-run shape with nothing inside (``trivial_backfill_location.py``)."""
    from dagster import AssetSelection, Definitions, define_asset_job

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import trivial_backfill_location as trivial

    job = Definitions(
        assets=trivial.defs.assets,
        jobs=[define_asset_job("trivial_days_job", selection=AssetSelection.all())],
    ).resolve_job_def("trivial_days_job")
    with range_run(job, first, last, "the trivial in-process backfill") as (_, _, ran):
        return ran


def _pipeline_env(data_dir: Path, url: str | None = None) -> dict[str, str]:
    env = {
        "PIPELINE_DATA_DIR": str(data_dir),
        "PARTITIONS_START_DATE": FIRST_DAY.isoformat(),
        "PIPELINE_TIMEZONE": "UTC",
        "PIPELINE_AUTOMATION": "off",
    }
    if url:
        env["PAID_ORDERS_URL"] = url
    return env


def run_cli(
    workdir: Path,
    data_dir: Path,
    first: str,
    last: str,
    url: str | None = None,
) -> tuple[float, float, float]:
    """(materialize seconds, import-only seconds, Dagster's own seconds) of the real CLI in
    a subprocess: the pipeline's range, then the trivial location's same range."""
    home = workdir / "dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = dict(os.environ, DAGSTER_HOME=str(home), **_pipeline_env(data_dir, url))
    dagster = Path(sys.executable).with_name("dagster")
    dagster = str(dagster if dagster.exists() else shutil.which("dagster") or "dagster")
    seconds = []
    for target, select in (
        (["-m", "pipeline_assets.definitions"], "paid_orders,daily_revenue"),
        (
            ["-f", str(Path(__file__).with_name("trivial_backfill_location.py"))],
            "trivial_days,trivial_days_total",
        ),
    ):
        command = [
            dagster,
            "asset",
            "materialize",
            *target,
            "--select",
            select,
            "--partition-range",
            f"{first}...{last}",
        ]
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
        seconds.append(time.perf_counter() - started)
        if proc.returncode != 0:
            raise SystemExit(f"the CLI backfill ({select}) failed:\n{proc.stderr[-3000:]}")
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import pipeline_assets.definitions"],
        cwd=workdir,
        env=env,
        check=True,
    )
    imported = time.perf_counter() - started
    return seconds[0], imported, seconds[1]


def start_s3_server(workdir: Path):
    """A moto S3 server on 127.0.0.1 and a new bucket on it; its AWS_* variables set here."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from pipeline_assets_tests.stores import S3Server

    server = S3Server(workdir / "moto_server.log")
    os.environ.update(server.env)  # for s3fs here and the dagster CLI subprocess
    return server, f"s3://{server.bucket()}/paid_orders"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=365, help="days in the range (%(default)s)")
    parser.add_argument(
        "--paid-per-day",
        type=int,
        default=1000,
        help="paid orders per day, on average (%(default)s)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="best of this many runs of each in-process measurement",
    )
    parser.add_argument("--no-cli", action="store_true", help="skip the dagster CLI run")
    parser.add_argument(
        "--quick", action="store_true", help="10 days of 50 paid orders, no CLI: a smoke run"
    )
    parser.add_argument(
        "--workdir", type=Path, help="write here and keep it (default: a temporary folder, removed)"
    )
    parser.add_argument(
        "--store",
        choices=("local", "s3"),
        default="local",
        help="where the day files go (%(default)s)",
    )
    parser.add_argument(
        "--paid-orders-url",
        help="with --store s3: an existing s3://bucket/prefix (default: a "
        "bucket on a moto server started here)",
    )
    args = parser.parse_args(argv)
    days, per_day, with_cli = args.days, args.paid_per_day, not args.no_cli
    if args.quick:
        days, per_day, with_cli = 10, 50, False
    workdir = workdir_for(args, "bench_backfill_")
    data_dir = workdir / "data"
    data_dir.mkdir()
    server, url = None, None
    if args.store == "s3":
        url = (args.paid_orders_url or "").rstrip("/")
        if not url:
            server, url = start_s3_server(workdir)
    print(
        f"bench_backfill: {days} days, ~{per_day:,} paid orders a day, workdir {workdir}, "
        f"store {url or 'local folder'}, python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cpu",
        flush=True,
    )
    total = time.perf_counter()
    try:
        started = time.perf_counter()
        built = build_warehouse(data_dir, days, per_day)
        print(
            f"generated {built['orders']:,} orders and loaded {built['loaded']:,} in "
            f"{time.perf_counter() - started:.1f}s",
            flush=True,
        )
        day_list = days_between(FIRST_DAY, FIRST_DAY + timedelta(days=days - 1))
        first, last = day_list[0], day_list[-1]
        warehouse = make_engine(f"sqlite:///{data_dir / 'warehouse.db'}", role="warehouse")
        by_day: dict = {}

        def query():
            by_day.clear()
            by_day.update(paid_orders_by_day(warehouse, day_list, UTC))

        rows: dict[str, float] = {}
        rows["query: paid_orders_by_day (one query)"] = timed(query, args.repeat)
        paid = sum(map(len, by_day.values()))
        plain_dir, folder_dir, core_dir = (
            workdir / name for name in ("plain", "plain_fsync_folder", "core")
        )
        plain_dir.mkdir()
        folder_dir.mkdir()
        if url:  # every run writes to its own prefix of the bucket
            core_dir = f"{url}/core"

        def plain(folder: Path, fsync_folder: bool):
            def write():
                for day in day_list:
                    plain_atomic_write(
                        folder / f"{day}.json",
                        json.dumps(by_day[day]).encode(),
                        fsync_folder=fsync_folder,
                    )

            return write

        serial = [0]

        def core_write():
            serial[0] += 1
            write_day_files(
                core_dir, by_day, run_id=f"bench-{serial[0]}", written_at=WRITTEN_AT, spec=ORDERS
            )

        def revenue():
            read = read_committed_days(core_dir, day_list)
            totals = ORDERS.daily_files[0].totals
            per_day = {day: day_totals(r, totals, ORDERS) for day, r in read.items()}
            store_totals(warehouse, ORDERS, totals, per_day)

        if url:
            bucket = open_store(f"{url}/plain")

            def plain_puts():
                for day in day_list:
                    bucket.write(f"{day}.json", json.dumps(by_day[day]).encode())

            baseline = "plain whole-object PUTs (baseline)"
            rows[baseline] = timed(plain_puts, args.repeat)
        else:
            baseline = "plain atomic writes (baseline)"
            rows[baseline] = timed(plain(plain_dir, False), args.repeat)
            rows["plain atomic writes + folder fsync"] = timed(plain(folder_dir, True), args.repeat)
        rows["serialize_day only (no I/O)"] = timed(
            lambda: [serialize_day(day, by_day[day], spec=ORDERS) for day in day_list], args.repeat
        )
        rows["write_day_files (files, manifest, pointers)"] = timed(core_write, args.repeat)
        rows["daily_revenue's work (read committed, store)"] = timed(revenue, args.repeat)
        rows["query + write_day_files + daily_revenue's work"] = (
            rows["query: paid_orders_by_day (one query)"]
            + rows["write_day_files (files, manifest, pointers)"]
            + rows["daily_revenue's work (read committed, store)"]
        )
        warehouse.dispose()
        print("core measured; running the backfill through Dagster", flush=True)

        best = None
        for _ in range(args.repeat):
            run = run_dagster(data_dir, first, last, url and f"{url}/dagster")
            best = run if best is None or run[1] < best[1] else best
        defs_seconds, run_seconds, breakdown = best
        trivial = min(run_trivial(first, last) for _ in range(args.repeat))
        rows["Dagster in process: build_definitions"] = defs_seconds
        rows["Dagster in process: execute_in_process"] = run_seconds
        for name, seconds in breakdown:
            rows[f"  {name}"] = seconds
        rows["  outside the event log (job plan, instance)"] = run_seconds - sum(
            s for _, s in breakdown
        )
        rows["Dagster's own: the same range, trivial assets, in process"] = trivial
        dagster_files = open_store(f"{url}/dagster" if url else data_dir / "paid_orders")
        core_files = open_store(core_dir)
        for day in day_list:  # the same payloads, byte for byte
            if dagster_files.read(f"{day}.json") != core_files.read(f"{day}.json"):
                raise SystemExit(f"{day}: Dagster's file differs from write_day_files'")
        if with_cli:
            print("running the backfill through the dagster CLI", flush=True)
            cli, imported, trivial_cli = run_cli(
                workdir, data_dir, first, last, url and f"{url}/cli"
            )
            rows["CLI: dagster asset materialize --partition-range"] = cli
            rows["CLI: python -c 'import pipeline_assets.definitions'"] = imported
            rows["CLI: Dagster's own, the same range, trivial assets"] = trivial_cli

        floor = rows[baseline]
        print(
            f"\n{days} days {first}...{last}, {paid:,} paid orders "
            f"({paid / days:,.0f} a day); ratio: seconds / {baseline}"
        )
        header = f"{'case':<54} | {'seconds':>8} | {'ratio':>7} | {'ms/day':>7}"
        print(header)
        print("-" * len(header))
        for name, seconds in rows.items():
            print(
                f"{name:<54} | {seconds:>8.2f} | {seconds / floor:>6.1f}x | "
                f"{seconds / days * 1000:>7.1f}"
            )
        # The target: one run, within 1.2x of Dagster's own cost for the same range plus
        # the plain writes of the same files.
        print("\ntargets; ratio: measured / wanted")
        header = f"{'target':<62} | {'wanted':>7} | {'measured':>8} | met"
        print(header)
        print("-" * len(header))
        own = [("in process", run_seconds, trivial)]
        if with_cli:
            own.append(("through the CLI", cli, trivial_cli))
        for how, ours, theirs in own:
            ratio = ours / (theirs + floor)
            print(
                f"{'365-day range ' if days == 365 else f'{days}-day range '}"
                f"{how}: ours / (Dagster's own + plain writes)".ljust(62)
                + f" | {'<= 1.2x':>7} | {ratio:>7.2f}x | {'yes' if ratio <= 1.2 else 'NO'}"
            )
    finally:
        if server is not None:
            server.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - total:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
