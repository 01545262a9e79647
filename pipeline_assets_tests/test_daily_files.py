"""The file layer of ``paid_orders`` (core/daily_files/), on real files: a folder under
tmp_path, and (the same tests) a bucket on the S3-compatible server the tests start. The
tests of the protocol itself (crashes, racing writers, a format switch) run it with the
day files in JSON and in Parquet (``ORDERS_PARQUET``)."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from upath import UPath

from pipeline_assets.core import daily_files as df
from pipeline_assets.core.crash import SimulatedCrash
from pipeline_assets.core.daily_files import (
    COMMITTED,
    DAY_FILE_RE,
    NOT_BUILT,
    UNCOMMITTED,
    DayFilesError,
    UncommittedDayError,
    day_file_path,
    day_status,
    describe_days,
    manifest_path,
    pointer_path,
    read_committed_day,
    read_committed_days,
    serialize_day,
    write_day_files,
)
from pipeline_assets.core.daily_files.parquet import parquet_bytes
from pipeline_assets.core.errors import PipelineError
from pipeline_assets.core.table import ORDERS

from .model import parquet_day_rows
from .stores import all_files, temp_files
from .tables import in_parquet

WRITTEN_AT = "2026-01-26T00:05:00+00:00"  # a fixed clock
DAY = "2026-01-25"


def row(order_id, amount="22.00", updated_at="2026-01-25T03:00:00+00:00", status="paid"):
    return {"order_id": order_id, "status": status, "amount": amount, "updated_at": updated_at}


def write(folder, days, run_id="run-1", **kwargs):
    return write_day_files(
        folder, days, run_id=run_id, written_at=WRITTEN_AT, **{"spec": ORDERS, **kwargs}
    )


# paid_orders with its day files in Parquet: the same rows, the same protocol
ORDERS_PARQUET = in_parquet(ORDERS)
SPECS = {"json": ORDERS, "parquet": ORDERS_PARQUET}
FORMS = list(SPECS)  # for pytest.mark.parametrize


def as_read(form: str, rows: list[dict]) -> list[dict]:
    """``rows`` as a reader gets a committed day of them back in ``form``: a JSON day's
    rows as written, a Parquet day's table (``.to_pylist()``) of typed values."""
    if form == "json":
        return rows
    return parquet_day_rows(rows, {c.name: str(c.type) for c in ORDERS.columns})


def rows_read(got) -> list[dict]:
    """A committed day as :func:`read_committed_days` gives it, as a list of rows."""
    return got.to_pylist() if isinstance(got, pa.Table) else got


# --- serialization -----------------------------------------------------------------------

ONE = (
    b'[{"amount":"22.00","order_id":1,"status":"paid","updated_at":"2026-01-25T03:00:00+00:00"}]\n'
)
TWO = (
    b'[{"amount":"9.50","order_id":1,"status":"paid","updated_at":"2026-01-25"},'
    b'{"amount":"22.00","order_id":7,"status":"paid",'
    b'"updated_at":"2026-01-25T03:00:00+00:00"}]\n'
)


@pytest.mark.parametrize(
    "rows, expected",
    [
        ([], b"[]\n"),
        ([row(1)], ONE),
        # Input order and dict key order never change the bytes.
        ([row(7), row(1, "9.50", "2026-01-25")], TWO),
        ([row(1, "9.50", "2026-01-25"), row(7)], TWO),
        ([dict(reversed(list(row(7).items()))), row(1, "9.50", "2026-01-25")], TWO),
        # Exact values given as Decimal / datetime are written as the same text.
        ([row(1, Decimal("22.00"), datetime(2026, 1, 25, 3, tzinfo=timezone.utc))], ONE),
    ],
)
def test_serialize_day_is_byte_deterministic(rows, expected):
    """Same rows, in any order or form, give the same bytes: reruns rewrite identical files."""
    assert serialize_day(DAY, rows, spec=ORDERS) == expected
    assert serialize_day(DAY, list(reversed(rows)), spec=ORDERS) == expected


@pytest.mark.parametrize(
    "rows, message",
    [
        ([row(1, 22.0)], "amount 22.0 must be exact decimal text"),
        ([row(1, "22,00")], "amount '22,00' must be exact decimal text"),
        ([row(True)], "order_id True must be an integer"),
        ([row("1")], "order_id '1' must be an integer"),
        ([row(1, status="")], "status '' must be non-empty text"),
        ([row(1, updated_at="yesterday")], "updated_at 'yesterday' is not ISO-8601"),
        ([{"order_id": 1, "status": "paid", "amount": "1.00"}], "missing: ['updated_at']"),
        ([{**row(1), "day": DAY}], "unexpected: ['day']"),
        ([row(3), row(3, "1.00")], "order 3 appears twice"),
    ],
)
def test_serialize_day_refuses_rows_it_cannot_store_exactly(rows, message):
    """A row that would be stored inexactly or twice fails, naming the day and the value."""
    with pytest.raises(DayFilesError) as err:
        serialize_day(DAY, rows, spec=ORDERS)
    assert message in str(err.value)
    assert DAY in str(err.value)


