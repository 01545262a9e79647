"""A read-only source, as docs/deployment.md recommends, works everywhere a URL is read.

The pipeline only reads the source, so every reader must accept a URL that cannot write:
on SQLite a URI filename opened with ``mode=ro`` (``sqlite:///file:/…/app.db?mode=ro&uri=true``),
on PostgreSQL a role with nothing but SELECT on ``orders``. Each case goes through the
sensor (``build_sensor_context`` + ``evaluate_tick`` on a real instance), a real load, and
the CLI's ``plan`` and ``verify``; afterwards the source is exactly as it was.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import uuid
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from dagster import DagsterInstance, build_sensor_context

from pipeline_assets import demo
from pipeline_assets.core.db.engines import make_engine, sqlite_file
from pipeline_assets.core.times import UTC
from pipeline_assets.definitions import build_definitions
from pipeline_assets.settings import from_env
from pipeline_assets_tests.orders import load_orders

from .conftest import NOW

CHAPTER_ROWS = 6


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def read_only_source(request, tmp_path: Path):
    """``(read-only source URL, warehouse URL, snapshot())``: the demo source, then a URL
    that can only read it; ``snapshot()`` returns the source's rows as the plain driver
    sees them. ``read_only_source.app`` writes the source as the app does."""
    if request.param == "sqlite":
        path = tmp_path / "app.db"
        writer = make_engine(f"sqlite:///{path}", role="app")
        demo.init(writer)
        writer.dispose()

        def snapshot():
            with sqlite3.connect(path) as conn:
                return conn.execute("SELECT * FROM orders ORDER BY order_id").fetchall()

        def app(sql: str) -> None:
            with sqlite3.connect(path) as conn:
                conn.execute(sql)

        request.node.app = app
        yield (
            f"sqlite:///file:{path}?mode=ro&uri=true",
            f"sqlite:///{tmp_path / 'warehouse.db'}",
            snapshot,
        )
        return

    dbs = request.getfixturevalue("postgres")
    admin_url = dbs.url("ro_source")
    writer = make_engine(admin_url, role="app")
    demo.init(writer)
    writer.dispose()
    role = f"pa_reader_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
        conn.exec_driver_sql(f'GRANT SELECT ON orders TO "{role}"')  # and nothing else
    reader_url = sa.engine.make_url(admin_url).set(username=role, password=None)

    def snapshot():
        with admin.connect() as conn:
            return conn.exec_driver_sql("SELECT * FROM orders ORDER BY order_id").fetchall()

    def app(sql: str) -> None:
        with admin.connect() as conn:
            conn.exec_driver_sql(sql)

    request.node.app = app

    try:
        yield (reader_url.render_as_string(hide_password=False), dbs.url("ro_warehouse"), snapshot)
    finally:
        with admin.connect() as conn:
            # end the reader's sessions (pooled engines of the sensor's resources)
            conn.exec_driver_sql(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
            )
            conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
            conn.exec_driver_sql(f'DROP ROLE "{role}"')
        admin.dispose()


def test_the_source_url_really_cannot_write(read_only_source):
    source_url, _, snapshot = read_only_source
    engine = make_engine(source_url, role="source")
    try:
        with pytest.raises(sa.exc.DBAPIError):
            with engine.begin() as conn:
                conn.exec_driver_sql("UPDATE orders SET status = 'paid'")
    finally:
        engine.dispose()
    assert len(snapshot()) == CHAPTER_ROWS


def test_sensor_load_plan_and_verify_work_on_a_read_only_source(read_only_source, tmp_path, cli):
    source_url, warehouse_url, snapshot = read_only_source
    before = snapshot()
    env = {
        "PIPELINE_DATA_DIR": str(tmp_path / "data"),
        "SOURCE_DATABASE_URL": source_url,
        "WAREHOUSE_DATABASE_URL": warehouse_url,
    }
    # plain URLs in the definitions (no EnvVar): the test's process environment stays as is
    settings = dataclasses.replace(
        from_env(env, cwd=tmp_path), source_url_from_env=False, warehouse_url_from_env=False
    )
    defs = build_definitions(settings, clock=lambda: NOW)
    sensor = defs.resolve_sensor_def("new_orders_sensor")

    with DagsterInstance.ephemeral() as instance:

        def tick(cursor=None):
            with build_sensor_context(
                instance=instance,
                cursor=cursor,
                definitions=defs,
                resources=defs.resources,
                sensor_name=sensor.name,
            ) as context:
                return sensor.evaluate_tick(context)

        first = tick()
        assert first.skip_message is None, first.skip_message  # never "no source database"
        assert len(first.run_requests) == 1
        assert json.loads(first.cursor)["seen"]["max_id"] == 106

        # the run the daemon launches for the request: the sensor finds it by its run key
        [request] = first.run_requests
        run = defs.resolve_job_def("orders_job").execute_in_process(
            instance=instance,
            tags={
                **request.tags,
                "dagster/sensor_name": sensor.name,
                "dagster/run_key": request.run_key,
            },
        )
        assert run.success
        [materialization] = run.asset_materializations_for_node("orders")
        assert materialization.metadata["inserted"].value == CHAPTER_ROWS

        after_load = tick(first.cursor)
        assert after_load.run_requests == []
        assert "watermark moved on" in after_load.skip_message

    code, out, err = cli("plan", environ=env)
    assert (code, err) == (0, "")
    assert json.loads(out)["rows_read"] == 2  # the lookback window: 105 and 106

    code, out, err = cli("verify", "--json", environ=env)
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["ok"] and report["source_rows"] == report["warehouse_rows"] == CHAPTER_ROWS

    assert snapshot() == before  # read, never written


@pytest.mark.parametrize(
    "url, expected",
    [
        ("sqlite:////srv/app.db", "/srv/app.db"),
        ("sqlite:///data/app.db", "data/app.db"),
        ("sqlite:///file:/srv/app.db?mode=ro&uri=true", "/srv/app.db"),
        ("sqlite:///file:///srv/app.db?mode=ro&uri=true", "/srv/app.db"),
        ("sqlite:///file://localhost/srv/app.db?uri=true", "/srv/app.db"),
        ("sqlite:///file:data/app.db?mode=ro&uri=true", "data/app.db"),
        ("sqlite:///file:/srv/my%2520app.db?mode=ro&uri=true", "/srv/my app.db"),  # SQLite decodes
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite:///file::memory:?uri=true", None),
        ("sqlite:///file:/srv/app.db?mode=memory&uri=true", None),
        ("postgresql+psycopg://u@127.0.0.1/app", None),
    ],
)
def test_the_sqlite_file_of_a_url(url, expected):
    """Every reader of a URL asks this one function (CLI, warehouse setup, the sensor):
    plain paths and SQLite URI filenames alike name the file SQLite opens."""
    assert sqlite_file(url) == (None if expected is None else Path(expected))


def test_a_range_load_deletes_what_a_read_only_source_lost(read_only_source, request):
    """Finding what the source no longer holds is a read like any other (a scan of its
    keys): a role that may only SELECT is enough."""
    source_url, warehouse_url, snapshot = read_only_source
    source = make_engine(source_url, role="source")
    warehouse = make_engine(warehouse_url, role="warehouse")
    try:
        load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
        request.node.app("DELETE FROM orders WHERE order_id = 103")
        done = load_orders(
            source,
            warehouse,
            tz=UTC,
            lookback_days=2,
            now=NOW,
            start=datetime(2026, 1, 1, tzinfo=UTC),
            end=datetime(2026, 2, 1, tzinfo=UTC),
        )
        assert (done.rows_deleted, done.deleted_keys) == (1, (103,))
        assert len(snapshot()) == CHAPTER_ROWS - 1
    finally:
        source.dispose()
        warehouse.dispose()
