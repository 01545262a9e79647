"""Errors as types: one ``PipelineError`` family for what a user can fix, caught only at
the edges; database failures classified by the driver's code, in one place.

Why these cases: a user error must stay one actionable line, while a bug must never be
dressed up as one (it keeps its traceback). The database cases are produced by the real
drivers — a SQLite file opened read-only, a lock held by another connection, a PostgreSQL
role without rights, a server that is not there — so the codes are the ones users see.
"""

from __future__ import annotations

import argparse
import ast
import errno
import importlib.util
import os
import pkgutil
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from dagster import (
    DagsterEventType,
    DailyPartitionsDefinition,
    RetryPolicy,
    asset,
    materialize,
)

import pipeline_assets
from pipeline_assets import demo, io_manager, settings
from pipeline_assets.cli import main
from pipeline_assets.core import daily_files, errors, failures, times
from pipeline_assets.core.db import engines as db
from pipeline_assets.core.errors import PipelineError
from pipeline_assets.core.load import batch as load
from pipeline_assets.core.load import deletions
from pipeline_assets.core.table import ORDERS, money, types
from pipeline_assets.core.table import declare as spec
from pipeline_assets.core.table.codecs import plain
from pipeline_assets.core.verify import VerifyError
from pipeline_assets.core.warehouse import watermark

from .conftest import NOW


@pytest.mark.parametrize(
    "error",
    [
        settings.SettingsError,
        daily_files.DayFilesError,
        daily_files.UncommittedDayError,
        times.TimeValueError,
        money.AmountError,
        demo.DemoError,
        errors.InvalidRowError,
        watermark.WatermarkError,
        VerifyError,
        load.LoadError,
        errors.DatabaseError,
    ],
)
def test_every_domain_error_is_a_pipeline_error(error):
    assert issubclass(error, PipelineError)
    assert not issubclass(error, (ValueError, RuntimeError))  # never caught by accident


def test_bad_input_is_not_retried_and_a_database_may_be():
    assert not errors.InvalidRowError("order 1", "amount", "x", "bad").retryable
    assert not load.LoadError("empty range").retryable
    assert not times.TimeValueError("soon").retryable
    assert errors.DatabaseError("cannot reach", kind=failures.UNREACHABLE).retryable
    assert errors.DatabaseError("locked", kind=failures.BUSY).retryable
    assert not errors.DatabaseError("read-only", kind=failures.READ_ONLY).retryable
    assert not errors.DatabaseError("no table 'orders'").retryable  # a setting to fix


_START, _END = datetime(2026, 1, 24, tzinfo=UTC), datetime(2026, 1, 25, tzinfo=UTC)


@pytest.mark.parametrize(
    "error, retryable",
    [
        # terminal: running again unchanged fails the same way
        (PipelineError("a new error type"), False),  # terminal unless classified transient
        (errors.SettingsError("PIPELINE_TIMEZONE: unknown time zone"), False),
        (errors.CommandError("--orders must be 1 or more"), False),
        (errors.TimeValueError("'soon' is not ISO-8601"), False),
        (errors.AmountError("'12.3.4' is not a decimal number"), False),
        (errors.InvalidRowError("order 187", "amount", "12.3.4", "not a decimal"), False),
        (errors.DemoError("--history-days -1 must be 0 or more"), False),
        (errors.TypeValueError("'x' is not an integer"), False),
        (errors.UnknownTypeError("money", "not a type"), False),
        (errors.DeclarationError("primary_key", "id", "is not a declared column"), False),
        (errors.LocationError("cannot import the code location 'nowhere'"), False),
        (errors.LoadError("the range is empty"), False),
        (errors.DeleteRefused(3, 4, _START, _END, 0.5), False),
        (errors.WatermarkError("a rewind needs a --reason"), False),
        (errors.VerifyError("cannot verify: the source's order 187 ..."), False),
        (errors.DayFilesError("'2026-13-01' is not a valid calendar day"), False),
        (
            errors.UncommittedDayError(
                {"2026-01-25": "the file is missing"}, name="paid_orders", rebuild=str
            ),
            False,
        ),
        (errors.DatabaseError("is read-only", kind=failures.READ_ONLY), False),
        (errors.DatabaseError("refused the pipeline's role", kind=failures.NO_PERMISSION), False),
        (errors.DatabaseError("has no table orders"), False),  # the pipeline's own finding
        # transient: may pass by itself
        (errors.DatabaseError("cannot reach", kind=failures.UNREACHABLE), True),
        (errors.DatabaseError("is busy", kind=failures.BUSY), True),
        (errors.DatabaseError("is full", kind=failures.FULL), True),
        (errors.BrokerUnreachable("the Celery broker did not answer"), True),
        (errors.StoreUnavailable("could not write 2026-01-25.json: TimeoutError"), True),
    ],
    ids=lambda case: (
        f"{type(case).__name__}-{getattr(case, 'kind', None) or ''}".strip("-")
        if isinstance(case, Exception)
        else str(case)
    ),
)
def test_only_the_errors_classified_transient_are_retried(error, retryable):
    """The table of retries (``retryable`` becomes ``Failure(allow_retries=...)``).

    A terminal error retried costs the RetryPolicy's retries (2 x 5 s) and, worse, says
    "try again" about something only a person can fix: a watermark rule, a verify that
    could not compare, a day to rebuild. A transient error taken for terminal fails a
    run a retry would have finished. So the default is terminal, and only what may pass
    by itself (a database unreachable, busy or full; a broker or a store that did not
    answer) is transient.
    """
    assert error.retryable is retryable
    assert isinstance(error, PipelineError)