@pytest.mark.parametrize(
    "day",
    [
        "2026-1-25",
        "2026-02-30",
        "25-01-2026",
        "2026-01-25.json",
        20260125,
    ],
)
def test_days_must_be_real_calendar_days(day, tmp_path):
    with pytest.raises(DayFilesError):
        day_file_path(tmp_path, day)


# --- names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "final",
    [
        "2026-01-25.json",
        "_manifest_0f1e2d3c-aaaa-bbbb-cccc-1234567890ab.json",
        "_committed/2026-01-25.json",
        "_committed/_head.json",
    ],
)
def test_temp_names_are_never_day_files_or_manifests(final, tmp_path):
    """A reader listing ``YYYY-MM-DD.json`` or ``_manifest_*.json`` never picks up a temp."""
    for _ in range(200):
        name = df.temp_path_for(tmp_path / final).name
        assert name.startswith(".") and name.endswith(".partial")
        assert df.is_temp_name(name)
        assert not df.DAY_FILE_RE.fullmatch(name)
        assert not df.MANIFEST_RE.fullmatch(name)
        assert not name.endswith(".json")


def test_paths(tmp_path):
    assert day_file_path(tmp_path, DAY) == tmp_path / "2026-01-25.json"
    assert manifest_path(tmp_path, "r1") == tmp_path / "_manifest_r1.json"
    assert pointer_path(tmp_path, DAY) == tmp_path / "_committed" / "2026-01-25.json"
    with pytest.raises(DayFilesError, match="cannot name a manifest file"):
        manifest_path(tmp_path, "../escape")


# --- a run's files -----------------------------------------------------------------------


# the fingerprint of paid_orders' shape, from the rule: the first 16 hex digits of the
# SHA-256 of its description as compact, key-sorted, ASCII JSON
PAID_ORDERS_SHAPE = hashlib.sha256(
    json.dumps(
        {
            "table": "orders",
            "primary_key": ["order_id"],
            "cursor": "updated_at",
            "columns": {
                "order_id": "integer",
                "status": "text",
                "amount": "decimal",
                "updated_at": "timestamp",
            },
            "where": {"status": ["paid"]},
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
    ).encode()
).hexdigest()[:16]


def test_write_leaves_day_files_manifest_and_pointers(paid_folder):
    folder = paid_folder
    written = write(
        folder, {"2026-01-26": [], DAY: [row(1)]}, watermark="2026-01-25T03:00:00+00:00"
    )
    assert (folder / "2026-01-25.json").read_bytes() == ONE
    assert (folder / "2026-01-26.json").read_bytes() == b"[]\n"
    sha_one, sha_empty = hashlib.sha256(ONE).hexdigest(), hashlib.sha256(b"[]\n").hexdigest()
    manifest = json.loads((folder / "_manifest_run-1.json").read_bytes())
    assert manifest == {
        "run_id": "run-1",
        "sequence": 1,
        "days_written": ["2026-01-25", "2026-01-26"],
        "watermark": "2026-01-25T03:00:00+00:00",
        "written_at": WRITTEN_AT,
        "files": {
            "2026-01-25": {"rows": 1, "sha256": sha_one},
            "2026-01-26": {"rows": 0, "sha256": sha_empty},
        },
        # the shape the files were written with: paid_orders' columns, types and filter,
        # fingerprinted by the rule of docs/contract.md
        "declaration": PAID_ORDERS_SHAPE,
        "columns": {
            "amount": "decimal",
            "order_id": "integer",
            "status": "text",
            "updated_at": "timestamp",
        },
    }
    assert json.loads(pointer_path(folder, DAY).read_bytes()) == {
        "day": DAY,
        "manifest": "_manifest_run-1.json",
        "run_id": "run-1",
        "sequence": 1,
        "sha256": sha_one,
        "rows": 1,
    }
    assert json.loads((folder / "_committed" / "_head.json").read_bytes()) == {
        "manifest": "_manifest_run-1.json",
        "sequence": 1,
        "state": "done",
    }
    assert written.days_written == ("2026-01-25", "2026-01-26")
    assert written.rows == {"2026-01-25": 1, "2026-01-26": 0}
    assert written.total_rows == 1
    assert written.sha256 == {"2026-01-25": sha_one, "2026-01-26": sha_empty}
    assert temp_files(folder) == []
    lock = [] if isinstance(folder, UPath) else [".lock"]  # no lock file on an object store
    assert sorted(all_files(folder)) == lock + [
        "2026-01-25.json",
        "2026-01-26.json",
        "_committed/2026-01-25.json",
        "_committed/2026-01-26.json",
        "_committed/_head.json",
        "_manifest_run-1.json",
    ]


def test_sequences_increase_and_reruns_rewrite_identical_bytes(paid_folder):
    first = write(paid_folder, {DAY: [row(1)]}, run_id="a")
    second = write(paid_folder, {DAY: [row(1)]}, run_id="b")
    assert (first.sequence, second.sequence) == (1, 2)
    assert first.sha256 == second.sha256
    assert day_status(paid_folder, DAY).manifest == "_manifest_b.json"


def test_bad_rows_never_touch_the_folder(paid_folder):
    write(paid_folder, {DAY: [row(1)]})
    before = all_files(paid_folder)
    with pytest.raises(DayFilesError, match="2026-01-26"):
        write(paid_folder, {DAY: [row(2)], "2026-01-26": [row(1, 1.5)]}, run_id="bad")
    assert all_files(paid_folder) == before


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"written_at": "soon"}, "written_at 'soon' must be an ISO-8601 timestamp"),
        ({"watermark": 5}, "watermark 5 must be ISO-8601 text or None"),
        ({"run_id": "a/b"}, "run id 'a/b' cannot name a manifest file"),
    ],
)
def test_write_arguments_are_checked(tmp_path, kwargs, message):
    args = {"run_id": "r", "written_at": WRITTEN_AT, "watermark": None, "spec": ORDERS, **kwargs}
    with pytest.raises(DayFilesError) as err:
        write_day_files(tmp_path, {DAY: []}, **args)
    assert message in str(err.value)


