"""Errors as types: one ``PipelineError`` family for what a user can fix, caught only at
the edges; database failures classified by the driver's code, in one place.

Why these cases: a user error must stay one actionable line, while a bug must never be
dressed up as one (it keeps its traceback). The database cases are produced by the real
drivers — a SQLite file opened read-only, a lock held by another connection, a PostgreSQL
role without rights, a server that is not there — so the codes are the ones users see.
"""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from pipeline_assets import settings
from pipeline_assets.cli import main
from pipeline_assets.core import daily_files, db, demo, load, money, rows, times, watermark
from pipeline_assets.core.errors import PipelineError
from pipeline_assets.core.verify import VerifyError

from .conftest import NOW


@pytest.mark.parametrize("error", [
    settings.SettingsError, daily_files.DayFilesError, daily_files.UncommittedDayError,
    times.TimeValueError, money.AmountError, demo.DemoError, rows.InvalidRowError,
    watermark.WatermarkError, VerifyError, load.LoadError, db.DatabaseError,
])
def test_every_domain_error_is_a_pipeline_error(error):
    assert issubclass(error, PipelineError)
    assert not issubclass(error, (ValueError, RuntimeError))  # never caught by accident


def test_bad_input_is_not_retried_and_a_database_may_be():
    assert not rows.InvalidRowError(1, "amount", "x", "bad").retryable
    assert not load.LoadError("empty range").retryable
    assert not times.TimeValueError("soon").retryable
    assert db.DatabaseError("cannot reach", kind=db.UNREACHABLE).retryable
    assert db.DatabaseError("locked", kind=db.BUSY).retryable
    assert not db.DatabaseError("read-only", kind=db.READ_ONLY).retryable
    assert not db.DatabaseError("no table 'orders'").retryable  # a setting to fix


# --- the CLI edge -------------------------------------------------------------------------

def _parser(handler) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pipeline-assets")
    parser.set_defaults(handler=handler)
    return parser


def test_a_bug_in_a_handler_surfaces_with_its_traceback(tmp_path, capsys):
    def buggy(args, ctx):
        return {}["no such key"]

    env = {"PIPELINE_DATA_DIR": str(tmp_path / "data")}
    with pytest.raises(KeyError):
        main([], environ=env, clock=lambda: NOW, parser=_parser(buggy))
    assert "error:" not in capsys.readouterr().err  # not dressed up as a user error


def test_a_pipeline_error_in_a_handler_is_one_line_and_exit_1(tmp_path, capsys):
    def refuses(args, ctx):
        raise PipelineError("the thing is broken\nacross lines; fix it like so")

    env = {"PIPELINE_DATA_DIR": str(tmp_path / "data")}
    assert main([], environ=env, clock=lambda: NOW, parser=_parser(refuses)) == 1
    assert capsys.readouterr().err == \
        "pipeline-assets: error: the thing is broken across lines; fix it like so\n"


def test_settings_name_the_variable_they_reject():
    with pytest.raises(settings.SettingsError) as err:
        settings.from_env({"PIPELINE_TIMEZONE": "Mars/Olympus", "PIPELINE_DATA_DIR": "/x"})
    assert str(err.value).startswith("PIPELINE_TIMEZONE: unknown time zone 'Mars/Olympus'")
    with pytest.raises(settings.SettingsError) as err:  # a date that mentions a zone
        settings.from_env({"PARTITIONS_START_DATE": "zone-1", "PIPELINE_DATA_DIR": "/x"})
    assert str(err.value).startswith("PARTITIONS_START_DATE: 'zone-1'")


# --- classifying database failures --------------------------------------------------------

def _fails(engine: sa.Engine, sql: str) -> sa.exc.DBAPIError:
    with pytest.raises(sa.exc.DBAPIError) as err:
        with engine.begin() as conn:
            conn.exec_driver_sql(sql)
    return err.value


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (k INTEGER PRIMARY KEY)")
    engine.dispose()
    return path


