"""A year of history (issue 25): what a deployment that has run for a year pays, against a
fresh installation of the same pipeline, measured in the same run.

    .venv/bin/python benchmarks/bench_history.py [--orders 200000] [--batches 100000]
        [--manifests 20000] [--days 365] [--runs 3] [--postgres ADMIN_URL]
        [--workdir DIR] [--quick]

Two installations, each with its own data folder, warehouse, Dagster home and copy of one
source (``--orders`` demo orders over the last ``--days`` days, partitions from the
first of them):

- **fresh**: a first load and one range build of every day (one run: the day files, one
  manifest, a year of daily partitions of ``paid_orders`` and ``daily_revenue``
  materialized in the instance);
- **a year old**: the same, after a year of history was written where a year of use
  leaves it: ``--batches`` batches in the ledger and as many changes in the watermark
  history (every one of them kept: nothing promises less), ``--manifests`` manifests
  in the ``paid_orders`` folder (their days' pointers at the newest), a materialization
  of ``orders`` an hour in the instance (``--days`` × 24, each with its batch id and
  days touched) and as many successful runs of the sensors' requests, tagged as theirs.

Then, on both, in ``--runs`` rounds (the side that goes first alternates), each timed:

1. a whole incremental run through the CLI after the app changed 1,000 orders
   (``dagster asset materialize -m pipeline_assets.definitions --select orders``);
2. a tick of ``new_orders_sensor`` and one of ``paid_orders_refresh_sensor``, in process
   on the installation's instance, each from the cursor a tick before it left (their
   steady state: the refresh sensor's cursor at the newest materialization);
3. ``pipeline-assets verify``;
4. the refresh of one day (``--select paid_orders,daily_revenue --partition D``);
5. ``pipeline-assets watermark history`` (the newest changes; ``--all`` lists them all).

Each line: the median seconds of both and their ratio, old / fresh (target ≤ 1.10×).
``--quick`` (the smoke run): 5,000 orders over 10 days, 300 batches, 100 manifests,
one round. Nothing is written in the checkout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sqlalchemy as sa  # noqa: E402
from common import (  # noqa: E402
    BIN,
    add_postgres_options,
    backend_for,
    change_some,
    postgres_url,
    workdir_for,
)

from pipeline_assets import demo  # noqa: E402
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.db.state import batches, prepare_warehouse, watermark_history
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import canonical  # noqa: E402
from pipeline_assets.core.warehouse.declaration import fingerprint

UTC = timezone.utc
CHANGED = 1_000
SIDES = ("fresh", "old")


def clean_env(**settings: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIPELINE_", "SOURCE_DATABASE", "WAREHOUSE_DATABASE", "DAGSTER_"))
    }
    return env | settings


@contextmanager
def environment(settings: dict[str, str]):
    """This process's environment with ``settings``: the definitions read their URLs from
    it (EnvVar), as a code location's process does."""
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class Installation:
    """One deployment of the pipeline: its folder, settings, databases and instance."""

    def __init__(self, name: str, folder: Path, source: str, warehouse: str, first: date):
        self.name, self.folder = name, folder
        self.data, self.home = folder / "data", folder / "home"
        self.data.mkdir(parents=True)
        self.home.mkdir()
        (self.home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        self.source, self.warehouse = source, warehouse
        self.settings = {
            "PIPELINE_DATA_DIR": str(self.data),
            "SOURCE_DATABASE_URL": source,
            "WAREHOUSE_DATABASE_URL": warehouse,
            "PARTITIONS_START_DATE": first.isoformat(),
            "PIPELINE_AUTOMATION": "off",
        }
        self.env = clean_env(DAGSTER_HOME=str(self.home), **self.settings)

    def run(self, *argv: str, ok: tuple[int, ...] = (0,)) -> float:
        """Seconds of one command of the real CLI, which must exit with one of ``ok``."""
        started = time.perf_counter()
        done = subprocess.run(
            [str(BIN / argv[0]), *argv[1:]],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - started
        if done.returncode not in ok:
            raise SystemExit(f"{self.name}: {' '.join(argv)} failed:\n{done.stderr[-3000:]}")
        return seconds

    def materialize(self, *target: str) -> float:
        return self.run(
            "dagster", "asset", "materialize", "-m", "pipeline_assets.definitions", *target
        )


# --- a year of history ------------------------------------------------------------------


def write_ledger(url: str, count: int, end: datetime) -> None:
    """``count`` batches and watermark changes of ``orders``, one every few minutes up to
    ``end``, as loads leave them (the newest rows written by the real first load after)."""
    engine = make_engine(url, role="warehouse")
    prepare_warehouse(engine, spec=ORDERS)
    step = timedelta(days=365) / max(count, 1)
    fp = fingerprint(ORDERS)
    rows, history = [], []
    for n in range(count):
        at = end - step * (count - n)
        before, after = canonical(at - step), canonical(at)
        batch = "orders-" + hashlib.sha256(str(n).encode()).hexdigest()[:24]
        rows.append(
            {
                "batch_id": batch,
                "kind": "incremental",
                "window_start": canonical(at - timedelta(days=2)),
                "window_end": None,
                "rows_read": 60,
                "inserted": 3,
                "updated": 1,
                "unchanged": 56,
                "watermark_before": before,
                "watermark_after": after,
                "committed_at": after,
                "days_touched": json.dumps([at.date().isoformat()]),
                "table_name": "orders",
                "declaration": fp,
            }
        )
        history.append(
            {
                "changed_at": after,
                "kind": "load",
                "old_value": before,
                "new_value": after,
                "reason": None,
                "batch_id": batch,
                "table_name": "orders",
            }
        )
    with engine.begin() as conn:
        for i in range(0, count, 10_000):
            conn.execute(batches.insert(), rows[i : i + 10_000])
            conn.execute(watermark_history.insert(), history[i : i + 10_000])
    engine.dispose()


def write_manifests(folder: Path, count: int, days: list[str]) -> None:
    """``count`` manifests of old runs in the paid_orders folder, each of one day (the days
    in turn), every day's pointer at its newest, the head done at the last sequence: what
    a run every few minutes for a year leaves (the range build after them writes anew)."""
    from pipeline_assets.core.daily_files import shape_of
    from pipeline_assets.core.daily_files.serialize import dumps

    committed = folder / "_committed"
    committed.mkdir(parents=True)
    shape = shape_of(ORDERS).current
    newest: dict[str, tuple[int, str]] = {}
    for n in range(1, count + 1):
        day = days[n % len(days)]
        run = f"old-{n:06d}"
        sha = hashlib.sha256(f"{day}-{n}".encode()).hexdigest()
        (folder / f"_manifest_{run}.json").write_bytes(
            dumps(
                {
                    "run_id": run,
                    "sequence": n,
                    "days_written": [day],
                    "watermark": None,
                    "written_at": "2026-01-01T00:00:00+00:00",
                    "files": {day: {"rows": 1, "sha256": sha}},
                    "declaration": shape,
                }
            )
        )
        newest[day] = (n, run, sha)
    for day, (n, run, sha) in newest.items():
        (committed / f"{day}.json").write_bytes(
            dumps(
                {
                    "day": day,
                    "manifest": f"_manifest_{run}.json",
                    "run_id": run,
                    "sequence": n,
                    "sha256": sha,
                    "rows": 1,
                }
            )
        )
    (committed / "_head.json").write_bytes(
        dumps({"manifest": None, "sequence": count, "state": "done"})
    )


def write_instance_history(install: Installation, days: list[str]) -> int:
    """A materialization of ``orders`` an hour over ``days`` (batch id, days touched), and
    as many successful runs of the sensors' requests, tagged as theirs (recorded as the
    daemon leaves them, without their plans: the sensors read only status and tags)."""
    import uuid

    from dagster import (
        AssetMaterialization,
        DagsterInstance,
        DagsterRun,
        DagsterRunStatus,
        MetadataValue,
    )

    from pipeline_assets.sensor_runs import RUN_KEY_TAG, SENSOR_TAG

    count = 0
    with DagsterInstance.from_config(str(install.home)) as instance:
        for day in days:
            for hour in range(24):
                count += 1
                instance.report_runless_asset_event(
                    AssetMaterialization(
                        "orders",
                        metadata={
                            "batch_id": f"orders-hist{count:019d}",
                            "days_touched": MetadataValue.json([day]),
                        },
                    )
                )
                job, sensor = (
                    ("orders_job", "new_orders_sensor")
                    if hour % 2
                    else ("daily_files_job", "paid_orders_refresh_sensor")
                )
                instance.add_run(
                    DagsterRun(
                        job_name=job,
                        run_id=str(uuid.uuid4()),
                        status=DagsterRunStatus.SUCCESS,
                        tags={SENSOR_TAG: sensor, RUN_KEY_TAG: f"history-{count}"},
                    )
                )
    return count


def build(install: Installation, days: list[str], args, old: bool) -> None:
    """The installation's first load and range build; a year of history before them."""
    if old:
        end = datetime.combine(date.fromisoformat(days[0]), datetime.min.time(), UTC)
        write_ledger(install.warehouse, args.batches, end)
        write_manifests(install.data / "paid_orders", args.manifests, days)
        write_instance_history(install, days)
    install.materialize("--select", "orders")
    install.materialize(
        "--select", "paid_orders,daily_revenue", "--partition-range", f"{days[0]}...{days[-1]}"
    )


# --- what is measured -------------------------------------------------------------------


def sensor_ticks(install: Installation) -> dict[str, float]:
    """Seconds of a steady-state tick of each sensor (from a cursor a tick before left)."""
    from dagster import AssetKey, AssetRecordsFilter, DagsterInstance, build_sensor_context

    from pipeline_assets.core.sensing import RefreshCursor
    from pipeline_assets.definitions import build_definitions
    from pipeline_assets.settings import from_env

    defs = build_definitions(from_env(install.settings, cwd=install.folder))
    out = {}
    with environment(install.settings), DagsterInstance.from_config(str(install.home)) as instance:
        newest = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey("orders")), limit=1, ascending=False
        ).records[0]
        for name in ("new_orders_sensor", "paid_orders_refresh_sensor"):
            sensor = defs.resolve_sensor_def(name)
            cursor = (
                RefreshCursor(after=newest.storage_id - 1, epoch="1").to_cursor()
                if name == "paid_orders_refresh_sensor"
                else None
            )

            def tick(cursor, sensor=sensor, name=name):
                with build_sensor_context(
                    instance=instance,
                    cursor=cursor,
                    definitions=defs,
                    resources=defs.resources,
                    sensor_name=name,
                ) as context:
                    return sensor.evaluate_tick(context)

            cursor = tick(cursor).cursor  # the tick before: what the daemon left
            started = time.perf_counter()
            tick(cursor)
            out[f"2. tick of {name}"] = time.perf_counter() - started
    return out