# --- committed days ----------------------------------------------------------------------

NEW = [row(1, "30.00")]
NEW_BYTES = serialize_day(DAY, NEW, spec=ORDERS)
OLD_BYTES = serialize_day(DAY, [row(1)], spec=ORDERS)


Crash = SimulatedCrash  # stands for the process dying at a named crash point


@contextmanager
def crash_at(point):
    """Make the next pass through the crash point ``point`` raise :class:`SimulatedCrash`."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PIPELINE_CRASH_AT", point)
        mp.setenv("PIPELINE_CRASH_MODE", "raise")
        mp.delenv("PIPELINE_CRASH_ONCE_FILE", raising=False)
        yield


def good(folder):
    write(folder, {DAY: [row(1)]})


def edited_by_hand(folder):
    good(folder)
    day_file_path(folder, DAY).write_bytes(ONE.replace(b"22.00", b"23.00"))


def truncated_manifest(folder):
    good(folder)
    path = manifest_path(folder, "run-1")
    path.write_bytes(path.read_bytes()[:40])


def missing_manifest(folder):
    good(folder)
    manifest_path(folder, "run-1").unlink()


def missing_pointer(folder):
    good(folder)
    pointer_path(folder, DAY).unlink()


def corrupt_pointer(folder):
    good(folder)
    pointer_path(folder, DAY).write_bytes(b'{"manifest": "_manif')


def missing_file(folder):
    good(folder)
    day_file_path(folder, DAY).unlink()


def newer_manifest(folder):
    good(folder)
    write(folder, {DAY: NEW}, run_id="run-2")


def older_bytes_under_newer_manifest(folder):
    # The old run's bytes are put back: the older manifest matches them, the newest does not.
    newer_manifest(folder)
    day_file_path(folder, DAY).write_bytes(OLD_BYTES)


def crash_before_manifest(folder):
    good(folder)
    with crash_at("files_before_manifest"), pytest.raises(Crash):
        write(folder, {DAY: NEW}, run_id="run-2")


def crash_before_manifest_same_bytes(folder):
    good(folder)
    with crash_at("files_before_manifest"), pytest.raises(Crash):
        write(folder, {DAY: [row(1)]}, run_id="run-2")


def crash_before_the_manifest_is_visible(folder):
    good(folder)
    with crash_at("manifest_before_rename"), pytest.raises(Crash):
        write(folder, {DAY: NEW}, run_id="run-2")


def crash_before_the_day_file_is_visible(folder):
    good(folder)
    with crash_at("day_file_before_rename"), pytest.raises(Crash):
        write(folder, {DAY: NEW}, run_id="run-2")


def crash_between_manifest_and_pointer(folder):
    good(folder)
    with crash_at("files_after_manifest"), pytest.raises(Crash):
        write(folder, {DAY: NEW}, run_id="run-2")


def crash_between_pointers_and_head(folder):
    good(folder)
    with crash_at("files_after_pointers"), pytest.raises(Crash):
        write(folder, {DAY: NEW}, run_id="run-2")


def crash_before_any_pointer_on_first_run(folder):
    with crash_at("files_after_manifest"), pytest.raises(Crash):
        write(folder, {DAY: NEW}, run_id="run-2")


def file_without_manifest(folder):
    if not isinstance(folder, UPath):
        folder.mkdir(exist_ok=True)
    day_file_path(folder, DAY).write_bytes(ONE)


def nothing(folder):
    pass


@pytest.mark.parametrize(
    "scenario, state, manifest, data, reason",
    [
        (good, COMMITTED, "_manifest_run-1.json", OLD_BYTES, ""),
        (newer_manifest, COMMITTED, "_manifest_run-2.json", NEW_BYTES, ""),
        (crash_before_manifest_same_bytes, COMMITTED, "_manifest_run-1.json", OLD_BYTES, ""),
        (crash_between_manifest_and_pointer, COMMITTED, "_manifest_run-2.json", NEW_BYTES, ""),
        (crash_between_pointers_and_head, COMMITTED, "_manifest_run-2.json", NEW_BYTES, ""),
        (crash_before_the_day_file_is_visible, COMMITTED, "_manifest_run-1.json", OLD_BYTES, ""),
        (crash_before_any_pointer_on_first_run, COMMITTED, "_manifest_run-2.json", NEW_BYTES, ""),
        (edited_by_hand, UNCOMMITTED, "_manifest_run-1.json", None, "edited by hand"),
        (
            older_bytes_under_newer_manifest,
            UNCOMMITTED,
            "_manifest_run-2.json",
            None,
            "recorded in _manifest_run-2.json",
        ),
        (
            crash_before_manifest,
            UNCOMMITTED,
            "_manifest_run-1.json",
            None,
            "recorded in _manifest_run-1.json",
        ),
        (
            crash_before_the_manifest_is_visible,
            UNCOMMITTED,
            "_manifest_run-1.json",
            None,
            "recorded in _manifest_run-1.json",
        ),
        (truncated_manifest, UNCOMMITTED, None, None, "_manifest_run-1.json is not valid JSON"),
        (missing_manifest, UNCOMMITTED, None, None, "manifest _manifest_run-1.json is missing"),
        (missing_pointer, UNCOMMITTED, None, None, "no manifest lists it"),
        (
            corrupt_pointer,
            UNCOMMITTED,
            None,
            None,
            "pointer _committed/2026-01-25.json is unreadable",
        ),
        (missing_file, UNCOMMITTED, "_manifest_run-1.json", None, "the file is missing"),
        (file_without_manifest, UNCOMMITTED, None, None, "no manifest lists it"),
        (nothing, NOT_BUILT, None, None, "never built"),
    ],
)
def test_committed_check(paid_folder, scenario, state, manifest, data, reason):
    """A day counts only when the newest manifest listing it matches its bytes.

    The crash cases stop a run at a named step: before the manifest a changed day is
    uncommitted (or still its identical old version); after it, the unfinished run's
    manifest is the newest one and the day reads at its new version, never a mix. The
    same on local disk and on the bucket.
    """
    folder = paid_folder
    scenario(folder)
    status = day_status(folder, DAY)
    assert (status.state, status.manifest) == (state, manifest)
    assert reason in status.reason
    if state == COMMITTED:
        assert status.reason == ""
        assert read_committed_day(folder, DAY) == json.loads(data)
    else:
        # a dead writer's head stays "writing": on the bucket a reader would first wait
        # for it (test_a_reader_that_meets_a_dead_writer_reads_the_next_writers_version)
        with pytest.raises(UncommittedDayError) as err:
            read_committed_day(folder, DAY, wait_for_writer=0.5)
        message = str(err.value)
        assert message.startswith(f"paid_orders day {DAY} is not committed: ")
        assert message.endswith(
            "Rebuild it: dagster asset materialize -m pipeline_assets.definitions "
            f"--select paid_orders,daily_revenue --partition {DAY}"
        )
        assert err.value.days == (DAY,)
        assert isinstance(err.value, PipelineError)  # a user's error, one line, caught at edges
    assert temp_files(folder) == []


def test_the_next_write_finishes_a_crashed_runs_pointers(paid_folder):
    folder = paid_folder
    good(folder)
    with crash_at("files_after_manifest"), pytest.raises(Crash):
        write(folder, {DAY: NEW, "2026-01-26": []}, run_id="run-2")
    assert not pointer_path(folder, "2026-01-26").exists()
    write(folder, {"2026-01-27": []}, run_id="run-3")
    assert json.loads(pointer_path(folder, DAY).read_bytes())["manifest"] == "_manifest_run-2.json"
    assert [(s.day, s.state, s.manifest, s.sequence) for s in describe_days(folder)] == [
        ("2026-01-25", COMMITTED, "_manifest_run-2.json", 2),
        ("2026-01-26", COMMITTED, "_manifest_run-2.json", 2),
        ("2026-01-27", COMMITTED, "_manifest_run-3.json", 3),
    ]


def test_deleted_pointer_folder_is_rebuilt_by_the_next_write(paid_folder):
    folder = paid_folder
    write(folder, {DAY: [row(1)]}, run_id="a")
    write(folder, {DAY: NEW, "2026-01-26": []}, run_id="b")
    for name in all_files(folder):
        if name.startswith("_committed/"):
            (folder / name).unlink()
    if not isinstance(folder, UPath):
        (folder / "_committed").rmdir()
    assert day_status(folder, DAY).state == UNCOMMITTED
    written = write(folder, {"2026-01-27": []}, run_id="c")
    assert written.sequence == 3
    assert [(s.day, s.state, s.manifest) for s in describe_days(folder)] == [
        ("2026-01-25", COMMITTED, "_manifest_b.json"),
        ("2026-01-26", COMMITTED, "_manifest_b.json"),
        ("2026-01-27", COMMITTED, "_manifest_c.json"),
    ]


def test_describe_and_read_many_days(paid_folder):
    folder = paid_folder
    write(folder, {"2026-01-24": [row(3)], DAY: [row(1)], "2026-01-26": []})
    day_file_path(folder, "2026-01-26").write_bytes(b"[]")  # edited: no newline
    statuses = describe_days(folder, ["2026-01-23", "2026-01-24", DAY, "2026-01-26"])
    assert [(s.day, s.state, s.rows) for s in statuses] == [
        ("2026-01-23", NOT_BUILT, None),
        ("2026-01-24", COMMITTED, 1),
        ("2026-01-25", COMMITTED, 1),
        ("2026-01-26", UNCOMMITTED, None),
    ]
    assert statuses[3].repair_command.endswith("--partition 2026-01-26")
    assert read_committed_days(folder, [DAY, "2026-01-24"]) == {
        "2026-01-24": [row(3)],
        DAY: [row(1)],
    }
    with pytest.raises(UncommittedDayError) as err:
        read_committed_days(folder, ["2026-01-23", DAY, "2026-01-26"])
    assert err.value.days == ("2026-01-23", "2026-01-26")
    assert "--partition 2026-01-23\ndagster asset materialize" in str(err.value)
    assert str(err.value).endswith("--partition 2026-01-26")


# --- atomic replace ----------------------------------------------------------------------


def test_a_polling_reader_never_sees_a_partial_file(tmp_path):
    """While a day is rewritten many times, every read parses to one whole version."""
    versions = [
        serialize_day(DAY, [row(i, f"{i}.00") for i in range(1, n)], spec=ORDERS)
        for n in (1, 50, 2000)
    ]
    write(tmp_path, {DAY: []})
    path = day_file_path(tmp_path, DAY)
    stop, seen, bad = threading.Event(), set(), []

    def reader():
        while not stop.is_set():
            data = path.read_bytes()
            if data not in versions:
                bad.append(data[:80])
            seen.add(data)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(150):
            df.atomic_replace(path, versions[i % 3])
    finally:
        stop.set()
        thread.join()
    assert bad == []
    assert len(seen) >= 2
    assert temp_files(tmp_path) == []


def test_no_temp_file_remains_after_a_failed_replace(tmp_path):
    target = tmp_path / "2026-01-25.json"
    target.mkdir()  # renaming a file over a directory fails
    with pytest.raises(df.DayFilesError, match="could not write 2026-01-25.json"):
        df.atomic_replace(target, b"[]\n")
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    "point",
    [
        "day_file_before_rename",
        "files_between_days",
        "files_before_manifest",
        "manifest_before_rename",
        "files_after_manifest",
        "files_after_pointers",
    ],
)
def test_no_temp_file_remains_after_a_crashed_run(paid_folder, point, form):
    """A run raising at a crash point cleans its temp file (a killed one: the next writer).
    A first run commits nothing before its manifest, and its days after it; the next run
    commits the day in the file set's format, in either format."""
    spec = SPECS[form]
    with crash_at(point), pytest.raises(Crash):
        write(paid_folder, {DAY: [row(1)], "2026-01-26": []}, spec=spec)
    assert temp_files(paid_folder) == []
    after_manifest = point in ("files_after_manifest", "files_after_pointers")
    assert day_status(paid_folder, DAY).committed == after_manifest
    write(paid_folder, {DAY: [row(1)]}, run_id="after", spec=spec)
    status = day_status(paid_folder, DAY)
    assert (status.state, status.format, status.file_name) == (COMMITTED, form, f"{DAY}.{form}")
    assert rows_read(read_committed_days(paid_folder, [DAY])[DAY]) == as_read(form, [row(1)])


