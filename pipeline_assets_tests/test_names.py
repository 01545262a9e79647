"""Any column name a source can have: the pipeline's working columns never meet a user's.

Beside a table's rows the pipeline carries columns of its own (a row's day and instant,
whether a file keeps it, row numbers through a join, a load's old values), all under a
prefix no declaration may use (``core/table/working.py``). What a user relies on: a table whose
columns are named as those working columns once were (``day``, ``instant``, ``paid``,
``file``, ``_row``, ``key``, ``column``, ``rows``), as SQL's reserved words (``order``,
``select``, ``Group``) or in another script (``Größe``) runs the whole story, on every
source and warehouse: the load and its check, the sensors, day files and exact totals, a
row the app deletes and one it adds named by ``verify`` (never a crash), and the repairs
it prints making everything agree. A property test then draws names from those lists and
from arbitrary text, and runs the core of the story on each.
"""

from __future__ import annotations

import json
import shlex
from datetime import date

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipeline_assets.core.daily_files import serialize_day
from pipeline_assets.core.daily_files.views import day_rows, day_totals
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.load.batch import load_table
from pipeline_assets.core.load.deletions import DeletePolicy
from pipeline_assets.core.table import working
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.times import UTC, to_instant
from pipeline_assets.core.verify import DIFFERS_FROM_SOURCE, verify
from pipeline_assets.definitions import build_definitions
from pipeline_assets.sensor_runs import RUN_KEY_TAG, SENSOR_TAG
from pipeline_assets.settings import from_env

from .conftest import NOW
from .table_sources import TableSource, stamp
from .tables import HOSTILE
from .test_automation import tick
from .test_verify_tables import DAYS  # six rows over three days

FIRST, LAST = "2026-01-03", "2026-01-08"
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
RANGE = {RANGE_START: FIRST, RANGE_END: LAST}


