"""Make the warehouses of ``test_upgrade.py``: run with the release before declared tables
(commit abcf903) on the import path, from a checkout of it::

    git worktree add /tmp/prev abcf903
    PYTHONPATH=/tmp/prev python pipeline_assets_tests/previous_release/make.py \\
        postgresql+psycopg://postgres@127.0.0.1:5432/test

It writes, beside this file: ``source.json`` (the app's orders), ``sqlite.sql`` and
``postgresql.sql`` (each warehouse as that release left it after three loads, a range
load and a rewind, dumped as SQL).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from datetime import date, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from pipeline_assets.core import demo
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.load.batch import load_orders
from pipeline_assets.core.times import UTC
from pipeline_assets.core.warehouse import watermark as wm

HERE = Path(__file__).parent
TODAY = date(2026, 1, 20)
NOW = datetime(2026, 1, 20, 12, tzinfo=UTC)


def story(source, warehouse) -> None:
    """Three loads (one with a late row and a moved order), a range load that deletes an
    order the app deleted, and a rewind."""
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    demo.set_order(
        source, 105, status="paid", amount="41.00", updated_at="2026-01-19T08:00:00+00:00", tz=UTC
    )
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)
    with source.begin() as conn:
        conn.exec_driver_sql("DELETE FROM orders WHERE order_id = 1003")
    load_orders(
        source,
        warehouse,
        tz=UTC,
        lookback_days=2,
        now=NOW,
        start=datetime(2026, 1, 10, tzinfo=UTC),
        end=datetime(2026, 1, 20, tzinfo=UTC),
    )
    wm.rewind(warehouse, wm.current(warehouse) - timedelta(hours=1), reason="replay", at=NOW)
    load_orders(source, warehouse, tz=UTC, lookback_days=2, now=NOW)


def main(postgres_admin: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        source = make_engine(f"sqlite:///{tmp}/app.db", role="app")
        demo.init(source, today=TODAY, history_days=12, seed=7)
        seeded = Path(tmp, "app.db").read_bytes()
        # SQLite
        lite = make_engine(f"sqlite:///{tmp}/warehouse.db", role="warehouse")
        story(source, lite)
        with lite.connect() as conn:
            raw = conn.connection.dbapi_connection
            (HERE / "sqlite.sql").write_text("\n".join(raw.iterdump()) + "\n")
        with source.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT order_id, status, amount, updated_at FROM orders ORDER BY order_id"
            ).all()
        (HERE / "source.json").write_text(
            "[\n" + ",\n".join(json.dumps(list(r)) for r in rows) + "\n]\n"
        )
        # PostgreSQL, from the same seeded source
        Path(tmp, "app.db").write_bytes(seeded)
        source.dispose()
        admin = sa.create_engine(postgres_admin, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql("DROP DATABASE IF EXISTS pa_previous_release")
            conn.exec_driver_sql("CREATE DATABASE pa_previous_release")
        url = admin.url.set(database="pa_previous_release")
        pg = make_engine(url.render_as_string(hide_password=False), role="warehouse")
        story(source, pg)
        pg.dispose()
        dump = subprocess.run(
            [
                "pg_dump",
                "--no-owner",
                "--no-privileges",
                "--inserts",
                "-h",
                url.host,
                "-p",
                str(url.port or 5432),
                "-U",
                url.username,
                url.database,
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        # plain SQL only: no psql meta-commands (``\\restrict``), so a driver can run it
        dump = "".join(line for line in dump.splitlines(keepends=True) if not line.startswith("\\"))
        (HERE / "postgresql.sql").write_text(dump)
        with admin.connect() as conn:
            conn.exec_driver_sql("DROP DATABASE pa_previous_release")


if __name__ == "__main__":
    main(sys.argv[1])