def test_stale_temp_files_are_cleared_by_the_next_write(tmp_path):
    write(tmp_path, {DAY: []})
    stale = [
        tmp_path / ".2026-01-25.json.4242.deadbeef.partial",
        tmp_path / "_committed" / ".2026-01-25.json.4242.cafe0000.partial",
    ]
    for path in stale:
        path.write_bytes(b'[{"amount":')
    assert temp_files(tmp_path) != []
    assert day_status(tmp_path, DAY).state == COMMITTED
    write(tmp_path, {"2026-01-26": []}, run_id="run-2")
    assert temp_files(tmp_path) == []


# --- a change of format ---------------------------------------------------------------------

SWITCHED = {DAY: [row(1)], "2026-01-26": [row(2, updated_at="2026-01-26T01:00:00+00:00")]}


def day_files(folder) -> set[str]:
    """The day files in ``folder``: ``YYYY-MM-DD.json`` and ``.parquet`` names."""
    return {name for name in all_files(folder) if DAY_FILE_RE.fullmatch(name)}


def states(folder, days) -> dict[str, tuple]:
    """Each day's (state, format, manifest)."""
    return {d: (s.state, s.format, s.manifest) for d in days for s in [day_status(folder, d)]}


def test_a_format_switch_removes_each_json_day_only_once_its_parquet_day_is_committed(
    paid_folder,
):
    """JSON days committed, then the same days written as Parquet. Killed before its
    manifest, the run leaves each ``.json`` the committed day beside a ``.parquet`` no
    manifest lists; killed after its pointers (its head not done), each day is committed
    as Parquet and its ``.json`` is still there. The next write of a day removes that
    day's ``.json``, and only that day's."""
    folder, days = paid_folder, sorted(SWITCHED)
    write(folder, SWITCHED, run_id="json")
    jsons, parquets = ({f"{d}.{form}" for d in days} for form in FORMS)
    assert day_files(folder) == jsons

    with crash_at("files_before_manifest"), pytest.raises(Crash):
        write(folder, SWITCHED, run_id="parquet-1", spec=ORDERS_PARQUET)
    assert day_files(folder) == jsons | parquets
    assert states(folder, days) == {d: (COMMITTED, "json", "_manifest_json.json") for d in days}
    assert read_committed_days(folder, days) == SWITCHED

    with crash_at("files_after_pointers"), pytest.raises(Crash):
        write(folder, SWITCHED, run_id="parquet-2", spec=ORDERS_PARQUET)
    assert day_files(folder) == jsons | parquets
    parquet_2 = (COMMITTED, "parquet", "_manifest_parquet-2.json")
    assert states(folder, days) == {d: parquet_2 for d in days}
    read = read_committed_days(folder, days)
    assert {d: rows_read(got) for d, got in read.items()} == {
        d: as_read("parquet", rows) for d, rows in SWITCHED.items()
    }

    write(folder, {DAY: SWITCHED[DAY]}, run_id="parquet-3", spec=ORDERS_PARQUET)  # a rebuild
    assert day_files(folder) == parquets | {"2026-01-26.json"}
    assert states(folder, days) == {
        DAY: (COMMITTED, "parquet", "_manifest_parquet-3.json"),
        "2026-01-26": parquet_2,
    }
    write(folder, {"2026-01-26": SWITCHED["2026-01-26"]}, run_id="parquet-4", spec=ORDERS_PARQUET)
    assert day_files(folder) == parquets


