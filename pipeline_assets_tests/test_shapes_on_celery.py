"""Every table shape on the production stack: Celery workers, PostgreSQL, a bucket.

A user's project declares a table whose days go by another column (``captures``), an
append-only one (``events``) and one without a change stamp (``prices``), each with its
day files in a bucket of the S3-compatible server the tests start. A worker of
``deploy/celery-worker.sh`` serves the project, with a home and a data folder of its
own (nothing reaches it through a shared local disk): the three loads in one run, then
every day file and total of the three over a range in one run, each step a task on
RabbitMQ. ``events`` writes its day files in Parquet, the others in JSON. Afterwards
every committed day in the bucket is in its file set's format and holds exactly the
warehouse's rows, and ``verify`` finds source, warehouse and files in agreement.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from pipeline_assets.core.commands import daily_assets
from pipeline_assets.core.daily_files import describe_days, read_committed_day
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.times import UTC
from pipeline_assets.core.verify import verify

from .brokers import CeleryWorker
from .conftest import NOW
from .support import dg_project
from .table_sources import TableSource, stamp
from .tables import CAPTURES_ATTRIBUTES, EVENTS_ATTRIBUTES, PRICES_ATTRIBUTES
from .worlds import on_celery

DAYS = [f"2026-01-{n:02}" for n in range(2, 8)]
FORMATS = {"events": "parquet"}  # the tables whose day files are not JSON


def in_bucket(attributes: dict, bucket: str) -> dict:
    """The declaration with its daily files in the bucket (and in Parquet, per FORMATS)."""
    files = attributes["daily_files"][0]
    files = {**files, "url": f"{bucket}/{files['name']}"}
    if attributes["table"] in FORMATS:
        files["format"] = FORMATS[attributes["table"]]
    return {**attributes, "daily_files": [files]}


@pytest.mark.e2e
@pytest.mark.postgres
@pytest.mark.s3
@pytest.mark.celery
def test_every_shape_runs_on_celery_workers_with_its_files_in_the_bucket(
    tmp_path, postgres, bucket, rabbit
):
    declared = {
        attributes["table"]: in_bucket(attributes, bucket)
        for attributes in (CAPTURES_ATTRIBUTES, EVENTS_ATTRIBUTES, PRICES_ATTRIBUTES)
    }
    specs = [declare(attributes) for attributes in declared.values()]
    module = dg_project(tmp_path, declared)
    urls = {name: postgres.url(name) for name in ("source", "warehouse", "instance")}
    source = make_engine(urls["source"], role="app")
    warehouse = make_engine(urls["warehouse"], role="warehouse")
    for spec in specs:  # rows 1–6 on January 2nd…7th, all but the third filed
        app = TableSource(source, spec)
        app.create()
        for n in range(1, 7):
            app.put(n, stamp(f"2026-01-{n + 1:02}T10:00"), filed=n != 3)

    env, homes = on_celery(tmp_path, module, urls, rabbit.url)

    def materialize(*select: str, days: list[str] | None = None) -> str:
        argv = [str(Path(sys.executable).parent / "dagster"), "asset", "materialize"]
        argv += ["-m", module, "--select", ",".join(select)]
        if days:
            argv += ["--partition-range", f"{days[0]}...{days[-1]}"]
        done = subprocess.run(
            argv, cwd=tmp_path, env=env | homes["run"], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stderr

    worker = CeleryWorker("w1", env | homes["worker"], tmp_path / "worker.log")
    try:
        worker.start().wait_ready()
        loaded = materialize(*(spec.names.asset for spec in specs))
        built = materialize(*(a for spec in specs for a in daily_assets(spec)), days=DAYS)
    finally:
        worker.stop()
    for spec in specs:
        assert f'Submitting celery task for step "{spec.names.asset}"' in loaded
        assert f'Submitting celery task for step "{spec.daily_files[0].name}"' in built
    # three loads, then three day files and their three totals: every step on the worker
    assert worker.log.read_text(errors="replace").count("succeeded in") == 9

    for spec in specs:
        url, form = spec.daily_files[0].url, FORMATS.get(spec.name, "json")
        assert spec.daily_files[0].format == form
        statuses = describe_days(url, DAYS, expect=form)
        assert {(s.state, s.format) for s in statuses} == {("committed", form)}
        key = spec.primary_key[0]
        days = {day: read_committed_day(url, day) for day in DAYS}
        if form == "parquet":  # a Parquet day reads as a pyarrow.Table
            days = {day: table.to_pylist() for day, table in days.items()}
        filed = {day: [r[key] for r in rows] for day, rows in days.items()}
        assert filed == {day: [] if day == DAYS[2] else [n] for n, day in enumerate(DAYS, 1)}
        report = verify(
            source,
            warehouse,
            url,
            tz=UTC,
            today=NOW.date(),
            partitions_start=date(2026, 1, 1),
            spec=spec,
            require_all=True,
        )
        assert report.ok, report.to_json()
    source.dispose()
    warehouse.dispose()
