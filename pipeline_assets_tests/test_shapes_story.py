"""The whole story of every table shape, told by one user's project.

``shop`` declares three tables in ``defs.yaml`` files, one of each shape an app has:

- ``charges``: a change stamp (``modified_at``) and its days by ``charged_at``;
- ``events``: append-only, an integer id cursor with ``lookback_ids`` (and holes);
- ``prices``: no change stamp (``cursor: null``), a ``date`` day column and a key of two
  columns.

Each runs the story in the project's own Dagster definitions (imported as ``dagster -m``
imports them, run in process on an ephemeral instance) and its ``pipeline-assets``
commands: the first load, the day files of every day, the app's changes, the refresh
sensor's rebuilds, ``verify`` with its printed repairs run as printed, and deletes
past ``max_delete_share`` refused, then allowed. A late commit below the id window
(loaded through its remembered hole), an in-place update of the append-only table and a
row moved to another day all end with ``verify`` clean, and each declaration that cannot
work is refused, naming its file.
"""

from __future__ import annotations

import json
import shlex
import sys
import uuid

import pytest
from dagster import AssetKey, build_sensor_context

from pipeline_assets.core import sensing
from pipeline_assets.core.daily_files import read_committed_day
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table.declare import declare as declare_spec
from pipeline_assets.location import location_definitions

from .table_sources import TableSource, stamp
from .tables import CAPTURES_ATTRIBUTES, EVENTS_ATTRIBUTES, PRICES_ATTRIBUTES, in_format
from .user_project import declare, project

RANGE = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")

CHARGES_ATTRIBUTES = {
    **CAPTURES_ATTRIBUTES,
    "table": "charges",
    "primary_key": ["charge_id", "attempt"],
    "day_column": "charged_at",
    "columns": {
        "charge_id": "integer",
        "attempt": "integer",
        "status": "text",
        "amount": "decimal(10,2)",
        "note": {"type": "text", "nullable": True},
        "charged_at": "timestamp",
        "modified_at": "timestamp",
    },
    "daily_files": [
        {
            "name": "charged",
            "where": {"status": "captured"},
            "totals": {"name": "charged_per_day", "sum": ["amount"]},
        }
    ],
}
PRICES_BY_TIER = {
    **PRICES_ATTRIBUTES,
    "primary_key": ["sku", "tier"],
    "columns": {"tier": "integer", **PRICES_ATTRIBUTES["columns"]},
}
DECLARED = {
    "charges": CHARGES_ATTRIBUTES,
    "events": EVENTS_ATTRIBUTES,
    "prices": PRICES_BY_TIER,
}


def day(n: int) -> str:
    return f"2026-01-{n:02}"