def test_a_damaged_parquet_day_reads_as_uncommitted_naming_its_rebuild(tmp_path):
    """A truncated ``.parquet`` no longer matches its manifest; one a manifest vouches for
    (its sha256 recorded after the damage) is no Parquet: both read as uncommitted, the
    error naming the day and the command that rebuilds it."""
    folder = tmp_path / "paid_orders"
    write(folder, {DAY: [row(1)], "2026-01-26": []}, spec=ORDERS_PARQUET)
    path = folder / f"{DAY}.parquet"
    damaged = path.read_bytes()[:-9]  # the footer's length and magic bytes gone
    path.write_bytes(damaged)
    sha = hashlib.sha256(damaged).hexdigest()
    rebuild = (
        "Rebuild it: dagster asset materialize -m pipeline_assets.definitions "
        f"--select paid_orders,daily_revenue --partition {DAY}"
    )
    assert day_status(folder, DAY).state == UNCOMMITTED
    for vouched in (False, True):
        if vouched:  # the manifest and the pointer record the damaged bytes' sha256
            for name in ("_manifest_run-1.json", f"_committed/{DAY}.json"):
                doc = json.loads((folder / name).read_bytes())
                (doc["files"][DAY] if "files" in doc else doc)["sha256"] = sha
                (folder / name).write_text(json.dumps(doc))
            assert day_status(folder, DAY).state == COMMITTED  # by its hash: to the reader
        with pytest.raises(UncommittedDayError) as err:
            read_committed_days(folder, ["2026-01-26", DAY])
        assert err.value.days == (DAY,)
        message = str(err.value)
        assert message.startswith(f"paid_orders day {DAY} is not committed: ")
        assert ("not valid Parquet" if vouched else "differs from") in message
        assert message.endswith(rebuild)


