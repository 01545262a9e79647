"""A user's ``payments`` with its day files declared ``format: parquet``, as the user runs
it: the project's own definitions (in process), ``pipeline-assets files`` and ``verify``.

Its days are built; pyarrow reads each back with the declared types and exactly the
warehouse's rows of the day; DuckDB and Polars read exactly the days the listing names;
a rebuild of an unchanged day writes the same bytes; a damaged day leaves the listing and
is named by ``verify``, whose printed command restores it; and a file set switched from
JSON to Parquet has every committed day rebuilt once by its refresh sensor, each JSON
file removed once its Parquet day is committed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import build_sensor_context

from pipeline_assets.core import sensing
from pipeline_assets.core.daily_files.views import day_rows
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.table.declare import declare as declare_spec
from pipeline_assets.core.times import UTC
from pipeline_assets.core.verify import files as files_check
from pipeline_assets.location import location_definitions

from .table_sources import stamp
from .tables import PAYMENTS_ATTRIBUTES, in_format
from .test_shapes_story import Shop, day
from .user_project import declare

DAYS = [day(n) for n in range(1, 8)]
# payments' file columns as Parquet types them (docs/contract.md, "Types")
TYPES = {
    "payment_id": pa.int64(),
    "attempt": pa.int64(),
    "amount_cents": pa.int64(),
    "fee": pa.decimal128(10, 2),
    "note": pa.string(),
    "refundable": pa.bool_(),
    "settle_on": pa.date32(),
    "modified_at": pa.timestamp("us", tz="UTC"),
}


def make_shop(tmp_path, instance, cli, monkeypatch, form: str) -> Shop:
    made = Shop(
        tmp_path, instance, cli, monkeypatch, form, tables={"payments": PAYMENTS_ATTRIBUTES}
    )
    app = made.apps["payments"]
    app.create()
    for n in range(1, 15):  # two captured of every three, over the week
        app.put(n, stamp(f"2026-01-{1 + n % 7:02}T{8 + n % 9:02}:30"), filed=n % 3 != 0)
    made.load("payments")
    made.build("payments", DAYS[0], DAYS[-1])
    return made


@pytest.fixture
def shop(tmp_path, instance, cli, monkeypatch):
    made = make_shop(tmp_path, instance, cli, monkeypatch, "parquet")
    yield made
    made.dispose()


def folder(shop: Shop) -> Path:
    return shop.root / "data" / "captured_payments"


def listed(shop: Shop) -> list[dict]:
    code, out, err = shop.cli("files", "-m", f"{shop.module}.definitions", "--json", **shop.env)
    assert code == 0, err
    return json.loads(out)


def typed(row: dict) -> dict:
    """A row as the day views give it (JSON forms) in the values Parquet holds."""
    return {
        **row,
        "fee": Decimal(row["fee"]),
        "settle_on": None if row["settle_on"] is None else date.fromisoformat(row["settle_on"]),
        "modified_at": datetime.fromisoformat(row["modified_at"]),
    }


def test_each_day_reads_back_typed_with_the_warehouse_rows_and_readers_take_the_listing(shop):
    spec = shop.specs["payments"]
    warehouse = make_engine(shop.env["WAREHOUSE_DATABASE_URL"], role="warehouse")
    try:
        expected = day_rows(warehouse, DAYS, UTC, spec=spec, files=spec.daily_files[0])
    finally:
        warehouse.dispose()
    assert sum(map(len, expected.values())) == 10  # the captured ones, on five days
    entries = listed(shop)
    assert [(e["files"], e["day"], e["format"]) for e in entries] == [
        ("captured_payments", d, "parquet") for d in DAYS
    ]
    for entry in entries:
        path = folder(shop) / f"{entry['day']}.parquet"
        assert entry["path"] == str(path)
        # pyarrow's own reader (on this thread: its read-ahead threads can abort a
        # process at exit, apache/arrow#34314, and this is a pytest worker)
        table = pq.read_table(path, use_threads=False, pre_buffer=False)
        assert dict(zip(table.schema.names, table.schema.types, strict=True)) == TYPES
        assert table.to_pylist() == [typed(r) for r in expected[entry["day"]]]
        assert (entry["rows"], entry["sha256"]) == (
            table.num_rows,
            hashlib.sha256(path.read_bytes()).hexdigest(),
        )
        sorting = pq.ParquetFile(path).metadata.row_group(0).sorting_columns
        assert [table.schema.names[s.column_index] for s in sorting] == ["payment_id", "attempt"]
    paths = [e["path"] for e in entries]
    fees = sum(Decimal(r["fee"]) for rows in expected.values() for r in rows)
    found = duckdb.sql(f"SELECT count(*), sum(fee) FROM read_parquet({paths!r})").fetchall()
    assert found == [(10, fees)]
    frame = pl.scan_parquet(paths).select(pl.len(), pl.col("fee").sum()).collect()
    assert frame.row(0) == (10, fees)
    printed = run_readme_lines(shop)
    assert printed[0] == f"[(10, Decimal('{fees}'))]", printed
    assert re.search(rf"\b10\b.*\b{re.escape(str(fees))}\b", printed[1]), printed  # a frame


def run_readme_lines(shop: Shop) -> list[str]:
    """The README's lines that feed the listing to DuckDB and Polars, run as written (in
    the shop's folder, for its module): what each printed."""
    text = (Path(__file__).parents[1] / "README.md").read_text()
    block = text.split("**Parquet day files.**", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = block.replace("shop.definitions", f"{shop.module}.definitions").splitlines()
    env = {**os.environ, **shop.env, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    out = []
    for line in lines:
        done = subprocess.run(
            line, shell=True, cwd=shop.root, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, (line, done.stderr)
        out.append(done.stdout.strip())
    return out[1:]


def test_a_rebuild_gives_the_same_bytes_and_a_damaged_day_is_named_and_repaired(shop, monkeypatch):
    monkeypatch.setattr(files_check, "HASHED_DAYS", 2)  # verify reads the week in four parts
    before = {p.name: p.read_bytes() for p in folder(shop).glob("*.parquet")}
    assert len(before) == len(DAYS)
    shop.build("payments", DAYS[0], DAYS[-1])
    assert {p.name: p.read_bytes() for p in folder(shop).glob("*.parquet")} == before

    damaged = folder(shop) / f"{day(3)}.parquet"
    damaged.write_bytes(before[damaged.name][:-9])  # truncated, as a full disk leaves it
    assert day(3) not in [e["day"] for e in listed(shop)]
    report = shop.verify("payments")
    (bad,) = [f for f in report["files"] if f["day"] == day(3)]
    assert bad["state"] == "uncommitted" and "sha256" in bad["detail"], bad
    assert [c for c in report["repair"] if day(3) in c], report["repair"]
    shop.repair("payments")  # runs the printed commands; verify is clean after them
    assert damaged.read_bytes() == before[damaged.name]
    assert [e["day"] for e in listed(shop)] == DAYS


def test_switching_a_file_set_from_json_to_parquet_rebuilds_every_day_once(
    tmp_path, instance, cli, monkeypatch
):
    shop = make_shop(tmp_path, instance, cli, monkeypatch, "json")
    try:
        json_days = sorted(p.name for p in folder(shop).glob("2026-*.json"))
        assert len(json_days) == len(DAYS)
        # the user edits the declaration; the location loads it anew
        declare(
            shop.root, "payments", in_format(PAYMENTS_ATTRIBUTES, "parquet"), module=shop.module
        )
        for name in [n for n in sys.modules if n.startswith(shop.module)]:
            del sys.modules[name]
        shop.defs = location_definitions(f"{shop.module}.definitions")
        shop.specs["payments"] = declare_spec(in_format(PAYMENTS_ATTRIBUTES, "parquet"))
        stale = shop.verify("payments")
        assert sorted(f["day"] for f in stale["files"] if f.get("stale")) == DAYS
        assert all("json" in f["detail"] for f in stale["files"] if f.get("stale"))
        assert {e["format"] for e in listed(shop)} == {"json"}  # still committed, as JSON

        sensor = shop.defs.resolve_sensor_def("captured_payments_refresh_sensor")
        cursor = sensing.RefreshCursor(after=shop.last_load("payments")).to_cursor()
        asked = []
        for _ in range(2):  # two ticks: the second finds nothing left to rebuild
            with build_sensor_context(
                instance=instance, cursor=cursor, definitions=shop.defs
            ) as context:
                result = sensor.evaluate_tick(context)
            cursor = result.cursor
            for request in result.run_requests:
                span = [request.tags.get(t, request.partition_key) for t in RANGE_TAGS]
                asked.append(tuple(span))
                shop.build("payments", *span)
        assert asked == [(DAYS[0], DAYS[-1])]
        assert sorted(p.name for p in folder(shop).glob("2026-*.json")) == []
        assert [(e["day"], e["format"]) for e in listed(shop)] == [(d, "parquet") for d in DAYS]
        assert shop.verify("payments")["repair"] == []
    finally:
        shop.dispose()


RANGE_TAGS = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")
