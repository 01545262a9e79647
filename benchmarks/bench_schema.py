"""What a schema change costs (issue 24, "Speed"): at N stored payments, the load that
makes a change, the range load that fills a column added over stored rows, and the
database's own floor for each, in one run.

    .venv/bin/python benchmarks/bench_schema.py [--rows 1000000] [--runs 3]
        [--postgres ADMIN_URL] [--workdir DIR] [--quick]

One payments source of N rows (``bench_tables.build_payments``: the tests' DDL, whose
``legacy_code`` nobody declared, filled for every row) and one warehouse loaded once
under ``PAYMENTS`` (the first load, timed: reading and writing N rows). Each case then
starts from a copy of that warehouse (SQLite: the file; PostgreSQL: ``CREATE DATABASE …
TEMPLATE``), best of ``--runs``:

1. **nothing changed**: the incremental load under ``PAYMENTS`` (the baseline of a run).
2. **column added**: the incremental load under the declaration with ``legacy_code``: its
   ``ALTER TABLE … ADD COLUMN``, the read of the days its stored rows are on (distinct
   minutes of the change stamp, through its index) and the lookback's rows. Floor: the
   bare ``ALTER TABLE … ADD COLUMN`` and commit.
3. **fill**: from the state case 2 left, the range load over every day, which the
   printed repair is: it reads all N rows of the source again and writes the column of
   every stored row. Floors: our own first load of N rows into an empty warehouse, and
   the database writing the column alone from a copy of the source's values (SQLite:
   ``ATTACH`` and one ``UPDATE … FROM``; PostgreSQL: the values by ``COPY`` into a
   temporary table, then one ``UPDATE … FROM``).
4. **widened**: the incremental load under ``amount_cents: decimal(12,2)`` (an integer
   column becoming exact text: N values rewritten, ``min``/``max`` checked first). Floor:
   the bare rewrite (PostgreSQL: ``ALTER … TYPE text USING``; SQLite: rename, add, fill,
   drop).

Each line: seconds, and the ratio to its baseline (cases 2 and 4 to case 1; case 3 to
the first load). ``--quick``: 100,000 rows, one round. Nothing is written in the checkout.
"""

from __future__ import annotations

import argparse
import copy
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sqlalchemy as sa  # noqa: E402
from bench_tables import build_payments  # noqa: E402
from common import add_postgres_options, backend_for, postgres_url, workdir_for  # noqa: E402

from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.load.batch import load_table
from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.times import UTC, to_instant  # noqa: E402
from pipeline_assets_tests.tables import PAYMENTS, PAYMENTS_ATTRIBUTES  # noqa: E402

# the generated stamps run from 2026-01-01 over 60 days: the clock is after all of them
# (a stamp after it would be a future row, which does not move the watermark)
EVERY_DAY = (to_instant("2025-12-30", UTC), to_instant("2026-03-05", UTC))
NOW = EVERY_DAY[1]


def redeclared(**columns) -> object:
    attributes = copy.deepcopy(PAYMENTS_ATTRIBUTES)
    attributes["columns"].update(columns)
    return declare(attributes)


WITH_CODE = redeclared(legacy_code={"type": "text", "nullable": True})
WIDER = redeclared(amount_cents="decimal(12,2)")


class Copies:
    """Copies of a warehouse, per backend."""

    def __init__(self, backend, folder: Path):
        self.backend, self.folder, self.n = backend, folder, 0

    def of(self, url: str) -> str:
        self.n += 1
        if self.backend.name == "sqlite":
            engine = make_engine(url, role="warehouse")
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            engine.dispose()
            target = self.folder / f"copy_{self.n}.db"
            shutil.copyfile(sa.make_url(url).database, target)
            return f"sqlite:///{target}"
        name = f"{sa.make_url(url).database}_c{self.n}"
        with self.backend.admin.connect() as conn:
            conn.exec_driver_sql(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{sa.make_url(url).database}' AND pid <> pg_backend_pid()"
            )
            conn.exec_driver_sql(f'CREATE DATABASE "{name}" TEMPLATE "{sa.make_url(url).database}"')
        self.backend.names.append(name)
        return self.backend.admin.url.set(database=name).render_as_string(hide_password=False)


def timed_load(source_url: str, warehouse_url: str, spec, **kw) -> float:
    source = make_engine(source_url, role="app")
    warehouse = make_engine(warehouse_url, role="warehouse")
    try:
        started = time.perf_counter()
        load_table(source, warehouse, spec=spec, tz=UTC, lookback_days=2, now=NOW, **kw)
        return time.perf_counter() - started
    finally:
        source.dispose()
        warehouse.dispose()


def timed_sql(backend, url: str, statements: list[str]) -> float:
    conn = backend.raw_connect(url)
    try:
        started = time.perf_counter()
        for sql in statements:
            conn.execute(sql)
        conn.commit()
        return time.perf_counter() - started
    finally:
        conn.close()