# Entry points: importing them reads the environment or makes an app; they define no class.
_ENTRY_POINTS = {
    "pipeline_assets.__main__",
    "pipeline_assets.celery_worker",
    "pipeline_assets.definitions",
}


def _subclasses(cls: type) -> set[type]:
    return {sub for direct in cls.__subclasses__() for sub in {direct, *_subclasses(direct)}}


def test_every_pipeline_error_is_defined_in_the_errors_module():
    """One module of error types (as dlt keeps them): the rule of retries is read, and
    changed, in one place, and an error defined beside the code that raises it cannot
    quietly take the default. The old modules only re-export them."""
    for module in pkgutil.walk_packages(pipeline_assets.__path__, "pipeline_assets."):
        if module.name in _ENTRY_POINTS:
            origin = importlib.util.find_spec(module.name).origin
            tree = ast.parse(Path(origin).read_text())
            assert not any(isinstance(n, ast.ClassDef) for n in ast.walk(tree)), module.name
        else:
            importlib.import_module(module.name)
    found = {
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _subclasses(PipelineError)
        if cls.__module__.startswith("pipeline_assets.")
    }
    assert len(found) > 10
    elsewhere = {name for name in found if not name.startswith("pipeline_assets.core.errors.")}
    assert not elsewhere
    # the modules that raise them, and the faces readers import them from, name the same
    # classes (no module keeps a list of them under old names)
    assert daily_files.DayFilesError is errors.DayFilesError
    assert daily_files.UncommittedDayError is errors.UncommittedDayError
    assert (settings.SettingsError, load.LoadError, deletions.DeleteRefused, VerifyError) == (
        errors.SettingsError,
        errors.LoadError,
        errors.DeleteRefused,
        errors.VerifyError,
    )
    assert (plain.TypeValueError, types.UnknownTypeError, spec.DeclarationError) == (
        errors.TypeValueError,
        errors.UnknownTypeError,
        errors.DeclarationError,
    )


# --- the file stores: a store that did not answer is transient ------------------------------


def test_an_object_store_that_did_not_answer_is_transient(monkeypatch):
    """The SDK's error decides: a bucket that does not exist or refuses the credentials
    needs a fix; a timeout, a connection cut or throttling passes."""
    store = daily_files.open_store(f"memory://pa-errors-{uuid.uuid4().hex[:8]}/paid")
    for raised, expected in [
        (TimeoutError("timed out"), errors.StoreUnavailable),
        (ConnectionResetError("reset by peer"), errors.StoreUnavailable),
        (OSError(errno.EBUSY, "SlowDown"), errors.StoreUnavailable),
        (PermissionError("AccessDenied"), errors.DayFilesError),
        (FileNotFoundError("NoSuchBucket"), errors.DayFilesError),
    ]:

        def fails(*args, _exc=raised, **kwargs):
            raise _exc

        monkeypatch.setattr(store.fs, "pipe_file", fails)
        with pytest.raises(errors.DayFilesError) as err:
            store.write("2026-01-25.json", b"[]\n")
        assert type(err.value) is expected, raised
        assert str(err.value).startswith("could not write 2026-01-25.json in memory://")


def test_a_full_disk_is_transient_and_a_read_only_folder_is_not(tmp_path, monkeypatch):
    store = daily_files.LocalStore(tmp_path)
    for code, expected in [
        (errno.ENOSPC, errors.StoreUnavailable),
        (errno.EACCES, errors.DayFilesError),
    ]:

        def fails(fd, _code=code):
            raise OSError(_code, os.strerror(_code))

        monkeypatch.setattr(os, "fsync", fails)
        with pytest.raises(errors.DayFilesError) as err:
            store.write("2026-01-25.json", b"[]\n")
        monkeypatch.undo()
        assert type(err.value) is expected, code
        assert "The previous version, if any, is untouched" in str(err.value)
    assert list(tmp_path.iterdir()) == []  # no temp file left behind


_DAILY = DailyPartitionsDefinition(start_date="2026-01-01")


@asset(
    partitions_def=_DAILY,
    io_manager_key="daily_files",
    retry_policy=RetryPolicy(max_retries=1, delay=0),
)
def paid_orders(context):
    """Test stand-in with a RetryPolicy; each test makes its write fail."""
    return {day: [] for day in context.partition_keys}


def _retries(tmp_path, instance) -> int:
    result = materialize(
        [paid_orders],
        instance=instance,
        partition_key="2026-01-25",
        resources={"daily_files": io_manager.DailyFilesIOManager(base_dir=str(tmp_path))},
        raise_on_error=False,
    )
    assert not result.success
    return sum(e.event_type == DagsterEventType.STEP_UP_FOR_RETRY for e in result.all_events)


