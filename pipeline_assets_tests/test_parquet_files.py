"""Parquet day files, below Dagster: the types each declared kind is written as, the same
bytes from either side a day is built from (rows, or the warehouse's Arrow tables), the
values read back, the refusals that write nothing, and the committed-days listing."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline_assets.core.daily_files import (
    DayFilesError,
    committed_files,
    day_status,
    read_committed_days,
    shape_of,
    write_day_files,
)
from pipeline_assets.core.daily_files.parquet import (
    WRITER,
    parquet_bytes,
    parquet_schema,
    read_parquet,
    view_tables,
)
from pipeline_assets.core.daily_files.views import json_reader
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.table.spec import TableSpec
from pipeline_assets.core.times import EPOCH, zone

from .tables import PAYMENTS, in_parquet
from .test_day_views import (
    MIXED,
    OVERRIDES,
    ZONES,
    day_number,
    days_of_rows,
    rows_of,
    stored_rows,
    stored_tables,
)

SPECS = {"payments": in_parquet(PAYMENTS), "mixed": in_parquet(MIXED)}
EVERY_KIND = in_parquet(
    declare(
        {
            "table": "kinds",
            "primary_key": ["id", "at"],
            "cursor": "at",
            "columns": {
                "id": "integer",
                "at": "timestamp",
                "name": {"type": "text", "nullable": True},
                "exact": "decimal",
                "money": "decimal(10,2)",
                "huge": {"type": "decimal(40,5)", "nullable": True},
                "ratio": "float",
                "ok": "boolean",
                "on": "date",
            },
            "daily_files": [{"name": "kinds_days", "format": "parquet"}],
        }
    )
)
DAY = "2026-01-25"


def test_each_kind_is_written_as_its_parquet_type():
    assert parquet_schema(EVERY_KIND) == pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("name", pa.string()),
            pa.field("exact", pa.string(), nullable=False),  # plain decimal: its exact text
            pa.field("money", pa.decimal128(10, 2), nullable=False),
            pa.field("huge", pa.decimal256(40, 5)),
            pa.field("ratio", pa.float64(), nullable=False),
            pa.field("ok", pa.bool_(), nullable=False),
            pa.field("on", pa.date32(), nullable=False),
        ]
    )
    row = {
        "id": 7,
        "at": "2026-01-25T10:00:00+01:00",
        "name": None,
        "exact": "0012.50",
        "money": "3.1",
        "huge": Decimal("12345678901234567890.12345"),
        "ratio": 0.1,
        "ok": True,
        "on": "2026-02-28",
    }
    data, rows = parquet_bytes(DAY, [row], EVERY_KIND)
    assert rows == 1
    assert read_parquet(data).to_pylist() == [
        {
            **row,
            "at": datetime(2026, 1, 25, 9, tzinfo=timezone.utc),
            "exact": "0012.50",  # as the source spelled it
            "money": Decimal("3.10"),
            "on": date(2026, 2, 28),
        }
    ]
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    assert meta.format_version == WRITER["version"]
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert [s.column_index for s in meta.row_group(0).sorting_columns] == [0, 1]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"money": "3.125"}, "more than 2 decimal places"),
        ({"money": "123456789.00"}, "digits before the point"),
        ({"on": "2026-02-30"}, "'2026-02-30'"),
        ({"ratio": float("nan")}, "finite"),
        ({"ok": None}, "ok"),
        ({"at": "2026-01-25T10:00:00"}, "no UTC offset"),
    ],
)
def test_a_value_the_file_cannot_hold_is_refused_and_nothing_is_written(change, said, tmp_path):
    row = {
        "id": 1,
        "at": "2026-01-25T10:00:00+00:00",
        "name": "x",
        "exact": "1",
        "money": "1.00",
        "huge": None,
        "ratio": 1.0,
        "ok": False,
        "on": DAY,
    }
    days = {DAY: [row], "2026-01-26": [{**row, **change}]}
    with pytest.raises(DayFilesError, match="2026-01-26") as caught:
        write_day_files(tmp_path, days, run_id="r1", written_at=DAY, spec=EVERY_KIND)
    assert said in str(caught.value)
    assert list(tmp_path.iterdir()) in ([], [tmp_path / "_committed"])


def test_a_key_given_twice_is_refused_from_rows_and_from_tables():
    row = {"id": 1, "at": "2026-01-25T10:00:00+00:00", "name": "x", "exact": "1"}
    row |= {"money": "1.00", "huge": None, "ratio": 1.0, "ok": False, "on": DAY}
    twice = [row, {**row, "name": "y"}]
    for given_as in (twice, pa.Table.from_pylist(twice)):
        with pytest.raises(DayFilesError, match="id=1, at=.* appears twice"):
            parquet_bytes(DAY, given_as, EVERY_KIND)


@pytest.mark.parametrize("name", sorted(SPECS))
@given(data=st.data())
@settings(max_examples=40, deadline=None)
def test_rows_and_stored_tables_give_the_same_bytes_and_read_back_as_declared(name, data):
    """For any rows as a load stores them, any zone and any batching: the day built from
    the rows (the writer's checks) and from the warehouse's Arrow tables (the files
    asset's and verify's path) are the same bytes, and hold each value as its type."""
    spec = SPECS[name]
    files = spec.daily_files[0]
    tz = zone(data.draw(st.sampled_from(ZONES), label="zone"))
    parsed = data.draw(rows_of(spec, **OVERRIDES[name]), label="rows")
    stored = stored_rows(spec, parsed)
    numbers = {n: (EPOCH + timedelta(days=n)).isoformat() for n in days_of_rows(spec, stored, tz)}
    cuts = data.draw(st.integers(0, 4), label="cuts")
    tables = view_tables(stored_tables(spec, stored, tz, cuts), numbers, spec, files)
    readers = {n: json_reader(spec.column(n).type, tz) for n in files.columns}
    for number, day in numbers.items():
        picked = [
            (p, s)
            for p, s in zip(parsed, stored, strict=True)
            if day_number(spec, s[spec.cursor], tz) == number and files.matches(p)
        ]
        rows = [{n: readers[n](s[n]) for n in files.columns} for _, s in picked]
        built = parquet_bytes(day, rows, spec, files)
        assert parquet_bytes(day, tables[day], spec, files) == built
        back = read_parquet(built[0])
        assert back.schema == parquet_schema(spec, files)
        want = sorted(
            ({n: _held(spec, n, p[n]) for n in files.columns} for p, _ in picked),
            key=lambda r: tuple(r[k] for k in spec.primary_key),
        )
        assert back.to_pylist() == want


def _held(spec: TableSpec, name: str, value):
    """A parsed value as a Parquet file holds it: a plain decimal as its stored text."""
    kind = spec.column(name).type
    if value is not None and kind.kind == "decimal" and kind.precision is None:
        return kind.stored(value)
    return value


def test_the_listing_names_committed_days_only_and_readers_get_tables(tmp_path):
    spec = SPECS["payments"]
    files = spec.daily_files[0]
    row = {"payment_id": 1, "attempt": 1, "amount_cents": 5, "fee": "1.00", "note": None}
    row |= {"refundable": True, "settle_on": None, "modified_at": "2026-01-25T10:00:00+00:00"}
    days = {"2026-01-24": [], DAY: [row], "2026-01-26": [row]}
    write_day_files(tmp_path, days, run_id="r1", written_at=DAY, spec=spec)
    shape = shape_of(spec, files)
    got = committed_files(tmp_path, files.name, shape)
    assert [(e["day"], e["rows"], e["format"]) for e in got] == [
        ("2026-01-24", 0, "parquet"),
        (DAY, 1, "parquet"),
        ("2026-01-26", 1, "parquet"),
    ]
    assert got[1]["path"] == str(tmp_path / f"{DAY}.parquet")
    (tmp_path / "2026-01-26.parquet").write_bytes(b"PAR1 not a file PAR1")
    (tmp_path / "2026-01-27.parquet").write_bytes((tmp_path / f"{DAY}.parquet").read_bytes())
    assert [e["day"] for e in committed_files(tmp_path, files.name, shape)] == [
        "2026-01-24",
        DAY,
    ]  # neither the damaged day nor a file no manifest lists
    assert day_status(tmp_path, "2026-01-27").state == "uncommitted"
    read = read_committed_days(tmp_path, ["2026-01-24", DAY], shape=shape)
    assert read[DAY].schema == parquet_schema(spec, files) and read["2026-01-24"].num_rows == 0
    stale = shape_of(PAYMENTS, PAYMENTS.daily_files[0])  # declared JSON again
    assert all(e.get("stale") for e in committed_files(tmp_path, files.name, stale))