def fill_floor(backend, source_url: str, warehouse_url: str) -> float:
    """The column written from the source's values, by the database alone."""
    update = (
        "UPDATE payments SET legacy_code = s.legacy_code FROM {s} s "
        "WHERE s.payment_id = payments.payment_id AND s.attempt = payments.attempt"
    )
    if backend.name == "sqlite":
        conn = backend.raw_connect(warehouse_url)
        try:
            started = time.perf_counter()
            conn.execute(f"ATTACH DATABASE '{sa.make_url(source_url).database}' AS src")
            conn.execute(update.format(s="src.payments"))
            conn.commit()
            return time.perf_counter() - started
        finally:
            conn.close()
    source, warehouse = backend.raw_connect(source_url), backend.raw_connect(warehouse_url)
    try:
        started = time.perf_counter()
        warehouse.execute(
            "CREATE TEMP TABLE src (payment_id BIGINT, attempt BIGINT, legacy_code TEXT)"
        )
        with (
            source.cursor().copy(
                "COPY (SELECT payment_id, attempt, legacy_code FROM payments) TO STDOUT"
            ) as out,
            warehouse.cursor().copy("COPY src FROM STDIN") as into,
        ):
            for block in out:
                into.write(block)
        warehouse.execute(update.format(s="src"))
        warehouse.commit()
        return time.perf_counter() - started
    finally:
        source.close()
        warehouse.close()


def widen_floor(backend, url: str) -> float:
    if backend.name == "sqlite":
        return timed_sql(
            backend,
            url,
            [
                "ALTER TABLE payments RENAME COLUMN amount_cents TO was",
                "ALTER TABLE payments ADD COLUMN amount_cents TEXT",
                "UPDATE payments SET amount_cents = CAST(was AS TEXT) || '.00'",
                "ALTER TABLE payments DROP COLUMN was",
            ],
        )
    return timed_sql(
        backend,
        url,
        [
            "ALTER TABLE payments ALTER COLUMN amount_cents TYPE TEXT "
            "USING CAST(amount_cents AS TEXT) || '.00'"
        ],
    )


FIRST, SAME = "first load of N rows (empty warehouse)", "1. nothing changed"
ROWS = (  # case, its baseline, its floor
    (FIRST, FIRST, None),
    (SAME, SAME, None),
    ("2. column added", SAME, "2. floor: ALTER TABLE ADD COLUMN"),
    ("3. fill: range load of every day", FIRST, "3. floor: UPDATE from the source's values"),
    ("4. widened: integer -> decimal(12,2)", SAME, "4. floor: the rewrite alone"),
)


def report(best: dict[str, float], rows: int) -> None:
    """The table: each case's best seconds, against its baseline and its floor."""
    print(f"\n{'case':<40} | {'seconds':>8} | {'ratio':>8} | {'vs floor':>8} | floor seconds")
    print("-" * 88)
    for case, baseline, floor in ROWS:
        seconds = best[case]
        against = f"{seconds / best[floor]:.2f}x" if floor else ""
        floor_s = f"{best[floor]:.3f}" if floor else ""
        print(
            f"{case:<40} | {seconds:>8.2f} | {seconds / best[baseline]:>7.2f}x | "
            f"{against:>8} | {floor_s}"
        )
    fill = best["3. fill: range load of every day"]
    print(
        f"\nratio: against the baseline of the case (2 and 4: a run without a change; 3: the "
        f"first load); vs floor: against the database alone. The fill: {rows / fill:,.0f} "
        f"rows/s, {fill - best[SAME]:.2f} s over a run without a change."
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    add_postgres_options(parser, "source and warehouses")
    parser.add_argument("--quick", action="store_true", help="100,000 rows, one round")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.runs = 100_000, 1
    folder = workdir_for(args, "bench_schema_")
    backend = backend_for(folder, postgres_url(args))
    started = time.perf_counter()
    print(f"bench_schema: {args.rows:,} payments, {args.runs} run(s), {backend.name}", flush=True)
    try:
        source = backend.new_url("payments")
        build_payments(backend, source, args.rows)
        base = backend.new_url("warehouse")
        first = timed_load(source, base, PAYMENTS)
        copies = Copies(backend, folder)
        best: dict[str, float] = {"first load of N rows (empty warehouse)": first}

        def keep(case: str, seconds: float) -> None:
            best[case] = min(best.get(case, seconds), seconds)

        for _ in range(args.runs):
            keep("1. nothing changed", timed_load(source, copies.of(base), PAYMENTS))
            added = copies.of(base)
            keep("2. column added", timed_load(source, added, WITH_CODE))
            keep(
                "2. floor: ALTER TABLE ADD COLUMN",
                timed_sql(
                    backend, copies.of(base), ["ALTER TABLE payments ADD COLUMN legacy_code TEXT"]
                ),
            )
            floor_at = copies.of(added)
            keep(
                "3. fill: range load of every day",
                timed_load(source, added, WITH_CODE, start=EVERY_DAY[0], end=EVERY_DAY[1]),
            )
            keep("3. floor: UPDATE from the source's values", fill_floor(backend, source, floor_at))
            keep("4. widened: integer -> decimal(12,2)", timed_load(source, copies.of(base), WIDER))
            keep("4. floor: the rewrite alone", widen_floor(backend, copies.of(base)))
        report(best, args.rows)
    finally:
        backend.close()
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
