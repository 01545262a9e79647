"""Shared fixtures: real SQLite files under tmp_path, and real PostgreSQL databases.

PostgreSQL tests get fresh databases made for each test and dropped after it. They skip
only where no server is reachable *and* CI is not set (a laptop), saying so; in CI an
unreachable server fails them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa

from pipeline_assets.cli import main
from pipeline_assets.core.db.engines import make_engine

from .support import database_urls, unavailable

ADMIN_URL = os.environ.get(
    "PIPELINE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
MYSQL_ADMIN_URL = os.environ.get(
    "PIPELINE_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test"
)
NOW = datetime(2026, 1, 27, 6, 0, tzinfo=timezone.utc)  # the fixed clock of every test
ROOT = Path(__file__).resolve().parent.parent
# made by installing and running pytest itself, not by the tests
_TOOLING = {".venv", ".pytest_cache", ".hypothesis", ".ruff_cache", "__pycache__"}


@pytest.fixture(scope="session", autouse=True)
def nothing_written_in_the_checkout():
    """Tests write under tmp_path only: the checkout must look the same afterwards."""
    before = {p.name for p in ROOT.iterdir()}
    yield
    added = {p.name for p in ROOT.iterdir()} - before - _TOOLING
    added = {name for name in added if not name.endswith(".egg-info")}
    assert not added, f"tests wrote into the checkout: {sorted(added)}"


def _reachable(url: str) -> str | None:
    """None when a server answers at ``url``, else why not (the driver missing too)."""
    try:
        engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
        with engine.connect():
            pass
        engine.dispose()
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _admin(url: str, what: str, variable: str):
    """An autocommit engine on the server at ``url``; skips on a laptop, fails in CI."""
    problem = _reachable(url)
    if problem:
        unavailable(
            f"no {what} reachable at {url} ({problem}); set {variable} to run these tests",
            ci_hint=f"CI must run the {what} tests: start the server",
        )
    return sa.create_engine(url, isolation_level="AUTOCOMMIT")


class ServerDatabases:
    """Creates throw-away databases on a server and drops them at the end of the test."""

    CREATE = 'CREATE DATABASE "{}"'
    DROP = 'DROP DATABASE IF EXISTS "{}" WITH (FORCE)'

    def __init__(self, admin: sa.Engine):
        self.admin = admin
        self.names: list[str] = []

    def url(self, label: str) -> str:
        name = f"pa_{label}_{uuid.uuid4().hex[:12]}"
        with self.admin.connect() as conn:
            conn.exec_driver_sql(self.CREATE.format(name))
        self.names.append(name)
        return self.admin.url.set(database=name).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        with self.admin.connect() as conn:
            for name in self.names:
                conn.exec_driver_sql(self.DROP.format(name))


class PostgresDatabases(ServerDatabases):
    pass


class MysqlDatabases(ServerDatabases):
    CREATE = "CREATE DATABASE `{}` CHARACTER SET utf8mb4"
    DROP = "DROP DATABASE IF EXISTS `{}`"


@pytest.fixture(scope="session")
def postgres_admin():
    engine = _admin(ADMIN_URL, "PostgreSQL", "PIPELINE_TEST_POSTGRES_URL")
    yield engine
    engine.dispose()


@pytest.fixture
def postgres(postgres_admin):
    dbs = PostgresDatabases(postgres_admin)
    yield dbs
    dbs.drop_all()


@pytest.fixture(scope="session")
def mysql_admin():
    engine = _admin(MYSQL_ADMIN_URL, "MariaDB or MySQL", "PIPELINE_TEST_MYSQL_URL")
    yield engine
    engine.dispose()


@pytest.fixture
def mysql(mysql_admin):
    dbs = MysqlDatabases(mysql_admin)
    yield dbs
    dbs.drop_all()


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("mariadb", marks=pytest.mark.mysql),
    ]
)
def db_urls(request, tmp_path: Path) -> dict[str, str]:
    """Source and warehouse URLs on one backend: a SQLite file each, fresh PostgreSQL
    databases, or (a source only) a fresh MariaDB database beside a SQLite warehouse."""
    return database_urls(request.param, tmp_path, request)


@pytest.fixture
def instance():
    """An ephemeral Dagster instance, for ``execute_in_process`` and sensor ticks."""
    from dagster import DagsterInstance

    with DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def engines(db_urls):
    """(source engine, warehouse engine) for ``db_urls``, disposed after the test."""
    source = make_engine(db_urls["source"], role="source")
    warehouse = make_engine(db_urls["warehouse"], role="warehouse")
    yield source, warehouse
    source.dispose()
    warehouse.dispose()


# --- the command line, in this process -------------------------------------------------------


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The command line's environment where a call names none: a data folder under tmp_path."""
    return {"PIPELINE_DATA_DIR": str(tmp_path / "data")}


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path: Path, env):
    """``cli(*argv, environ=env, **extra_env)`` → ``(exit code, stdout, stderr)``: ``main``
    in this process on the fixed clock, in ``environ`` plus ``extra_env``, from tmp_path
    (nothing written in the checkout)."""
    monkeypatch.chdir(tmp_path)

    def run(
        *argv: str, environ: Mapping[str, str] | None = None, **extra: str
    ) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(
            list(argv),
            environ={**(env if environ is None else environ), **extra},
            clock=lambda: NOW,
        )
        out, err = capsys.readouterr()
        return code, out, err

    return run


