"""The app database where shops keep it: the source on a real MariaDB server.

Every test gets a fresh database on the server of ``PIPELINE_TEST_MYSQL_URL`` (default
``mysql+pymysql://root@127.0.0.1:3306/test``), dropped after it. The warehouse is SQLite,
and once PostgreSQL: MySQL and MariaDB are sources only. Covered: the chapter's story
through Dagster with the check and ``verify``; native columns (INT, DECIMAL, DATETIME,
TIMESTAMP, DATE) read by the contract's rules, whatever zone the app's session wrote in;
text columns; rows the contract refuses, with the same message as elsewhere; the errors of
an unreachable server, a wrong password, a missing table or column and a user without
SELECT; a user that may only SELECT; and the new-orders sensor's question.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from pipeline_assets import demo
from pipeline_assets.cli import main
from pipeline_assets.core import sensing
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.errors import DatabaseError, InvalidRowError
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC
from pipeline_assets.core.verify import verify
from pipeline_assets.definitions import build_definitions
from pipeline_assets.settings import from_env
from pipeline_assets_tests.orders import load_orders, stored, validate

from . import plain
from .conftest import NOW
from .plain import warehouse_rows

pytestmark = pytest.mark.mysql
JANUARY = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC))


def app(url: str, *statements: str, zone: str = "+00:00") -> None:
    """What the app does, in its own session (its own time zone), with the plain driver."""
    import pymysql

    parsed = sa.engine.make_url(url)
    with pymysql.connect(
        host=parsed.host,
        port=parsed.port or 3306,
        user=parsed.username,
        password=parsed.password or "",
        database=parsed.database,
        init_command=f"SET time_zone = '{zone}'",
        autocommit=True,
    ) as conn:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)


@pytest.mark.parametrize(
    "warehouse_backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_the_story_with_the_app_on_mariadb(
    mysql, warehouse_backend, tmp_path, instance, capsys, request
):
    source_url = mysql.url("app")
    warehouse_url = (
        f"sqlite:///{tmp_path / 'warehouse.db'}"
        if warehouse_backend == "sqlite"
        else request.getfixturevalue("postgres").url("warehouse")
    )
    source = make_engine(source_url, role="app")
    demo.init(source)
    env = {
        "PIPELINE_DATA_DIR": str(tmp_path / "data"),
        "SOURCE_DATABASE_URL": source_url,
        "WAREHOUSE_DATABASE_URL": warehouse_url,
    }
    settings = from_env(env, cwd=tmp_path)
    settings = dataclasses.replace(
        settings, source_url_from_env=False, warehouse_url_from_env=False
    )
    job = build_definitions(settings, clock=lambda: NOW).resolve_job_def("orders_job")

    def run():
        result = job.execute_in_process(instance=instance)
        assert result.success
        [check] = [
            c for c in result.get_asset_check_evaluations() if c.check_name == "orders_match_source"
        ]
        [event] = result.get_asset_materialization_events()
        return {k: v.value for k, v in event.materialization.metadata.items()}, check

    first, check = run()
    assert (first["rows_read"], first["inserted"]) == (6, 6) and check.passed
    demo.set_order(source, 105, status="paid", amount="22.00", updated_at="2026-01-25", tz=UTC)
    demo.set_order(source, 186, status="paid", amount="30.00", updated_at="2026-01-24", tz=UTC)
    second, check = run()
    assert (second["inserted"], second["updated"]) == (1, 1) and check.passed
    assert second["days_touched"] == ["2026-01-24", "2026-01-25"]
    assert second["watermark_after"].startswith("2026-01-25")
    warehouse = make_engine(warehouse_url, role="warehouse")
    assert [(r[0], r[2]) for r in warehouse_rows(warehouse_url)] == [
        (101, "40.00"),
        (102, "15.50"),
        (103, "30.00"),
        (104, "12.75"),
        (105, "22.00"),
        (106, "18.20"),
        (186, "30.00"),
    ]
    warehouse.dispose()

    capsys.readouterr()
    assert main(["verify"], environ=env, clock=lambda: NOW) == 0
    assert "OK: source, warehouse" in capsys.readouterr().out
    source.dispose()


NATIVE = (
    "CREATE TABLE orders (order_id INT PRIMARY KEY, status VARCHAR(20) NOT NULL, "
    "amount DECIMAL(12, 2) NOT NULL, updated_at {kind} NOT NULL, "
    "INDEX (updated_at))"
)


@pytest.mark.parametrize(
    "kind, written, zone, expected",
    [
        # DATETIME has no zone: read in PIPELINE_TIMEZONE (New York, -05:00 in January)
        ("DATETIME(6)", "2026-01-25 03:00:00.250000", "+05:00", "2026-01-25T08:00:00.250000+00:00"),
        # TIMESTAMP stores an instant: the app's session zone says which; ours reads UTC
        (
            "TIMESTAMP(6)",
            "2026-01-25 03:00:00.250000",
            "+05:00",
            "2026-01-24T22:00:00.250000+00:00",
        ),
        ("TIMESTAMP", "2026-01-25 03:00:00", "-08:00", "2026-01-25T11:00:00.000000+00:00"),
        # a DATE belongs to that day whatever the zone: midnight in PIPELINE_TIMEZONE
        ("DATE", "2026-01-25", "+05:00", "2026-01-25T05:00:00.000000+00:00"),
    ],
)
def test_native_columns_read_by_the_contract_whatever_the_session_zone(
    mysql, tmp_path, kind, written, zone, expected
):
    url = mysql.url("native")
    app(
        url,
        NATIVE.format(kind=kind),
        f"INSERT INTO orders VALUES (7, 'paid', 40.5, '{written}')",
        zone=zone,
    )
    source = make_engine(url, role="app")
    warehouse_url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    warehouse = make_engine(warehouse_url, role="warehouse")
    ny = ZoneInfo("America/New_York")
    result = load_orders(source, warehouse, tz=ny, lookback_days=2, now=NOW)
    assert result.rows_read == 1
    assert warehouse_rows(warehouse_url) == [(7, "paid", "40.50", expected)]
    # the sensor's session reads the same zone: the window query finds the row
    start = datetime.fromisoformat(expected) - timedelta(hours=1)
    assert sensing.observe(source, ny, start, spec=ORDERS).rows == 1
    with source.connect() as conn:
        assert conn.exec_driver_sql("SELECT @@session.time_zone").scalar() == "+00:00"
    source.dispose()
    warehouse.dispose()


def test_text_columns_take_every_form_the_contract_allows(mysql, tmp_path):
    url = mysql.url("text")
    source = make_engine(url, role="app")
    demo.init(source)
    forms = [
        "2026-01-22",
        "2026-01-22T10:00:00",
        "2026-01-22 10:00:00.5",
        "2026-01-22T10:00Z",
        "2026-01-22T15:30:00+05:30",
        "2026-01-22T05:00:00-05:00",
    ]
    for n, text in enumerate(forms):
        demo.set_order(source, 300 + n, status="paid", amount=f"{n}.5", updated_at=text, tz=UTC)
    warehouse_url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    warehouse = make_engine(warehouse_url, role="warehouse")
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    held = {r[0]: r[3] for r in warehouse_rows(warehouse_url)}
    for n, text in enumerate(forms):
        assert held[300 + n] == stored(validate(300 + n, "paid", "1", text, UTC))[3], text
    source.dispose()
    warehouse.dispose()


@pytest.mark.parametrize(
    "column, value",
    [
        ("amount", "twelve"),
        ("amount", "1e3"),
        ("updated_at", "2026-02-30"),
        ("updated_at", "yesterday"),
    ],
)
def test_a_row_the_contract_refuses_is_refused_with_the_same_message(
    mysql, tmp_path, column, value
):
    url = mysql.url("hostile")
    source = make_engine(url, role="app")
    demo.init(source)
    with source.begin() as conn:
        conn.execute(sa.text(f"UPDATE orders SET {column} = :v WHERE order_id = 104"), {"v": value})
    warehouse_url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    warehouse = make_engine(warehouse_url, role="warehouse")
    with pytest.raises(InvalidRowError) as err:
        load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    row = dict(order_id=104, status="paid", amount="12.75", updated_at="2026-01-15")
    row[column] = value
    with pytest.raises(InvalidRowError) as want:
        validate(*row.values(), tz=UTC)
    assert str(err.value) == str(want.value)
    assert not sa.inspect(warehouse).has_table("orders") or warehouse_rows(warehouse_url) == []
    source.dispose()
    warehouse.dispose()


@pytest.fixture
def reader(mysql, mysql_admin):
    """A user of the demo database that may only SELECT ``orders``, with a password."""
    url = mysql.url("ro")
    source = make_engine(url, role="app")
    demo.init(source)
    source.dispose()
    name = f"pa_ro_{uuid.uuid4().hex[:8]}"
    database = sa.engine.make_url(url).database
    with mysql_admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE USER '{name}'@'%%' IDENTIFIED BY 's3cret-{name}'")
        conn.exec_driver_sql(f"GRANT SELECT ON `{database}`.`orders` TO '{name}'@'%%'")
    yield sa.engine.make_url(url).set(username=name, password=f"s3cret-{name}")
    with mysql_admin.connect() as conn:
        conn.exec_driver_sql(f"DROP USER IF EXISTS '{name}'@'%%'")


def test_a_user_that_may_only_select_loads_senses_verifies_and_repairs(
    reader, mysql_admin, tmp_path
):
    url = reader.render_as_string(hide_password=False)
    source = make_engine(url, role="app")
    warehouse = make_engine(f"sqlite:///{tmp_path / 'warehouse.db'}", role="warehouse")
    with pytest.raises(sa.exc.DBAPIError):  # it really cannot write
        with source.begin() as conn:
            conn.exec_driver_sql("UPDATE orders SET status = 'paid'")
    tick = sensing.check_source(
        source, warehouse, tz=UTC, lookback_days=2, cursor=None, spec=ORDERS
    )
    assert tick.run
    assert load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW).inserted == 6
    assert verify(source, warehouse, tmp_path / "paid_orders", tz=UTC, spec=ORDERS).source_rows == 6
    admin = mysql_admin.url.set(database=reader.database).render_as_string(hide_password=False)
    app(admin, "DELETE FROM orders WHERE order_id = 103")
    done = load_orders(
        source, warehouse, tz=UTC, lookback_days=2, now=NOW, start=JANUARY[0], end=JANUARY[1]
    )
    assert done.deleted_keys == (103,)
    source.dispose()
    warehouse.dispose()


def test_the_sensor_notices_new_late_and_re_stamped_rows(mysql):
    source = make_engine(mysql.url("sensor"), role="app")
    demo.init(source)
    start = datetime(2026, 1, 19, tzinfo=UTC)
    first = sensing.observe(source, UTC, start, spec=ORDERS)
    assert (first.rows, first.fingerprint is not None) == (2, True)
    demo.set_order(
        source, 186, status="paid", amount="30.00", updated_at="2026-01-20", tz=UTC
    )  # a late row, older than the newest
    late = sensing.observe(source, UTC, start, spec=ORDERS)
    assert late.rows == 3 and late.newest == first.newest
    demo.set_order(
        source, 186, status="paid", amount="30.00", updated_at="2026-01-20T01:00", tz=UTC
    )  # re-stamped, still not the newest: only the fingerprint moves
    moved = sensing.observe(source, UTC, start, spec=ORDERS)
    assert (moved.rows, moved.id_sum, moved.newest) == (late.rows, late.id_sum, late.newest)
    assert moved.fingerprint != late.fingerprint
    source.dispose()


def _error(url: str, tmp_path: Path) -> DatabaseError:
    source = make_engine(url, role="app")
    warehouse = make_engine(f"sqlite:///{tmp_path / 'warehouse.db'}", role="warehouse")
    try:
        with pytest.raises(DatabaseError) as err:
            load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
        return err.value
    finally:
        source.dispose()
        warehouse.dispose()


def test_errors_name_the_cause_in_one_line_and_never_the_password(
    mysql, mysql_admin, reader, tmp_path
):
    empty = mysql.url("empty")
    password = reader.password
    cases = {
        "unreachable": (
            sa.engine.make_url(empty)
            .set(port=1, password=password)
            .render_as_string(hide_password=False),
            True,
            "cannot reach",
        ),
        "wrong password": (
            reader.set(password="wrong-" + password).render_as_string(hide_password=False),
            True,
            "cannot reach",
        ),
        "no table": (empty, False, "has no table 'orders'"),
    }
    for name, (url, retryable, words) in cases.items():
        err = _error(url, tmp_path)
        text = str(err)
        assert "\n" not in text and words in text, (name, text)
        assert password not in text and "wrong-" not in text, name
        assert err.retryable is retryable, name
    app(empty, "CREATE TABLE orders (order_id INT PRIMARY KEY, status TEXT, amount TEXT)")
    err = _error(empty, tmp_path)
    assert "lacks column(s) updated_at" in str(err) and not err.retryable
    database = reader.database
    with mysql_admin.connect() as conn:  # SELECT taken back: a right missing, not a down server
        conn.exec_driver_sql(
            f"REVOKE SELECT ON `{database}`.`orders` FROM '{reader.username}'@'%%'"
        )
        conn.exec_driver_sql(
            f"GRANT SELECT (order_id) ON `{database}`.`orders` TO '{reader.username}'@'%%'"
        )
    err = _error(reader.render_as_string(hide_password=False), tmp_path)
    assert "refused the pipeline's role" in str(err) or "lacks column" in str(err)
    assert password not in str(err) and not err.retryable


def test_mysql_is_refused_as_the_warehouse(mysql):
    with pytest.raises(DatabaseError) as err:
        make_engine(mysql.url("wh"), role="warehouse")
    assert "reads as a source only" in str(err.value)
    assert "WAREHOUSE_DATABASE_URL" in str(err.value)


def test_the_plain_oracle_reads_what_the_app_wrote(mysql):
    url = mysql.url("plain")
    source = make_engine(url, role="app")
    demo.init(source)
    assert [r[0] for r in plain.source_orders(url)] == [101, 102, 103, 104, 105, 106]
    source.dispose()


def test_timezone_of_rows_is_utc_in_the_warehouse(mysql, tmp_path):
    """The UTC session matters only for TIMESTAMP; the stored text is canonical UTC."""
    url = mysql.url("utc")
    app(
        url,
        NATIVE.format(kind="TIMESTAMP(6)"),
        "INSERT INTO orders VALUES (1, 'paid', 1, '2026-07-01 12:00:00')",
        zone="+02:00",
    )
    source = make_engine(url, role="app")
    warehouse_url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    warehouse = make_engine(warehouse_url, role="warehouse")
    load_orders(source, warehouse, tz=timezone.utc, lookback_days=2, now=NOW)
    assert warehouse_rows(warehouse_url)[0][3] == "2026-07-01T10:00:00.000000+00:00"
    source.dispose()
    warehouse.dispose()