def _metadata(result, asset: str) -> list[dict]:
    return [
        {k: v.value for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key.to_user_string() == asset
    ]


def _run_printed(defs, instance, commands) -> list:
    """The commands verify printed, run in this process as the dagster CLI would; the
    results of the range loads among them."""
    loads = []
    for command in commands:
        argv = shlex.split(command)
        select = argv[argv.index("--select") + 1].split(",")
        if "--config-json" in argv:
            config = json.loads(argv[argv.index("--config-json") + 1])
            job = defs.resolve_job_def(HOSTILE.names.load_job)
            assert select == [HOSTILE.name]
            loads.append(job.execute_in_process(instance=instance, run_config=config))
            assert loads[-1].success
            continue
        job = defs.resolve_job_def(HOSTILE.names.files["hostile_files"].job)
        assert select == ["hostile_files", "hostile_totals"]
        if "--partition" in argv:
            day = argv[argv.index("--partition") + 1]
            tags = {"dagster/partition": day}
        else:
            first, _, last = argv[argv.index("--partition-range") + 1].partition("...")
            tags = {RANGE_START: first, RANGE_END: last}
        assert job.execute_in_process(instance=instance, tags=tags).success
    return loads


def _requested(request, sensor: str) -> dict:
    """The tags of the run the daemon launches for a sensor's request."""
    return {**request.tags, SENSOR_TAG: sensor, RUN_KEY_TAG: request.run_key}


def _sensor(defs, instance, name, cursor=None):
    return tick(defs, name, instance, cursor)


def test_a_table_named_as_the_machinery_runs_the_whole_story(
    db_urls, tmp_path, instance, monkeypatch
):
    env = {
        "PIPELINE_DATA_DIR": str(tmp_path / "data"),
        "SOURCE_DATABASE_URL": db_urls["source"],
        "WAREHOUSE_DATABASE_URL": db_urls["warehouse"],
    }
    for name, value in env.items():  # the URLs reach Dagster as EnvVars, as deployed
        monkeypatch.setenv(name, value)
    settings_ = from_env(env, cwd=tmp_path)
    app = TableSource(make_engine(db_urls["source"], role="app"), HOSTILE)
    app.create()
    for n, at in DAYS.items():
        app.put(n, stamp(at), filed=n != 2)
    defs = build_definitions(settings_, spec=HOSTILE, clock=lambda: NOW)
    names = HOSTILE.names

    # the sensor notices the table; the load and both its checks pass
    noticed = _sensor(defs, instance, names.new_sensor)
    [request] = noticed.run_requests
    loaded = defs.resolve_job_def(names.load_job).execute_in_process(
        instance=instance, tags=_requested(request, names.new_sensor)
    )
    assert loaded.success
    [meta] = _metadata(loaded, "hostile")
    assert (meta["inserted"], meta["days_touched"]) == (6, ["2026-01-03", "2026-01-05", LAST])
    assert all(e.passed for e in loaded.get_asset_check_evaluations())

    # the refresh sensor asks for exactly the touched days; the files and totals are built
    refresh = _sensor(defs, instance, names.files["hostile_files"].refresh_sensor)
    asked = [r.partition_key or r.tags[RANGE_START] for r in refresh.run_requests]
    assert sorted(asked) == ["2026-01-03", "2026-01-05", LAST]
    job = defs.resolve_job_def(names.files["hostile_files"].job)
    built = job.execute_in_process(instance=instance, tags=RANGE)
    assert built.success
    folder = tmp_path / "data" / "hostile_files"
    [row] = json.loads((folder / "2026-01-03.json").read_text())  # 2 is not kept
    assert sorted(row) == sorted(HOSTILE.column_names)
    assert (row["key"], row["order"], row["file"], row["select"]) == (1, 2, "kept", "1.05")
    assert json.loads((folder / "2026-01-04.json").read_text()) == []
    totals = {
        e.materialization.partition: {k: v.value for k, v in e.materialization.metadata.items()}
        for e in built.get_asset_materialization_events()
        if e.materialization.asset_key.to_user_string() == "hostile_totals"
    }
    empty, two = totals["2026-01-04"], totals["2026-01-05"]
    assert (empty["rows"], empty["select_exact"]) == (0, "0.00")  # keeps the column's places
    # _row is NULL in row 4 (nullable columns are NULL in even rows): left out of its sum
    assert (two["rows"], two["select_exact"], two["_row_exact"]) == (2, "7.10", "300")

    # the app deletes a row, changes one and adds one: verify names them, not crashes
    app.delete(3)
    app.put(4, stamp("2026-01-05T12:00"), version=1)
    app.put(7, stamp("2026-01-08T09:00"))
    source = make_engine(db_urls["source"], role="source")
    warehouse = make_engine(db_urls["warehouse"], role="warehouse")

    def verified(**kw):
        return verify(
            source,
            warehouse,
            {"hostile_files": folder},
            tz=UTC,
            today=NOW.date(),
            partitions_start=date(2026, 1, 1),
            spec=HOSTILE,
            **kw,
        )

    found = verified()
    differs = {p.day: p.detail for p in found.problems if p.kind == DIFFERS_FROM_SOURCE}
    assert differs == {
        "2026-01-05": "source 1 rows, warehouse 2 rows: 1 changed since the last load, 1 "
        "only in the warehouse: the source no longer has them (hostile (key=3, order=1)); "
        "a range load of the day deletes them",
        LAST: "source 3 rows, warehouse 2 rows: 1 not loaded",
    }
    assert len(_sensor(defs, instance, names.new_sensor, noticed.cursor).run_requests) == 1

    # the printed repairs, run as printed, make everything agree
    loads = _run_printed(defs, instance, found.repair)
    ranged = [m for m in _metadata_all(instance) if m.get("kind") == "range"]
    assert [(m["rows_deleted"], m["deleted_keys"]) for m in ranged] == [(1, [[3, 1]]), (0, [])]
    said = [e.user_message for e in instance.all_logs(loads[0].run_id) if e.user_message]
    assert any("unchanged 0, deleted 1;" in line for line in said), said  # the log counts it
    agreed = verified(require_all=True)
    assert agreed.ok and agreed.problems == (), agreed.lines()
    source.dispose()
    warehouse.dispose()
    app.engine.dispose()


def _metadata_all(instance) -> list[dict]:
    """Every materialization of ``hostile``, oldest first."""
    from dagster import AssetKey, AssetRecordsFilter

    found = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("hostile")), limit=100, ascending=True
    )
    return [
        {k: v.value for k, v in r.asset_materialization.metadata.items()} for r in found.records
    ]


# --- any name at all, drawn ---------------------------------------------------------------