# --- the Celery broker ----------------------------------------------------------------------


@pytest.fixture
def rabbit():
    """A virtual host of this test's own on the local RabbitMQ, deleted after it."""
    from .brokers import RabbitVhost

    vhost = RabbitVhost()
    yield vhost
    vhost.delete()


# --- the two stores of the day files -------------------------------------------------------


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3-compatible server on 127.0.0.1 for the whole session.

    Its endpoint and fake credentials go into this process's environment, the way a
    deployment sets them, so s3fs here and every ``dagster`` subprocess reach it.
    """
    from .stores import S3Server

    server = S3Server(tmp_path_factory.mktemp("moto") / "moto_server.log")
    saved = {name: os.environ.get(name) for name in server.env}
    os.environ.update(server.env)
    yield server
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    server.stop()


@pytest.fixture
def bucket(s3_server) -> str:
    """``s3://<a new empty bucket>`` on the test S3 server."""
    return f"s3://{s3_server.bucket()}"


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def paid_folder(request, tmp_path):
    """The ``paid_orders`` folder on each store: a local ``Path``, or an s3 ``UPath``."""
    if request.param == "local":
        return tmp_path / "paid_orders"
    from upath import UPath

    return UPath(request.getfixturevalue("bucket") + "/paid_orders")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest first: the two stacks' groups (each a chain of whole-stack tests on one
    worker, the suite's longest path), then ``long``, then the other ``e2e`` tests. xdist
    hands out tests in this order, so a run of several minutes started last would leave
    every other worker idle while it ends the suite. The order within each kind is kept."""

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("xdist_group"):
            return 0
        if item.get_closest_marker("long"):
            return 1
        return 2 if item.get_closest_marker("e2e") else 3

    items.sort(key=rank)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under ``--dist loadgroup`` (make test) a test of an ``xdist_group`` carries the
    group in its node id: that is how pytest-xdist sends a group to one worker. Where the
    versions installed lose it (pytest-xdist#1386), the tests that start a whole stack
    would all run at once: each fails instead, saying why."""
    if (
        getattr(item.config.option, "loadgroup", False)  # set on xdist's workers
        and item.get_closest_marker("xdist_group")
        and "@" not in item.nodeid
    ):
        pytest.fail(
            f"pytest-xdist lost this test's xdist_group under pytest {pytest.__version__} "
            "(pytest-xdist#1386): reinstall the pinned versions with make install",
            pytrace=False,
        )