# --- two processes -----------------------------------------------------------------------

WRITER_DAYS = [f"2026-01-{d:02d}" for d in range(10, 20)]


def _writer_rows(name: str, day: str) -> list[dict]:
    """Writer ``name``'s rows of ``day``: five orders, its own amount."""
    amount = "1.00" if name == "a" else "2.00"
    return [row(n, amount, f"{day}T0{n}:00:00+00:00") for n in range(1, 6)]


def _writer(folder: str, name: str, rounds: int, form: str = "json") -> None:
    for i in range(rounds):
        days = {day: _writer_rows(name, day) for day in WRITER_DAYS}
        write_day_files(folder, days, run_id=f"{name}-{i}", written_at=WRITTEN_AT, spec=SPECS[form])


@pytest.mark.e2e
def test_two_processes_writing_the_same_days_leave_agreeing_files(tmp_path):
    """Runs never interleave: afterwards every day is committed to the last run's version."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), name, 15)) for name in "ab"]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0, 0]

    manifests = [json.loads(p.read_bytes()) for p in tmp_path.glob("_manifest_*.json")]
    assert len(manifests) == 30
    assert sorted(m["sequence"] for m in manifests) == list(range(1, 31))
    last = max(manifests, key=lambda m: m["sequence"])
    statuses = describe_days(tmp_path)
    assert [s.day for s in statuses] == WRITER_DAYS
    assert {(s.state, s.manifest) for s in statuses} == {
        (COMMITTED, f"_manifest_{last['run_id']}.json")
    }
    for day in WRITER_DAYS:
        data = day_file_path(tmp_path, day).read_bytes()
        assert hashlib.sha256(data).hexdigest() == last["files"][day]["sha256"]
    assert temp_files(tmp_path) == []


def test_a_retried_run_that_dies_twice_before_its_pointers_still_commits(paid_folder):
    """A step retry reuses the run id, so it rewrites the same manifest with a newer
    sequence; if it dies again before the pointers, the head must still vouch for it."""
    folder = paid_folder
    write(folder, {DAY: [row(1)]}, run_id="first")
    for _ in range(2):  # the attempt and its retry, both killed after the manifest
        with crash_at("files_after_manifest"), pytest.raises(Crash):
            write(folder, {DAY: [row(2)]}, run_id="second")
    assert day_status(folder, DAY).committed
    assert [r["order_id"] for r in read_committed_day(folder, DAY)] == [2]


def test_a_reader_that_meets_a_dead_writer_reads_the_next_writers_version(paid_folder):
    """A run died before its manifest. On local disk it released its lock when it died, so
    a reader reports the day uncommitted at once, naming the rebuild, and reads the next
    run's version after it. On the bucket the dead run's head still says "writing", so a
    reader that starts then waits for the next writer and reads its complete version,
    whenever its first look falls: before that writer, during it, or after."""
    folder = paid_folder
    good(folder)
    with crash_at("files_before_manifest"), pytest.raises(Crash):
        write(folder, {DAY: NEW}, run_id="run-2")
    assert day_status(folder, DAY).state == UNCOMMITTED
    if df.open_store(folder).locks:
        with pytest.raises(UncommittedDayError, match="Rebuild it: dagster asset materialize"):
            read_committed_day(folder, DAY)
        write(folder, {DAY: NEW}, run_id="run-3")
        assert read_committed_day(folder, DAY) == NEW
        return
    result = {}
    reader = threading.Thread(target=lambda: result.update(rows=read_committed_day(folder, DAY)))
    reader.start()
    write(folder, {DAY: NEW}, run_id="run-3")
    reader.join(timeout=120)
    assert result["rows"] == NEW


# --- no pool: two writers racing on the bucket ---------------------------------------------


def _version_bytes(form: str, name: str, day: str) -> bytes:
    """The bytes of writer ``name``'s file of ``day`` in ``form``."""
    rows = _writer_rows(name, day)
    if form == "json":
        return serialize_day(day, rows, spec=ORDERS)
    return parquet_bytes(day, rows, ORDERS_PARQUET)[0]