class Shop:
    """The project, its databases, its definitions and the runs a user starts."""

    def __init__(self, root, instance, cli, monkeypatch, form: str = "json", tables=None):
        self.module = f"shop_{uuid.uuid4().hex[:8]}"
        project(root, self.module)
        declared = {name: in_format(a, form) for name, a in (tables or DECLARED).items()}
        for name, attributes in declared.items():
            declare(root, name, attributes, module=self.module)
        self.specs = {name: declare_spec(attributes) for name, attributes in declared.items()}
        self.root, self.instance, self.cli = root, instance, cli
        self.env = {
            "SOURCE_DATABASE_URL": f"sqlite:///{root / 'app.db'}",
            "WAREHOUSE_DATABASE_URL": f"sqlite:///{root / 'warehouse.db'}",
            "PIPELINE_DATA_DIR": str(root / "data"),
            "PARTITIONS_START_DATE": "2026-01-01",
            "PIPELINE_TIMEZONE": "UTC",
            "PIPELINE_AUTOMATION": "off",
        }
        for key, value in self.env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(root)
        source = make_engine(self.env["SOURCE_DATABASE_URL"], role="app")
        self.apps = {name: TableSource(source, spec) for name, spec in self.specs.items()}
        self.defs = location_definitions(f"{self.module}.definitions")

    def dispose(self) -> None:
        next(iter(self.apps.values())).engine.dispose()
        for name in [n for n in sys.modules if n.startswith(self.module)]:
            del sys.modules[name]

    def execute(self, job: str, *, tags=None, config=None, ok=True):
        result = self.defs.resolve_job_def(job).execute_in_process(
            instance=self.instance, tags=tags or {}, run_config=config or {}, raise_on_error=False
        )
        if ok:
            assert result.success, [e.message for e in result.all_events if e.is_failure]
        return result

    def load(self, name: str, config: dict | None = None, ok: bool = True):
        """The table's job: its materialization's metadata, and its checks' outcomes under
        their names (a failed run: its error's text). The checks pass unless ``ok`` is
        ``"checks"``."""
        spec = self.specs[name]
        run = {"ops": {spec.names.asset: {"config": config}}} if config else None
        result = self.execute(spec.names.load_job, config=run, ok=ok)
        if not result.success:
            return " ".join(
                e.step_failure_data.error.message for e in result.all_events if e.is_step_failure
            )
        (event,) = result.get_asset_materialization_events()
        checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
        if ok is True:
            assert all(c.passed for c in checks.values()), checks
        return {k: v.value for k, v in event.materialization.metadata.items()} | checks

    def build(self, name: str, first: str, last: str) -> None:
        """The table's day files and totals over ``first``…``last``: one run."""
        job = self.specs[name].names.files[self.specs[name].daily_files[0].name].job
        self.execute(job, tags=dict(zip(RANGE, (first, last), strict=True)))

    def last_load(self, name: str) -> int:
        (record,) = self.instance.fetch_materializations(AssetKey(name), limit=1).records
        return record.storage_id

    def refresh(self, name: str, after: int) -> list[tuple[str, str]]:
        """One tick of the refresh sensor of the table's files that has read every load
        up to ``after``: the runs it asks for, built; their ``(first, last)`` days."""
        spec = self.specs[name]
        sensor = self.defs.resolve_sensor_def(
            spec.names.files[spec.daily_files[0].name].refresh_sensor
        )
        cursor = sensing.RefreshCursor(after=after).to_cursor()
        with build_sensor_context(
            instance=self.instance, cursor=cursor, definitions=self.defs
        ) as context:
            requests = sensor.evaluate_tick(context).run_requests
        spans = [tuple(r.tags.get(t, r.partition_key) for t in RANGE) for r in requests]
        for first, last in spans:
            self.build(name, first, last)
        return spans

    def verify(self, name: str) -> dict:
        code, out, err = self.cli(
            "verify", "-m", f"{self.module}.definitions", "--table", name, "--json", **self.env
        )
        report = json.loads(out)
        assert (code == 0) == (report["repair"] == []), (code, out, err)
        return report

    def run_printed(self, command: str) -> None:
        """A printed ``dagster asset materialize`` command, as its run would do it."""
        argv = shlex.split(command)
        assert argv[:5] == ["dagster", "asset", "materialize", "-m", f"{self.module}.definitions"]
        select = argv[argv.index("--select") + 1].split(",")
        spec = next(s for s in self.specs.values() if select[0] in (s.names.asset, *s.names.files))
        if "--config-json" in argv:
            assert select == [spec.names.asset]
            config = json.loads(argv[argv.index("--config-json") + 1])
            assert self.execute(spec.names.load_job, config=config).success
            return
        days = (
            argv[argv.index("--partition-range") + 1].split("...")
            if ("--partition-range" in argv)
            else [argv[argv.index("--partition") + 1]] * 2
        )
        self.build(spec.name, days[0], days[-1])

    def repair(self, name: str) -> list[str]:
        """``verify``'s printed repairs of the table, run in order; the days they named."""
        report = self.verify(name)
        for command in report["repair"]:
            self.run_printed(command)
        assert self.verify(name)["repair"] == []
        return report["repair"]

    def filed(self, name: str, n: int) -> list[tuple]:
        """The keys in the committed file of January ``n``."""
        spec = self.specs[name]
        rows = read_committed_day(self.root / "data" / spec.daily_files[0].name, day(n))
        rows = rows if isinstance(rows, list) else rows.to_pylist()  # a Parquet day's table
        return [tuple(r[k] for k in spec.primary_key) for r in rows]


