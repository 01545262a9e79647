"""The ``orders`` asset through Dagster's real execution, with resources from settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from pipeline_assets import demo
from pipeline_assets.automation import COMPARISON_TAG
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets.definitions import build_definitions
from pipeline_assets.settings import from_env


def make_settings(tmp_path: Path, db_urls: dict | None = None, **env):
    environ = {"PIPELINE_DATA_DIR": str(tmp_path / "data"), **env}
    if db_urls:
        environ |= {
            "SOURCE_DATABASE_URL": db_urls["source"],
            "WAREHOUSE_DATABASE_URL": db_urls["warehouse"],
        }
    (tmp_path / "data").mkdir(exist_ok=True)  # the demo app database lives there
    return from_env(environ, cwd=tmp_path)


def materialize_orders(
    settings, instance, config: dict | None = None, monkeypatch=None, tags: dict | None = None
):
    defs = build_definitions(settings)
    job = defs.resolve_job_def("orders_job")
    run_config = {"ops": {"orders": {"config": config}}} if config else None
    return job.execute_in_process(
        instance=instance, run_config=run_config, raise_on_error=False, tags=tags
    )


def last_metadata(instance, result) -> dict:
    events = result.get_asset_materialization_events()
    assert len(events) == 1
    return {k: v.value for k, v in events[0].materialization.metadata.items()}


def test_materializations_tell_the_story(db_urls, tmp_path, instance, monkeypatch):
    # EnvVar resources resolve from the process environment, as under `dagster dev`
    monkeypatch.setenv("SOURCE_DATABASE_URL", db_urls["source"])
    monkeypatch.setenv("WAREHOUSE_DATABASE_URL", db_urls["warehouse"])
    settings = make_settings(tmp_path, db_urls)
    source = make_engine(settings.source_url, role="app")
    demo.init(source)

    first = materialize_orders(settings, instance)
    assert first.success
    meta = last_metadata(instance, first)
    assert meta["rows_read"] == 6 and meta["inserted"] == 6
    assert meta["window_start"] == "everything" and meta["watermark_before"] == "none"
    assert meta["watermark_after"].startswith("2026-01-21T00:00:00")
    assert meta["days_touched"][0] == "2026-01-03" and meta["days_touched_count"] == 6
    assert meta["kind"] == "incremental" and meta["batch_id"].startswith("orders-")

    demo.set_order(
        source, 105, status="paid", amount="22.00", updated_at="2026-01-25", tz=settings.tz
    )
    demo.set_order(
        source, 186, status="paid", amount="30.00", updated_at="2026-01-24", tz=settings.tz
    )
    second = last_metadata(instance, materialize_orders(settings, instance))
    assert (second["inserted"], second["updated"], second["unchanged"]) == (1, 1, 1)
    assert second["days_touched"] == ["2026-01-24", "2026-01-25"]
    assert second["watermark_after"].startswith("2026-01-25")
    assert second["lookback_days"] == 2
    source.dispose()


def test_a_range_run_from_config_leaves_the_watermark(tmp_path, instance):
    settings = make_settings(tmp_path)
    source = make_engine(settings.source_url, role="app")
    demo.init(source)
    assert materialize_orders(settings, instance).success
    demo.set_order(
        source, 101, status="refunded", amount="40.00", updated_at="2026-01-04", tz=settings.tz
    )
    result = materialize_orders(settings, instance, {"start": "2026-01-01", "end": "2026-01-10"})
    meta = last_metadata(instance, result)
    assert meta["kind"] == "range" and meta["updated"] == 1
    assert meta["watermark_before"] == meta["watermark_after"]
    assert meta["days_touched"] == ["2026-01-03", "2026-01-04"]
    warehouse = make_engine(settings.warehouse_url, role="warehouse")
    assert wm.current(warehouse, table=ORDERS.name).date().isoformat() == "2026-01-21"


def test_bad_input_fails_once_without_retries_and_names_the_row(tmp_path, instance):
    settings = make_settings(tmp_path)
    source = make_engine(settings.source_url, role="app")
    demo.init(source)
    with source.begin() as conn:
        conn.execute(
            demo.source_orders.insert().values(
                order_id=187, status="paid", amount="12.3.4", updated_at="2026-01-22"
            )
        )
    result = materialize_orders(settings, instance)
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data.error
    assert "order 187" in failure.message and "'12.3.4'" in failure.message
    # not retried: bad input does not fix itself
    assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    warehouse = make_engine(settings.warehouse_url, role="warehouse")
    with warehouse.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM orders")).scalar() == 0
    assert wm.current(warehouse, table=ORDERS.name) is None


def test_a_bad_range_in_config_is_a_clear_failure(tmp_path, instance):
    settings = make_settings(tmp_path)
    demo.init(make_engine(settings.source_url, role="app"))
    result = materialize_orders(settings, instance, {"start": "2026-01-10", "end": "soon"})
    assert not result.success
    message = result.get_step_failure_events()[0].step_failure_data.error.message
    assert "'soon'" in message and "ISO-8601" in message


@pytest.mark.postgres
def test_an_unreachable_warehouse_never_shows_its_password(
    postgres_admin, tmp_path, instance, monkeypatch
):
    secret = "s3cret-pw"
    url = f"postgresql+psycopg://loader:{secret}@127.0.0.1:1/warehouse"
    monkeypatch.setenv("WAREHOUSE_DATABASE_URL", url)
    settings = make_settings(tmp_path, WAREHOUSE_DATABASE_URL=url)
    demo.init(make_engine(settings.source_url, role="app"))
    result = materialize_orders(settings, instance)
    assert not result.success
    text = json.dumps([str(e) for e in result.all_events])
    assert "cannot reach the warehouse database" in text
    assert "loader:***@127.0.0.1:1/warehouse" in text
    assert secret not in text


def test_the_lateness_check_warns_at_half_the_lookback(tmp_path, instance):
    settings = make_settings(tmp_path)  # LOOKBACK_DAYS=2
    source = make_engine(settings.source_url, role="app")
    demo.init(source)
    first = materialize_orders(settings, instance)
    assert checks_by_name(first)["lateness_within_lookback"].passed
    demo.set_order(
        source, 186, status="paid", amount="30.00", updated_at="2026-01-20", tz=settings.tz
    )  # a full day behind the watermark (2026-01-21)
    second = materialize_orders(settings, instance)
    assert second.success  # a warning, not a failure
    check = checks_by_name(second)["lateness_within_lookback"]
    assert not check.passed and check.severity.value == "WARN"
    assert check.metadata["max_lateness_hours"].value == 24.0
    meta = last_metadata(instance, second)
    assert (meta["late_rows"], meta["max_lateness_hours"]) == (1, 24.0)


def checks_by_name(result) -> dict:
    return {c.check_name: c for c in result.get_asset_check_evaluations()}


def test_rows_later_than_the_lookback_are_caught_by_the_reconciliation_check(tmp_path, instance):
    # a horizon of a century: the demo's January 2026 stays inside whatever today is
    settings = make_settings(tmp_path, RECONCILE_DAYS="36500")
    source = make_engine(settings.source_url, role="app")
    demo.init(source)
    first = materialize_orders(settings, instance)
    assert checks_by_name(first)["orders_match_source"].passed

    # order 107 arrives dated eleven days before the watermark: the lookback cannot see it
    demo.set_order(
        source, 107, status="paid", amount="9.00", updated_at="2026-01-10", tz=settings.tz
    )
    missed = materialize_orders(settings, instance)
    assert last_metadata(instance, missed)["inserted"] == 0
    assert checks_by_name(missed)["orders_match_source"].passed  # the load did not read it
    full = materialize_orders(settings, instance, tags={COMPARISON_TAG: "full"})
    check = checks_by_name(full)["orders_match_source"]
    assert not check.passed
    assert check.metadata["differing_days"].value == ["2026-01-10"]
    (repair,) = check.metadata["repair"].value
    assert '"start": "2026-01-10", "end": "2026-01-11"' in repair
    assert "--select orders" in check.description or "--select orders" in repair

    # the repair: an explicit range run of that day (the watermark stays)
    fixed = materialize_orders(settings, instance, {"start": "2026-01-10", "end": "2026-01-11"})
    assert last_metadata(instance, fixed)["inserted"] == 1
    assert checks_by_name(fixed)["orders_match_source"].passed
    assert last_metadata(instance, fixed)["watermark_after"].startswith("2026-01-21")


def test_days_of_a_batch_whose_run_died_after_commit_are_announced_by_the_next(
    tmp_path, instance, monkeypatch
):
    """The lost acknowledgement, seen from the day files: no day may stay stale."""
    settings = make_settings(tmp_path)
    source = make_engine(settings.source_url, role="app")
    demo.init(source)
    assert materialize_orders(settings, instance).success
    demo.set_order(
        source, 105, status="paid", amount="22.00", updated_at="2026-01-25", tz=settings.tz
    )
    monkeypatch.setenv("PIPELINE_CRASH_AT", "load_after_commit")
    monkeypatch.setenv("PIPELINE_CRASH_MODE", "raise")
    monkeypatch.setenv("PIPELINE_CRASH_ONCE_FILE", str(tmp_path / "crashed"))
    defs = build_definitions(settings)
    died = defs.resolve_job_def("orders_job").execute_in_process(
        instance=instance, raise_on_error=False
    )
    # the RetryPolicy retried the step: the retry found the rows already there
    assert died.success
    meta = last_metadata(instance, died)
    assert (meta["inserted"], meta["updated"]) == (0, 0)
    assert meta["days_touched"] == ["2026-01-25"]  # owed by the batch that died


def test_a_range_run_shows_its_deletes_and_a_refused_one_what_it_would_delete(tmp_path, instance):
    """Only a range load can see deletions: its metadata says how many, which and their
    digest; an incremental one says nothing of them. A range run that would delete more
    than MAX_DELETE_SHARE fails without retries, its failure carrying the figures, and
    ``allow_deletes: true`` lets it through, shown as a mass delete."""
    settings = make_settings(tmp_path, MAX_DELETE_SHARE="0.25")
    source = make_engine(settings.source_url, role="app")
    demo.init(source)
    incremental = last_metadata(instance, materialize_orders(settings, instance))
    assert "rows_deleted" not in incremental
    with source.begin() as conn:
        conn.exec_driver_sql("DELETE FROM orders WHERE order_id IN (101, 102)")
    january = {"start": "2026-01-01", "end": "2026-02-01"}
    refused = materialize_orders(settings, instance, january)
    assert not refused.success
    [failure] = [e for e in refused.all_events if e.event_type_value == "STEP_FAILURE"]
    data = failure.step_failure_data
    assert "would delete 2 of the 6 order(s)" in data.user_failure_data.description
    assert {k: v.value for k, v in data.user_failure_data.metadata.items()} == {
        "would_delete": 2,
        "rows_in_range": 6,
        "range_start": "2026-01-01T00:00:00+00:00",
        "range_end": "2026-02-01T00:00:00+00:00",
        "max_delete_share": 0.25,
    }
    assert len([e for e in refused.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]) == 0
    allowed = materialize_orders(settings, instance, {**january, "allow_deletes": True})
    meta = last_metadata(instance, allowed)
    assert (meta["rows_deleted"], meta["deleted_order_ids"], meta["mass_delete_allowed"]) == (
        2,
        [101, 102],
        True,
    )
    assert {"2026-01-03", "2026-01-08"} <= set(meta["days_touched"])
    source.dispose()