def _check_reads(folder: str, stop_file: str, out: str, form: str = "json") -> None:
    """Read every day until told to stop; record each outcome: a version name or 'uncommitted'."""
    seen = []
    while not os.path.exists(stop_file):
        for day in WRITER_DAYS:
            try:
                rows = rows_read(read_committed_day(folder, day, wait_for_writer=False))
            except UncommittedDayError:
                seen.append("uncommitted")
                continue
            versions = {name: as_read(form, _writer_rows(name, day)) for name in "ab"}
            seen.append(next((name for name, v in versions.items() if v == rows), "WRONG"))
    Path(out).write_text(json.dumps(seen))


# JSON as the racing writers ran before Parquet; Parquet fewer rounds (its runs are slower)
@pytest.mark.parametrize("form, rounds", [("json", 6), ("parquet", 3)])
def test_without_the_pool_racing_writers_on_the_bucket_never_give_a_wrong_day(
    bucket, tmp_path, form, rounds
):
    """The worst case of removing the ``paid_orders_files`` pool on an object store (no
    lock there): two runs write the same days at once. Every read, during and after,
    is a whole version of one run or "uncommitted"; never a mix, never bytes that no
    manifest recorded. A rebuild afterwards commits every day again."""
    folder = f"{bucket}/paid_orders"
    ctx = multiprocessing.get_context("spawn")
    stop, out = tmp_path / "stop", tmp_path / "reads.json"
    reader = ctx.Process(target=_check_reads, args=(folder, str(stop), str(out), form))
    writers = [ctx.Process(target=_writer, args=(folder, name, rounds, form)) for name in "ab"]
    reader.start()
    for proc in writers:
        proc.start()
    for proc in writers:
        proc.join(timeout=300)
    stop.write_text("")
    reader.join(timeout=120)
    assert [proc.exitcode for proc in writers] + [reader.exitcode] == [0, 0, 0]

    seen = json.loads(out.read_text())
    assert seen and "WRONG" not in seen
    statuses = describe_days(folder, expect=form)
    assert [s.day for s in statuses] == WRITER_DAYS
    for status in statuses:
        if status.committed:
            assert status.format == form
            assert status.data in (_version_bytes(form, n, status.day) for n in "ab")
            assert hashlib.sha256(status.data).hexdigest() == status.sha256
        else:
            assert status.state == UNCOMMITTED
    write_day_files(
        folder,
        {day: [] for day in WRITER_DAYS},
        run_id="rebuild",
        written_at=WRITTEN_AT,
        spec=SPECS[form],
    )
    assert {(s.state, s.format) for s in describe_days(folder)} == {(COMMITTED, form)}


@pytest.mark.parametrize("form", FORMS)
def test_a_reader_that_listed_the_bucket_still_sees_what_another_writer_put_after(bucket, form):
    """s3fs can answer a read from a cached listing of the prefix; the store turns that
    cache off, or a day written by another process after a listing would read as missing."""
    folder, spec = f"{bucket}/paid_orders", SPECS[form]
    store = df.open_store(folder)
    write_day_files(store, {DAY: [row(1)]}, run_id="first", written_at=WRITTEN_AT, spec=spec)
    assert df.known_days(store) == [DAY]  # a listing, by this store's filesystem
    other = UPath(folder, anon=False)  # another filesystem instance: another writer
    write_day_files(
        other, {"2026-01-26": [row(2)]}, run_id="second", written_at=WRITTEN_AT, spec=spec
    )
    status = day_status(store, "2026-01-26")
    assert (status.state, status.format) == (COMMITTED, form)
    assert df.known_days(store) == [DAY, "2026-01-26"]
