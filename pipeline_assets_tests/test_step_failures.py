"""What a failed step tells its user, and whether it is retried.

Through Dagster's real execution of a table declared in a ``defs.yaml`` (``payments``,
its file named as the component names it): an error a user can fix is the failure's
first line, naming the table and that file, and is retried only when it may pass; a
source database that does not exist is refused, naming it, and never created; and a bug
(here a warehouse table changed by hand under the pipeline, which its SQL trips over)
fails at once, not retried, saying it is an internal error, its traceback kept as the
failure's cause.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from pipeline_assets.component import IncrementalTable
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.definitions import build_definitions
from pipeline_assets.settings import from_env

from .tables import PAYMENTS_ATTRIBUTES, make_payments

NOW = datetime(2026, 1, 26, 12, tzinfo=timezone.utc)
WHERE = "shop/defs/payments/defs.yaml"
ROWS = [(1, 1, "captured", 500, "1.10", 0.5, "é", True, "2026-01-20", "2026-01-20 10:00:00")]


@pytest.fixture
def declared(tmp_path):
    """``payments`` as its component declares it, in ``shop/defs/payments/defs.yaml``."""
    (tmp_path / "data").mkdir()
    settings = from_env({"PIPELINE_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    spec = IncrementalTable(**PAYMENTS_ATTRIBUTES).spec(WHERE)
    return settings, spec, build_definitions(settings, spec=spec, clock=lambda: NOW)


def _failed(defs, instance):
    result = defs.resolve_job_def("payments_job").execute_in_process(
        instance=instance, raise_on_error=False
    )
    assert not result.success
    kinds = [e.event_type_value for e in result.all_events]
    [failure] = [e for e in result.all_events if e.is_step_failure]
    return failure.step_failure_data, kinds


def test_an_error_a_user_can_fix_is_the_first_line_and_names_the_file(declared, instance):
    settings, spec, defs = declared
    source = make_engine(settings.source_url, role="app")
    with source.begin() as conn:  # the app's table, without the declared fee
        conn.exec_driver_sql(
            "CREATE TABLE payments (payment_id INTEGER, attempt INTEGER, status TEXT, "
            "amount_cents INTEGER, rate REAL, note TEXT, refundable BOOLEAN, settle_on TEXT, "
            "modified_at TEXT)"
        )
    data, kinds = _failed(defs, instance)
    description = data.user_failure_data.description
    assert description.startswith(
        f"payments ({WHERE}): the source table payments in {settings.source_url} lacks "
        "column(s) fee; it needs payment_id"
    )
    assert "Correct the declaration's columns" in description
    assert "STEP_UP_FOR_RETRY" not in kinds  # the source will not grow it by itself
    source.dispose()


def test_a_source_database_that_does_not_exist_is_refused_and_never_created(
    declared, instance, tmp_path
):
    settings, spec, defs = declared
    data, kinds = _failed(defs, instance)
    missing = tmp_path / "data" / "app.db"
    assert data.user_failure_data.description.startswith(
        f"payments ({WHERE}): the source database {missing} does not exist"
    )
    assert "STEP_UP_FOR_RETRY" not in kinds
    assert not missing.exists()


def test_a_bug_fails_at_once_not_retried_with_its_traceback(declared, instance):
    settings, spec, defs = declared
    source = make_engine(settings.source_url, role="app")
    make_payments(source, rows=ROWS)
    warehouse = make_engine(settings.warehouse_url, role="warehouse")
    with warehouse.begin() as conn:  # made by hand, without the index the load manages
        conn.exec_driver_sql(
            "CREATE TABLE payments (payment_id INTEGER NOT NULL, attempt INTEGER NOT NULL, "
            "status TEXT, amount_cents INTEGER, fee TEXT, rate REAL, note TEXT, "
            "refundable BOOLEAN, settle_on TEXT, modified_at TEXT, "
            "PRIMARY KEY (payment_id, attempt))"
        )
    data, kinds = _failed(defs, instance)
    assert data.user_failure_data.description.startswith(
        f"payments ({WHERE}): internal error (OperationalError: "
    )
    assert "not retried" in data.user_failure_data.description
    assert "STEP_UP_FOR_RETRY" not in kinds and "STEP_RESTARTED" not in kinds
    assert data.error.cause is not None and data.error.cause.cls_name == "OperationalError"
    assert data.error.cause.stack  # where it happened
    source.dispose()
    warehouse.dispose()