@pytest.fixture(params=["json", "parquet"])
def shop(request, tmp_path, instance, cli, monkeypatch):
    made = Shop(tmp_path, instance, cli, monkeypatch, request.param)
    for app in made.apps.values():
        app.create()
    yield made
    made.dispose()


def first_days(shop: Shop, name: str, rows: dict[int, int]) -> None:
    """Rows ``n`` on January ``rows[n]`` (their stamps that morning): the first load and
    every day's file, which agree with the source."""
    app = shop.apps[name]
    for n, on in rows.items():
        app.put(n, stamp(f"{day(on)}T10:00"), filed=n != 3)
    shop.load(name)
    shop.build(name, day(1), day(9))
    assert shop.verify(name)["repair"] == []


def test_charges_a_row_moved_to_another_day_and_a_guarded_delete(shop):
    """Days by ``charged_at``, new rows by ``modified_at``: an edit moves a charge to
    another day's file in one rebuild; a day the app emptied is refused without
    ``allow_deletes`` and repaired by verify's printed command."""
    first_days(shop, "charges", {1: 1, 2: 2, 3: 3, 4: 4, 5: 4, 6: 6})
    app, before = shop.apps["charges"], shop.last_load("charges")
    assert shop.filed("charges", 4) == [(4, 2), (5, 3)]
    # charge 4 moves to the 8th, charge 1 changes in place: both edited on the 10th
    app.put(4, stamp("2026-01-10T09:00"), day=stamp("2026-01-08T12:00"))
    app.put(1, stamp("2026-01-10T09:00"), day=stamp("2026-01-01T10:00"), version=1)
    meta = shop.load("charges")
    assert meta["days_touched"] == [day(1), day(4), day(8)]
    assert meta["days_moved"] == [[day(4), day(8)]]
    # day 1's rebuild, and one run for both days of the moved charge
    assert shop.refresh("charges", before) == [(day(1), day(1)), (day(4), day(8))]
    assert (shop.filed("charges", 4), shop.filed("charges", 8)) == ([(5, 3)], [(4, 2)])
    assert shop.verify("charges")["repair"] == []

    # the app empties the 6th: the range load of that day is refused, verify's repair allows it
    app.delete(6)
    refused = shop.load("charges", {"start": day(6), "end": day(7)}, ok=False)
    assert "MAX_DELETE_SHARE=0.5" in refused and "allow_deletes: true" in refused
    assert "1 of the 1 row(s) the warehouse holds whose charged_at is in it" in refused
    (repair, rebuild) = shop.repair("charges")
    assert '"allow_deletes": true' in repair and day(6) in rebuild
    assert shop.filed("charges", 6) == []


def test_events_late_commits_and_in_place_updates_end_with_verify_clean(shop):
    """Ids 1–4, 6 and 8 on the days of their number (5 and 7 remembered as holes): 7
    commits within ``lookback_ids``, 5 below the window, and both are loaded, 5 through
    its hole; an in-place update is named by verify, whose printed range load loads it."""
    app = shop.apps["events"]
    first_days(shop, "events", {1: 1, 2: 2, 3: 3, 4: 4, 6: 6, 8: 8})
    before = shop.last_load("events")
    app.put(7, stamp(f"{day(7)}T10:00"))  # within the window: ids from 6 on
    app.put(5, stamp(f"{day(5)}T10:00"))  # below it: committed too late for the lookback
    app.put(2, stamp(f"{day(2)}T10:00"), version=1)  # the app updated an event in place
    meta = shop.load("events", ok="checks")
    assert (meta["window_start"], meta["watermark_after"], meta["inserted"]) == ("6", "8", 2)
    assert (meta["holes_filled"], meta["holes_remembered"]) == (2, 0)
    check = meta["events_match_source"]  # the load's check names the day of 2
    assert not check.passed and check.metadata["differing_days"].data == [day(2)]
    assert shop.refresh("events", before) == [(day(5), day(5)), (day(7), day(7))]
    assert (shop.filed("events", 5), shop.filed("events", 7)) == ([(5,)], [(7,)])
    repairs = shop.repair("events")
    loads = [c for c in repairs if "--config-json" in c]
    assert [json.loads(shlex.split(c)[-1])["ops"]["events"]["config"] for c in loads] == [
        {"start": day(2), "end": day(3)}
    ]
    code, out, _ = shop.cli(
        "watermark", "show", "-m", f"{shop.module}.definitions", "--table", "events", **shop.env
    )
    assert json.loads(out)["watermark"] == 8  # the repairs never moved it