def measure(install: Installation, day: str, seed: int) -> dict[str, float]:
    change_some(install.source, CHANGED, seed=seed)
    out = {"1. whole run, 1,000 orders changed": install.materialize("--select", "orders")}
    out |= sensor_ticks(install)
    # 1: the files of the days the load touched are not rebuilt (no sensor runs here)
    out["3. pipeline-assets verify"] = install.run("pipeline-assets", "verify", ok=(0, 1))
    out["4. the refresh of one day"] = install.materialize(
        "--select", "paid_orders,daily_revenue", "--partition", day
    )
    out["5. pipeline-assets watermark history"] = install.run(
        "pipeline-assets", "watermark", "history"
    )
    return out


def copy_source(backend, template: str, label: str, folder: Path) -> str:
    if backend.name == "sqlite":
        target = folder / f"{label}_app.db"
        shutil.copyfile(sa.make_url(template).database, target)
        return f"sqlite:///{target}"
    url = backend.new_url(f"{label}_app")
    name = sa.make_url(url).database
    with backend.admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE "{name}"')
        conn.exec_driver_sql(
            f'CREATE DATABASE "{name}" TEMPLATE "{sa.make_url(template).database}"'
        )
    return url


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=100_000)
    parser.add_argument("--manifests", type=int, default=20_000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--runs", type=int, default=3)
    add_postgres_options(parser, "sources and warehouses")
    parser.add_argument("--quick", action="store_true", help="a small history, one round")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.orders, args.batches, args.manifests, args.days, args.runs = (
            5_000,
            300,
            100,
            10,
            1,
        )
    folder = workdir_for(args, "bench_history_")
    backend = backend_for(folder, postgres_url(args))
    started = time.perf_counter()
    today = datetime.now(UTC).date()  # the CLI's runs read the wall clock: days before it
    first = today - timedelta(days=args.days)
    days = [(first + timedelta(n)).isoformat() for n in range(args.days)]
    print(
        f"bench_history: {args.orders:,} orders over {args.days} days, {args.batches:,} "
        f"batches, {args.manifests:,} manifests, {args.runs} round(s), {backend.name}",
        flush=True,
    )
    try:
        template = backend.new_url("app")
        engine = make_engine(template, role="app")
        demo.init(engine)
        demo.generate(engine, orders=args.orders, days=args.days, start=first, seed=1)
        engine.dispose()
        sides = {}
        for name in SIDES:
            source = copy_source(backend, template, name, folder)
            sides[name] = Installation(
                name, folder / name, source, backend.new_url(f"{name}_warehouse"), first
            )
            t0 = time.perf_counter()
            build(sides[name], days, args, old=name == "old")
            print(f"{name}: built in {time.perf_counter() - t0:.0f}s", flush=True)
        seconds: dict[str, dict[str, list[float]]] = {name: {} for name in SIDES}
        for round_ in range(args.runs):
            for name in SIDES if round_ % 2 == 0 else reversed(SIDES):
                got = measure(sides[name], days[len(days) // 2], seed=10 + round_)
                for case, value in got.items():
                    seconds[name].setdefault(case, []).append(value)
        report(seconds, args)
    finally:
        backend.close()
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.0f}s")
    return 0


def report(seconds: dict, args) -> None:
    print(
        f"\nmedian of {args.runs}; ratio: a year old / fresh (target <= 1.10x)\n"
        f"{'case (seconds)':<46} | {'fresh':>7} | {'old':>7} | {'ratio':>7}"
    )
    print("-" * 76)
    for case in seconds["fresh"]:
        fresh = statistics.median(seconds["fresh"][case])
        old = statistics.median(seconds["old"][case])
        print(f"{case:<46} | {fresh:>7.3f} | {old:>7.3f} | {old / fresh:>6.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