def test_the_io_manager_retries_only_a_transient_error(tmp_path, instance, monkeypatch):
    """Dagster's RetryPolicy retries whatever an IO manager raises, except a Failure that
    forbids it: so the IO manager turns each PipelineError into one, by its class."""

    def unreachable(*args, **kwargs):
        raise errors.StoreUnavailable("could not write 2026-01-25.json: TimeoutError")

    def outside(*args, **kwargs):
        raise errors.DayFilesError("returned days ['2026-02-01'] outside this run's")

    monkeypatch.setattr(io_manager, "write_day_files", unreachable)
    assert _retries(tmp_path, instance) == 1
    monkeypatch.setattr(io_manager, "write_day_files", outside)
    assert _retries(tmp_path, instance) == 0


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
    assert (
        capsys.readouterr().err
        == "pipeline-assets: error: the thing is broken across lines; fix it like so\n"
    )


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
    assert failures.classify(_fails(read_only, "INSERT INTO t VALUES (1)")) == failures.READ_ONLY

    holder = sa.create_engine(f"sqlite:///{sqlite_file}", isolation_level="AUTOCOMMIT")
    impatient = sa.create_engine(
        f"sqlite:///{sqlite_file}", isolation_level="AUTOCOMMIT", connect_args={"timeout": 0}
    )
    with holder.connect() as conn:
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # holds the write lock
        assert failures.classify(_fails(impatient, "BEGIN IMMEDIATE")) == failures.BUSY
        conn.exec_driver_sql("ROLLBACK")

    nowhere = sa.create_engine(f"sqlite:///file:{tmp_path / 'no' / 'x.db'}?mode=ro&uri=true")
    assert failures.classify(_fails(nowhere, "SELECT 1")) == failures.UNREACHABLE

    writable = sa.create_engine(f"sqlite:///{sqlite_file}")
    assert failures.classify(_fails(writable, "SELEC 1")) is None  # bad SQL: a bug
    assert failures.classify(_fails(writable, "INSERT INTO t VALUES (1), (1)")) is None
    for engine in (read_only, holder, impatient, nowhere, writable):
        engine.dispose()


def test_guard_turns_a_failure_into_one_line_and_lets_a_bug_through(sqlite_file):
    engine = db.make_engine(f"sqlite:///file:{sqlite_file}?mode=ro&uri=true", role="source")
    with pytest.raises(errors.DatabaseError) as err:
        with db.guard(engine, "SOURCE_DATABASE_URL"), engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO t VALUES (1)")
    assert err.value.kind == failures.READ_ONLY
    assert str(err.value).startswith("the source database at sqlite:///file")
    assert "is read-only (attempt to write a readonly database); nothing was committed" in str(
        err.value
    )
    assert "SOURCE_DATABASE_URL" in str(err.value) and "\n" not in str(err.value)

    with pytest.raises(sa.exc.OperationalError):  # a typo in SQL is nobody's setting
        with db.guard(engine, "WAREHOUSE_DATABASE_URL"), engine.connect() as conn:
            conn.exec_driver_sql("SELEC 1")
    with pytest.raises(ZeroDivisionError):
        with db.guard(engine, "WAREHOUSE_DATABASE_URL"):
            1 / 0  # noqa: B018
    engine.dispose()


def test_one_database_as_source_and_warehouse_is_refused_before_anything_is_written(tmp_path):
    url = f"sqlite:///{tmp_path / 'app.db'}"
    app = db.make_engine(url, role="app")
    demo.init(app)
    with pytest.raises(errors.DatabaseError, match="only read and the warehouse is written"):
        load.load_table(
            db.make_engine(url, role="source"),
            db.make_engine(url, role="warehouse"),
            spec=ORDERS,
            tz=times.UTC,
            lookback_days=2,
            now=NOW,
        )
    assert sa.inspect(app).get_table_names() == ["orders"]  # no state table was made


@pytest.mark.postgres
def test_postgresql_failures_are_classified_by_sqlstate(postgres, postgres_admin):
    url = postgres.url("errors")
    owner = sa.create_engine(url)
    with owner.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (k INTEGER PRIMARY KEY)")
    assert (
        failures.classify(_fails(owner, "SET TRANSACTION READ ONLY; INSERT INTO t VALUES (1)"))
        == failures.READ_ONLY
    )
    assert failures.classify(_fails(owner, "SELEC 1")) is None
    assert failures.classify(_fails(owner, "INSERT INTO t VALUES (1), (1)")) is None

    role = f"pa_errors_{uuid.uuid4().hex[:10]}"
    with postgres_admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
    reader = sa.create_engine(sa.engine.make_url(url).set(username=role))
    try:
        refused = _fails(reader, "INSERT INTO t VALUES (1)")
        assert failures.classify(refused) == failures.NO_PERMISSION
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
    assert failures.classify(_fails(missing, "SELECT 1")) == failures.UNREACHABLE
    assert failures.classify(_fails(nobody, "SELECT 1")) == failures.UNREACHABLE
    missing.dispose()
    nobody.dispose()