def test_prices_without_a_stamp_compare_whole_by_a_key_of_two_columns(shop):
    """Each run compares the whole table: an insert, a change, a move and a delete in
    one run, its days rebuilt by the refresh sensor; deleting most rows is refused
    until allowed."""
    app = shop.apps["prices"]
    first_days(shop, "prices", {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 6, 8: 6})
    before = shop.last_load("prices")
    assert shop.filed("prices", 2) == [(2, 3)]  # sku 2, tier 3
    app.put(2, stamp(f"{day(9)}T10:00"))  # moved to the 9th
    app.put(1, stamp(f"{day(1)}T10:00"), version=1)
    app.put(9, stamp(f"{day(5)}T10:00"))
    app.delete(4)
    meta = shop.load("prices")
    assert (meta["inserted"], meta["updated"], meta["rows_deleted"]) == (1, 2, 1)
    assert meta["days_touched"] == [day(1), day(2), day(4), day(5), day(9)]
    assert shop.load("prices")["days_touched"] == []  # nothing changed: nothing to rebuild
    assert shop.refresh("prices", before) == [(day(1), day(9))]
    assert (shop.filed("prices", 2), shop.filed("prices", 9)) == ([], [(2, 3)])
    assert shop.verify("prices")["repair"] == []

    for n in (5, 6, 7, 8, 9):  # most of the table
        app.delete(n)
    refused = shop.load("prices", ok=False)
    assert "max_delete_share=0.5" in refused and "allow_deletes: true" in refused
    assert shop.filed("prices", 6) == [(6, 1), (7, 2), (8, 3)]
    before = shop.last_load("prices")
    assert shop.load("prices", {"allow_deletes": True})["rows_deleted"] == 5
    assert shop.refresh("prices", before) == [(day(5), day(6))]
    assert shop.filed("prices", 6) == [] and shop.verify("prices")["repair"] == []


BAD = {
    "events without a day_column": (
        "events",
        {k: v for k, v in EVENTS_ATTRIBUTES.items() if k != "day_column"},
        "day_column",
    ),
    "prices with lookback_days": (
        "prices",
        {**PRICES_BY_TIER, "lookback_days": 2},
        "lookback_days",
    ),
    "events with lookback_days": (
        "events",
        {**EVENTS_ATTRIBUTES, "lookback_days": 2},
        "lookback_days",
    ),
    "charges with lookback_ids": (
        "charges",
        {**CHARGES_ATTRIBUTES, "lookback_ids": 5},
        "lookback_ids",
    ),
    "charges by a text day": (
        "charges",
        {**CHARGES_ATTRIBUTES, "day_column": "note"},
        "day_column",
    ),
    "charges without a cursor": (
        "charges",
        {k: v for k, v in CHARGES_ATTRIBUTES.items() if k != "cursor"},
        "cursor",
    ),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_declaration_that_cannot_work_is_refused_naming_its_file(bad, tmp_path, monkeypatch):
    name, attributes, attribute = BAD[bad]
    module = f"shop_{uuid.uuid4().hex[:8]}"
    project(tmp_path, module)
    declare(tmp_path, name, attributes, module=module)
    monkeypatch.chdir(tmp_path)
    try:
        with pytest.raises(Exception) as refused:
            location_definitions(f"{module}.definitions")
    finally:
        for loaded in [n for n in sys.modules if n.startswith(module)]:
            del sys.modules[loaded]
    error, said = refused.value, ""
    while error is not None:  # what `dg check defs` prints: the error and its causes
        said += str(error)
        error = error.__cause__ or error.__context__
    assert f"{module}/defs/{name}/defs.yaml" in said and attribute in said, said