def test_sqlite_failures_are_classified_by_result_code(sqlite_file, tmp_path):
    read_only = sa.create_engine(f"sqlite:///file:{sqlite_file}?mode=ro&uri=true")
    assert db.classify(_fails(read_only, "INSERT INTO t VALUES (1)")) == db.READ_ONLY

    holder = sa.create_engine(f"sqlite:///{sqlite_file}", isolation_level="AUTOCOMMIT")
    impatient = sa.create_engine(f"sqlite:///{sqlite_file}", isolation_level="AUTOCOMMIT",
                                 connect_args={"timeout": 0})
    with holder.connect() as conn:
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # holds the write lock
        assert db.classify(_fails(impatient, "BEGIN IMMEDIATE")) == db.BUSY
        conn.exec_driver_sql("ROLLBACK")

    nowhere = sa.create_engine(f"sqlite:///file:{tmp_path / 'no' / 'x.db'}?mode=ro&uri=true")
    assert db.classify(_fails(nowhere, "SELECT 1")) == db.UNREACHABLE

    writable = sa.create_engine(f"sqlite:///{sqlite_file}")
    assert db.classify(_fails(writable, "SELEC 1")) is None  # bad SQL: a bug
    assert db.classify(_fails(writable, "INSERT INTO t VALUES (1), (1)")) is None
    for engine in (read_only, holder, impatient, nowhere, writable):
        engine.dispose()


def test_guard_turns_a_failure_into_one_line_and_lets_a_bug_through(sqlite_file):
    engine = db.make_engine(f"sqlite:///file:{sqlite_file}?mode=ro&uri=true", role="source")
    with pytest.raises(db.DatabaseError) as err:
        with db.guard(engine, "SOURCE_DATABASE_URL"), engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO t VALUES (1)")
    assert err.value.kind == db.READ_ONLY
    assert str(err.value).startswith("the source database at sqlite:///file")
    assert "is read-only (attempt to write a readonly database); nothing was committed" \
        in str(err.value)
    assert "SOURCE_DATABASE_URL" in str(err.value) and "\n" not in str(err.value)

    with pytest.raises(sa.exc.OperationalError):  # a typo in SQL is nobody's setting
        with db.guard(engine, "WAREHOUSE_DATABASE_URL"), engine.connect() as conn:
            conn.exec_driver_sql("SELEC 1")
    with pytest.raises(ZeroDivisionError):
        with db.guard(engine, "WAREHOUSE_DATABASE_URL"):
            1 / 0  # noqa: B018
    engine.dispose()


@pytest.mark.postgres
def test_postgresql_failures_are_classified_by_sqlstate(postgres, postgres_admin):
    url = postgres.url("errors")
    owner = sa.create_engine(url)
    with owner.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (k INTEGER PRIMARY KEY)")
    assert db.classify(_fails(owner, "SET TRANSACTION READ ONLY; INSERT INTO t VALUES (1)")) \
        == db.READ_ONLY
    assert db.classify(_fails(owner, "SELEC 1")) is None
    assert db.classify(_fails(owner, "INSERT INTO t VALUES (1), (1)")) is None

    role = f"pa_errors_{uuid.uuid4().hex[:10]}"
    with postgres_admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
    reader = sa.create_engine(sa.engine.make_url(url).set(username=role))
    try:
        assert db.classify(_fails(reader, "INSERT INTO t VALUES (1)")) == db.NO_PERMISSION
    finally:
        reader.dispose()
        owner.dispose()
        admin_here = sa.create_engine(url, isolation_level="AUTOCOMMIT")
        with admin_here.connect() as conn:
            conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
            conn.exec_driver_sql(f'DROP ROLE "{role}"')
        admin_here.dispose()

    missing = sa.create_engine(sa.engine.make_url(url).set(database=f"pa_none_{role}"))
    nobody = sa.create_engine("postgresql+psycopg://u:s3cret@127.0.0.1:1/x")
    assert db.classify(_fails(missing, "SELECT 1")) == db.UNREACHABLE
    assert db.classify(_fails(nobody, "SELECT 1")) == db.UNREACHABLE
    missing.dispose()
    nobody.dispose()
