"""Hostile conditions: a full disk, a read-only warehouse, corrupt manifests.

Each gives a clear error naming the thing, and none loses or corrupts what was
committed before.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from pipeline_assets import demo
from pipeline_assets.core.daily_files import (
    DayFilesError,
    UncommittedDayError,
    day_status,
    read_committed_day,
    write_day_files,
)
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.errors import DatabaseError
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.times import UTC, to_instant
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets_tests.orders import load_orders

from .conftest import NOW
from .support import unavailable

DAY = "2026-01-25"
ROW = {
    "order_id": 105,
    "status": "paid",
    "amount": "22.00",
    "updated_at": "2026-01-25T00:00:00+00:00",
}


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs: a real 'No space left on device'. Needs root (CI runs as root)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        unavailable(
            f"mounting a tmpfs needs root here ({done.stderr.strip()})", ci_hint="CI runs as root"
        )
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


@pytest.mark.e2e
def test_a_full_disk_while_writing_a_day_file_keeps_the_committed_version(tiny_disk):
    folder = tiny_disk / "paid_orders"
    write_day_files(folder, {DAY: [ROW]}, run_id="first", written_at=NOW, spec=ORDERS)
    before = (folder / f"{DAY}.json").read_bytes()
    huge = [dict(ROW, order_id=n) for n in range(1, 5000)]  # far more than 64 KiB

    with pytest.raises(DayFilesError) as err:
        write_day_files(folder, {DAY: huge}, run_id="second", written_at=NOW, spec=ORDERS)

    assert f"could not write {DAY}.json" in str(err.value)
    assert "No space left on device" in str(err.value)
    assert (folder / f"{DAY}.json").read_bytes() == before
    assert read_committed_day(folder, DAY) == [ROW]
    assert [p.name for p in folder.rglob("*.partial")] == []
    assert not (folder / "_manifest_second.json").exists()


@pytest.mark.parametrize("damage", ["truncate", "garbage", "delete"])
def test_a_corrupt_manifest_makes_its_days_uncommitted_with_a_clear_error(tmp_path, damage):
    folder = tmp_path / "paid_orders"
    write_day_files(folder, {DAY: [ROW]}, run_id="run1", written_at=NOW, spec=ORDERS)
    manifest = folder / "_manifest_run1.json"
    if damage == "truncate":
        manifest.write_bytes(manifest.read_bytes()[:20])
    elif damage == "garbage":
        manifest.write_text('{"run_id": "run1", "files": 42}')
    else:
        manifest.unlink()
    assert not day_status(folder, DAY).committed
    with pytest.raises(UncommittedDayError) as err:
        read_committed_day(folder, DAY)
    assert f"paid_orders day {DAY} is not committed" in str(err.value)
    assert f"--partition {DAY}" in str(err.value)
    # the rebuild repairs it
    write_day_files(folder, {DAY: [ROW]}, run_id="run2", written_at=NOW, spec=ORDERS)
    assert read_committed_day(folder, DAY) == [ROW]


def _read_only(url: str, engines) -> sa.Engine:
    source, warehouse = engines
    if warehouse.dialect.name == "sqlite":
        path = Path(warehouse.url.database)
        return make_engine(f"sqlite:///file:{path}?mode=ro&uri=true", role="warehouse")
    with warehouse.connect() as conn:
        name = warehouse.url.database
        conn.exec_driver_sql(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        conn.commit()
    warehouse.dispose()
    return make_engine(url, role="warehouse")


def test_a_read_only_warehouse_is_named_and_nothing_changes(db_urls, engines):
    source, warehouse = engines
    demo.init(source)
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    demo.set_order(source, 105, status="paid", amount="22.00", updated_at="2026-01-25", tz=UTC)
    read_only = _read_only(db_urls["warehouse"], engines)
    try:
        with pytest.raises(DatabaseError) as err:
            load_orders(source, read_only, tz=UTC, lookback_days=2, now=NOW)
        assert "warehouse database" in str(err.value) and "read-only" in str(err.value)
        assert "nothing was committed" in str(err.value)
        assert wm.current(read_only, table=ORDERS.name) == to_instant("2026-01-21", UTC)
    finally:
        read_only.dispose()