# the names the machinery gave its own columns before they moved under the prefix, and
# SQL's reserved words, in several cases
WORKING_NAMES = ["day", "instant", "paid", "file", "_row", "key", "column", "rows", "bad"]
WORKING_NAMES += ["s_day", "w_day", "s_paid", "w_paid", "old__key", "count_all", "c0", "row"]
RESERVED = ["order", "select", "Group", "from", "WHERE", "table", "user", "Index", "limit"]
RESERVED += ["primary", "desc", "Default", "null", "true", "check", "values"]
# SQLite's keywords that SQLAlchemy's list of its reserved words lacks
RESERVED += ["nothing", "Do", "filter", "window", "others", "nulls"]
OTHER_SCRIPTS = ["Größe", "名前", "prix €", "naïve", "Ωmega", "mixed Case", "a.b", "x-y"]


def _usable(name: str) -> bool:
    return (
        bool(name.strip())
        and '"' not in name
        and not working.is_working(name)
        and name.strip() == name
        and "\x00" not in name
        and name != "CHANGE_ME"
    )


NAMES = st.one_of(
    st.sampled_from(WORKING_NAMES + RESERVED + OTHER_SCRIPTS),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), max_size=12),
).filter(_usable)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(NAMES, min_size=7, max_size=7, unique_by=str.casefold),
    st.sampled_from(["integer", "text", "both"]),
)
def test_any_column_names_load_verify_and_write_their_day_files(tmp_path_factory, names, keyed):
    """Seven drawn names take the seven roles of a table: its key (an integer column, a
    text column, or both), the cursor, a summed decimal, the filter, a nullable boolean
    and a date."""
    key, part, at, amount, kept, flag, when = names
    assume(amount not in ("day", "rows") and f"{amount}_exact" not in names)  # the totals' own
    spec = declare(
        {
            "table": "drawn",
            "primary_key": {"integer": [key], "text": [part], "both": [key, part]}[keyed],
            "cursor": at,
            "columns": {
                key: "integer",
                part: "text",
                at: "timestamp",
                amount: "decimal(10,2)",
                kept: "text",
                flag: {"type": "boolean", "nullable": True},
                when: "date",
            },
            "daily_files": [
                {
                    "name": "drawn_files",
                    "where": {kept: "in"},
                    "totals": {"name": "drawn_totals", "sum": [amount]},
                }
            ],
        }
    )
    root = tmp_path_factory.mktemp("drawn")
    source = make_engine(f"sqlite:///{root / 'app.db'}", role="app")
    warehouse = make_engine(f"sqlite:///{root / 'warehouse.db'}", role="warehouse")
    try:
        app = TableSource(source, spec)
        app.create()
        for n, moment in DAYS.items():
            app.put(n, stamp(moment), filed=n != 2)

        def load(**bounds):
            return load_table(
                source,
                warehouse,
                spec=spec,
                tz=UTC,
                lookback_days=2,
                now=NOW,
                deletes=DeletePolicy(allow=False),
                **bounds,
            )

        assert load().inserted == 6
        files = spec.daily_files[0]
        by_day = day_rows(warehouse, ["2026-01-03", "2026-01-04"], UTC, spec, files)
        [row] = json.loads(serialize_day("2026-01-03", by_day["2026-01-03"], spec, files))
        assert sorted(row) == sorted(spec.column_names) and row[kept] == "in"
        _, sums = day_totals(by_day["2026-01-04"], files.totals, spec=spec)
        assert str(sums[amount]) == "0.00"

        app.delete(3)
        app.put(7, stamp("2026-01-08T09:00"))
        found = verify(source, warehouse, root / "files", tz=UTC, spec=spec, today=NOW.date())
        assert found.failing_days == ["2026-01-05", LAST]
        for first, end in (("2026-01-05", "2026-01-06"), (LAST, "2026-01-09")):
            load(start=to_instant(first, UTC), end=to_instant(end, UTC))
        after = verify(source, warehouse, root / "files", tz=UTC, spec=spec, today=NOW.date())
        assert after.failing_days == [] and after.source_rows == after.warehouse_rows == 6
    finally:
        source.dispose()
        warehouse.dispose()


@pytest.mark.parametrize("name", WORKING_NAMES + RESERVED + OTHER_SCRIPTS)
def test_every_listed_name_is_a_column_name_a_declaration_takes(name):
    columns = {"id": "integer", "at": "timestamp", name: "text"}
    spec = declare({"table": "t", "primary_key": "id", "cursor": "at", "columns": columns})
    assert name in spec.column_names
