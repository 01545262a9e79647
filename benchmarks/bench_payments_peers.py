"""Declared ``payments``: whole runs against the peers a user would pick, in one run.

    .venv/bin/python benchmarks/bench_payments_peers.py [--rows 1000000] [--runs 2]
        [--changed 1000] [--postgres ADMIN_URL] [--workdir DIR] [--quick]

One source of N generated payments (``bench_tables.build_payments``: ``PAYMENTS`` of
``pipeline_assets_tests/tables.py``, key payment_id + attempt, ten typed columns, NULLs,
Unicode, an index on ``modified_at``): a SQLite file, or with ``--postgres`` a database of
its own on that server (dropped at the end). ``--runs`` rounds; in each, every contender
loads into its own empty destination (a) the first load, (b) after ``--changed`` payments
picked over the whole history were changed as the app changes them (stamped one second
apart after the newest row; once per round, so every contender reads the same change),
(c) nothing changed. Each time is the wall time of a whole run in a fresh process:

- **ours**: ``dagster asset materialize -f benchmarks/payments_location.py --select
  payments`` (the ``payments_match_source`` check in the step), a new warehouse each
  round (SQLite, or PostgreSQL beside the source);
- **Dagster's trivial run**: ``trivial`` of ``benchmarks/trivial_location.py`` (an asset
  and its check in one step) through the same CLI, once per case and round; each of ours
  is also shown as a ratio to its median;
- **dlt 1.31**: ``python benchmarks/dlt_child.py`` (a fresh interpreter: starting Python
  and importing dlt count, as the imports of our CLI run count), which runs
  ``sql_table(..., backend="connectorx", primary_key=["payment_id", "attempt"],
  incremental=dlt.sources.incremental("modified_at"), write_disposition="merge")`` (the
  call ``bench_tables.py`` measures in process) into duckdb, into SQLite through dlt's
  ``sqlalchemy`` destination (``dlt[sqlalchemy]``: the dataset is a SQLite file attached
  beside the named one; connectorx works there too, so the backend is the same), and with
  ``--postgres`` into PostgreSQL (``dlt[postgres]``) instead of SQLite. On SQLite
  connectorx cannot parse the app's stamps (``…+00:00`` in a ``TIMESTAMP`` column), so dlt
  reads a copy whose stamps are written without the offset (the same instants), changed
  with the same rows and values as the app's source;
- **Sling** (``sling==1.4.10.post2`` of the bench extra: the last release whose Go binary
  comes from PyPI, in ``sling-linux-amd64``; later ones download it from GitHub when first
  imported, which fails here): ``sling run -r replication.yaml``, the command pip installs
  (a Python wrapper, about 0.3 s, that runs the binary), mode ``incremental``,
  ``primary_key: [payment_id, attempt]``, ``update_key: modified_at``, its home
  (``SLING_HOME_DIR``) in the workdir, telemetry off. SQLite → SQLite, or with
  ``--postgres`` PostgreSQL → PostgreSQL. Into SQLite twice: by its bulk path, which
  writes a CSV and runs the ``sqlite3`` CLI's ``.import`` (Sling downloads a 3.41 of its
  own from its server, unreachable here, and refuses another version in its folder;
  ``SQLITE_PATH`` names the system's, Debian 12's 3.40.1), and by its Go driver
  (``use_bulk: false``: what it falls back to when the download fails). The bulk path
  writes NULLs as empty text (the check below says so). Sling maps SQLite's
  ``TIMESTAMP`` to text and compares its checkpoint as text in another form: plainly
  configured it stores ``"2026-…Z"`` with the quotes, below every stamp, so that every
  incremental run re-read the whole table; with the column declared ``datetime``,
  ``2026-03-01 23:58:58+00:00``, below the app's ``2026-03-01T…`` of the same day, so
  that every run re-read the newest day. The SQLite stream is therefore ``columns:
  {modified_at: datetime}`` with ``sql: select * from payments where {incremental_value}
  is null or modified_at > replace({incremental_value}, ' ', 'T')`` (the checkpoint in
  the app's form; the source's index is used). Each Sling run that writes adds one more
  unique index on the key to its target (Sling's own doing).

After each run the destination is counted against the source: rows, rows with this
round's changed note, notes that are not NULL; a run whose destination differs is listed
at the end (WRONG). One table per destination: case, rows the run read (ours:
``rows_read`` of its batch, the lookback included; dlt: rows normalized; Sling: rows
inserted), seconds per round (the trivial run: one per case), median, ratio to dlt →
duckdb of the same case, and for ours the ratio to the trivial run. Without the ``bench``
extra the missing peers are named and ours is measured all the same. ``--quick`` (the
smoke test): 5,000 rows, 200 changed, one round, the trivial run once, Sling into SQLite
by one path. Nothing is written in the checkout.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sqlalchemy as sa  # noqa: E402
from bench_tables import (  # noqa: E402
    PAYMENTS_LOCATION,
    RECONCILE_DAYS,
    build_payments,
    clean_env,
    last_rows_read,
    materialize,
    offset_free_copy,
    rule,
)
from common import (  # noqa: E402
    BIN,
    HERE,
    TRIVIAL,
    add_postgres_options,
    backend_for,
    dagster_home,
    postgres_url,
    workdir_for,
)

CASES = ("first load", "changed", "nothing changed")
DUCKDB = "duckdb"
TITLES = {"sqlite": "SQLite", "postgresql": "PostgreSQL", DUCKDB: "duckdb"}
DLT_ENV = {"RUNTIME__DLTHUB_TELEMETRY": "false", "RUNTIME__LOG_LEVEL": "ERROR"}


def plain_url(url: str, *, password: bool = False) -> str:
    """``url`` without SQLAlchemy's driver (for dlt, connectorx and Sling); with
    ``password``, an empty one when it has none (dlt's postgres destination wants one)."""
    u = sa.make_url(url)
    if u.drivername.startswith("sqlite"):
        return f"sqlite:///{u.database}"
    text = u.set(drivername="postgresql").render_as_string(hide_password=False)
    if password and u.password is None and u.username:
        text = text.replace(f"//{u.username}@", f"//{u.username}:@", 1)
    return text


def sling_url(url: str) -> str:
    """``url`` as Sling takes it: ``sqlite://`` and the absolute path, or PostgreSQL's."""
    u = sa.make_url(url)
    if u.drivername.startswith("sqlite"):
        return f"sqlite://{u.database}"
    return plain_url(url) + "?sslmode=disable"


def timed(command: list[str], env: dict, cwd: Path) -> tuple[float, str, str]:
    """Wall seconds of one subprocess, its stdout and stderr; a failed one stops the
    benchmark."""
    started = time.perf_counter()
    proc = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        out = proc.stdout + proc.stderr
        raise SystemExit(f"{' '.join(map(str, command[:3]))} failed:\n{out[-3000:]}")
    return seconds, proc.stdout, proc.stderr


HELD = "SELECT count(*), sum(CASE WHEN note = {m} THEN 1 ELSE 0 END), count(note) FROM {t}"


def held(url: str, table: str, marker: str) -> tuple[int, ...]:
    """Rows of ``table`` at ``url``, those whose note is ``marker``, and the notes that
    are not NULL."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            got = conn.execute(sa.text(HELD.format(m=":m", t=table)), {"m": marker}).one()
        return tuple(int(n or 0) for n in got)
    finally:
        engine.dispose()


# --- the contenders --------------------------------------------------------------------


class Ours:
    """A whole run of ``payments`` through the CLI (``trivial``: Dagster's trivial run)."""

    def __init__(self, ctx, *, trivial: bool = False):
        self.ctx, self.trivial = ctx, trivial
        self.name = "Dagster trivial asset + check (CLI)" if trivial else "ours: whole run (CLI)"
        self.table = ctx.backend.name
        self.cwd = ctx.folder / ("trivial_cli" if trivial else "payments_cli")
        self.cwd.mkdir()
        self.env = clean_env(
            DAGSTER_HOME=str(ctx.home),
            SOURCE_DATABASE_URL=ctx.source,
            RECONCILE_DAYS=str(RECONCILE_DAYS),
        )

    def fresh(self, round_: int) -> None:
        if not self.trivial:  # (the trivial location reads no settings)
            self.env["PIPELINE_DATA_DIR"] = str(self.cwd / f"data_r{round_}")
            self.env["WAREHOUSE_DATABASE_URL"] = self.ctx.backend.new_url("warehouse")

    def run(self) -> tuple[float, int]:
        target = TRIVIAL if self.trivial else PAYMENTS_LOCATION
        seconds, _ = materialize(self.env, self.cwd, *target)
        return seconds, 1 if self.trivial else last_rows_read(self.env["WAREHOUSE_DATABASE_URL"])

    def holds(self, marker: str) -> tuple[int, ...] | None:
        return (
            None if self.trivial else held(self.env["WAREHOUSE_DATABASE_URL"], "payments", marker)
        )


class Dlt:
    """``dlt_child.py`` in a fresh process: dlt's pipeline into duckdb, SQLite or PostgreSQL."""

    def __init__(self, ctx, destination: str):
        self.ctx, self.destination = ctx, destination
        into = {"sqlalchemy": "SQLite (sqlalchemy)", "postgres": "PostgreSQL"}.get(destination)
        self.name = f"dlt -> {into or destination}"
        self.table = DUCKDB if destination == DUCKDB else ctx.backend.name
        self.env = clean_env(DLT_DATA_DIR=str(ctx.folder / "dlt_data"), **DLT_ENV)

    def fresh(self, round_: int) -> None:
        self.pipeline = f"dlt_{self.destination}_r{round_}"
        if self.destination == DUCKDB:
            self.target = str(self.ctx.folder / f"{self.pipeline}.duckdb")
        else:
            label = self.pipeline if self.destination == "sqlalchemy" else "dlt"
            self.target = plain_url(self.ctx.backend.new_url(label), password=True)

    def run(self) -> tuple[float, int]:
        options = {
            "credentials": plain_url(self.ctx.dlt_source),
            "folder": str(self.ctx.folder),
            "name": self.pipeline,
            "destination": self.destination,
            "destination_credentials": self.target,
        }
        command = [sys.executable, str(HERE / "dlt_child.py"), json.dumps(options)]
        seconds, out, _ = timed(command, self.env, self.ctx.folder)
        return seconds, json.loads(out.strip().splitlines()[-1])["rows"]

    def holds(self, marker: str) -> tuple[int, ...]:
        if self.destination == DUCKDB:
            import duckdb

            with duckdb.connect(self.target, read_only=True) as conn:
                got = conn.execute(HELD.format(m="?", t="peer.payments"), [marker]).fetchone()
            return tuple(int(n or 0) for n in got)
        if self.destination == "sqlalchemy":  # the dataset's own file, beside the named one
            path = sa.make_url(self.target).database
            return held(f"sqlite:///{path.removesuffix('.db')}__peer.db", "payments", marker)
        return held(self.target, "peer.payments", marker)


SLING_STREAM = {
    "sqlite": {
        "payments": {
            "object": "main.payments",
            "columns": {"modified_at": "datetime"},
            "sql": "select * from payments where {incremental_value} is null "
            "or modified_at > replace({incremental_value}, ' ', 'T')",
        }
    },
    "postgresql": {"public.payments": {"object": "public.payments"}},
}


class Sling:
    """``sling run -r replication.yaml`` (the PyPI package's command), one target a round.
    Into SQLite ``sqlite3`` is the CLI of its bulk path (``SQLITE_PATH``), or None: its Go
    driver (``use_bulk: false``)."""

    def __init__(self, ctx, sqlite3: str | None = None):
        self.ctx, self.bulk = ctx, sqlite3 is not None
        self.table = ctx.backend.name
        how = {"sqlite": " (bulk: sqlite3 CLI)" if self.bulk else " (Go driver)"}
        self.name = f"Sling -> {TITLES[self.table]}{how.get(self.table, '')}"
        self.env = clean_env(
            SLING_HOME_DIR=str(ctx.folder / "sling_home"),
            SLING_DISABLE_TELEMETRY="true",
            PAYMENTS_SOURCE=sling_url(ctx.source),
        )
        if sqlite3:
            self.env["SQLITE_PATH"] = sqlite3

    def fresh(self, round_: int) -> None:
        postgres = self.table == "postgresql"
        label = "sling" if postgres else f"sling_{'bulk' if self.bulk else 'driver'}_r{round_}"
        target = self.ctx.backend.new_url(label)
        self.env["PAYMENTS_TARGET"] = sling_url(target)
        self.target = target
        defaults = {
            "mode": "incremental",
            "primary_key": ["payment_id", "attempt"],
            "update_key": "modified_at",
        }
        if not postgres and not self.bulk:
            defaults["target_options"] = {"use_bulk": False}
        replication = {
            "source": "PAYMENTS_SOURCE",
            "target": "PAYMENTS_TARGET",
            "defaults": defaults,
            "streams": SLING_STREAM[self.table],
        }
        self.replication = self.ctx.folder / f"{label}.yaml"
        self.replication.write_text(json.dumps(replication, indent=2))  # JSON is YAML

    def run(self) -> tuple[float, int]:
        command = [str(BIN / "sling"), "run", "-r", str(self.replication)]
        seconds, out, err = timed(command, self.env, self.ctx.folder)
        inserted = re.findall(r"inserted ([\d,]+) rows", out + err)
        return seconds, sum(int(n.replace(",", "")) for n in inserted)

    def holds(self, marker: str) -> tuple[int, ...]:
        table = "public.payments" if self.table == "postgresql" else "payments"
        return held(self.target, table, marker)


def sling_version(ctx) -> tuple[str | None, str]:
    """Sling's version, or None and why it cannot run here."""
    command = BIN / "sling"
    if not command.exists():
        return None, "the sling package is not installed"
    env = clean_env(SLING_HOME_DIR=str(ctx.folder / "sling_home"), SLING_DISABLE_TELEMETRY="true")
    try:
        proc = subprocess.run(
            [str(command), "--version"], env=env, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return None, "`sling --version` did not answer in 120 s"
    found = re.search(r"Version: (\S+)", proc.stdout + proc.stderr)
    if proc.returncode != 0 or not found:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"`sling --version` failed here: {last[0][:300]}"
    return found.group(1), ""


def peer_contenders(ctx, quick: bool = False) -> list:
    """The peers installed here; the missing ones are named (``quick``: Sling into SQLite
    by one path only)."""
    found, missing = [], []
    postgres = ctx.backend.name == "postgresql"
    if all(importlib.util.find_spec(m) for m in ("dlt", "duckdb", "connectorx")):
        if not postgres:  # connectorx cannot parse the app's "…+00:00" stamps
            ctx.dlt_source = offset_free_copy(ctx.backend, ctx.source, "payments_naive")
        found.append(Dlt(ctx, DUCKDB))
        second, needs = ("postgres", "psycopg2") if postgres else ("sqlalchemy", "alembic")
        if importlib.util.find_spec(needs):
            found.append(Dlt(ctx, second))
        else:
            missing.append(f"dlt -> {second} (dlt[{second}]: {needs} is missing)")
    else:
        missing.append("dlt (dlt[duckdb,sql_database] and connectorx)")
    version, why = sling_version(ctx)
    if not version:
        missing.append(f"Sling ({why})")
    elif postgres:
        found.append(Sling(ctx))
    else:  # its bulk path needs a sqlite3 CLI (Sling downloads one: not from here)
        cli = shutil.which("sqlite3")
        found.extend([Sling(ctx, cli), Sling(ctx)][: 1 if quick else 2] if cli else [Sling(ctx)])
        if not cli:
            print("Sling's bulk path into SQLite skipped: no sqlite3 CLI on the PATH")
    print(f"sling binary: {version or '-'}")
    if missing:
        print(
            "peers skipped, not installed or not runnable here (pip install -e '.[bench]'): "
            + "; ".join(missing)
        )
    return found


# --- the rounds ------------------------------------------------------------------------


def change_payments(ctx, count: int, round_: int) -> str:
    """As the app would: ``count`` payments picked at random over the whole history get a
    new status and note (the returned marker), stamped one second apart after the newest
    row; the same rows and values in dlt's offset-free copy."""
    marker = f"changed in round {round_ + 1} ☕"
    conn = ctx.backend.raw_connect(ctx.source)
    try:
        keys = conn.cursor().execute("SELECT payment_id, attempt FROM payments").fetchall()
        newest = conn.cursor().execute("SELECT max(modified_at) FROM payments").fetchone()[0]
    finally:
        conn.close()
    newest = newest if isinstance(newest, datetime) else datetime.fromisoformat(newest)
    newest = newest if newest.tzinfo else newest.replace(tzinfo=UTC)
    picked = sorted(random.Random(round_ + 7).sample(keys, min(count, len(keys))))
    stamps = [newest + timedelta(seconds=i + 1) for i in range(len(picked))]
    m = ctx.backend.marker
    targets = [(ctx.source, lambda s: s.isoformat(timespec="seconds"))]
    if ctx.backend.name == "postgresql":
        targets = [(ctx.source, lambda s: s)]
    elif ctx.dlt_source != ctx.source:
        targets.append((ctx.dlt_source, lambda s: s.replace(tzinfo=None).isoformat()))
    for url, form in targets:
        conn = ctx.backend.raw_connect(url)
        try:
            conn.cursor().executemany(
                f"UPDATE payments SET status = {m}, note = {m}, modified_at = {m} "
                f"WHERE payment_id = {m} AND attempt = {m}",
                [
                    ("refunded", marker, form(s), *key)
                    for s, key in zip(stamps, picked, strict=True)
                ],
            )
            conn.commit()
        finally:
            conn.close()
    return marker


def measure(ctx, contenders: list, args) -> tuple[dict, dict, list[str]]:
    """``--runs`` rounds of the three cases; the first contender rotates each round."""
    times = {(c.name, case): [] for c in contenders for case in CASES}
    rows, wrong = {}, []
    for round_ in range(args.runs):
        for c in contenders:
            c.fresh(round_)
        k = round_ % len(contenders)
        order = contenders[k:] + contenders[:k]
        marker = "-"
        for case in CASES:
            if case == "changed":
                marker = change_payments(ctx, args.changed, round_)
            source = held(ctx.source, "payments", marker)
            for c in order:
                if args.quick and getattr(c, "trivial", False) and case != CASES[0]:
                    continue  # --quick: Dagster's trivial run once
                seconds, read = c.run()
                times[c.name, case].append(seconds)
                rows[c.name, case] = read
                got = c.holds(marker)
                if got is not None and got != source:
                    wrong.append(
                        f"round {round_ + 1}, {case}: {c.name} holds {got[0]:,} rows, "
                        f"{got[1]:,} with the changed note, {got[2]:,} notes not NULL; the "
                        f"source {source[0]:,}, {source[1]:,}, {source[2]:,}"
                    )
        print(f"round {round_ + 1} done at {time.perf_counter() - ctx.started:.0f}s", flush=True)
    return times, rows, wrong


def print_tables(ctx, contenders: list, times: dict, rows: dict, args) -> None:
    """One table per destination: each contender's cases (the trivial run: one line)."""
    labels = {"first load": "first load", "changed": f"{args.changed:,} changed"}
    trivial = next(c for c in contenders if getattr(c, "trivial", False))
    base = statistics.median(t for case in CASES for t in times[trivial.name, case])
    dlt = next((c for c in contenders if getattr(c, "destination", "") == DUCKDB), None)
    for table in dict.fromkeys(c.table for c in contenders):
        print(
            f"\ninto {TITLES[table]}: payments, {ctx.rows:,} rows, {args.runs} round(s); ratio "
            "dlt-duckdb: median over dlt -> duckdb's of the same case; ratio trivial: over "
            f"the median of Dagster's trivial run ({base:.2f} s)"
        )
        rule(
            f"{'case':<52} | {'rows read':>9} | {'seconds per round':<20} | {'median':>7} | "
            f"{'ratio dlt-duckdb':>16} | {'ratio trivial':>13}"
        )
        for c in (c for c in contenders if c.table == table):
            if c is trivial:
                lines = [(c.name, CASES[0], [t for k in CASES for t in times[c.name, k]])]
            else:
                lines = [(f"{c.name}, {labels.get(k, k)}", k, times[c.name, k]) for k in CASES]
            for label, case, each in lines:
                median = statistics.median(each)
                versus = ""
                if dlt and c is not trivial:
                    versus = f"{median / statistics.median(times[dlt.name, case]):.2f}x"
                mine = f"{median / base:.2f}x" if isinstance(c, Ours) else ""
                print(
                    f"{label:<52} | {rows[c.name, case]:>9,} | "
                    f"{' '.join(f'{t:.2f}' for t in each):<20} | {median:>7.2f} | "
                    f"{versus:>16} | {mine:>13}"
                )


class Context:
    """What the contenders share: the backend, the folder, the source and its size."""

    def __init__(self, args, backend, folder: Path):
        self.backend, self.folder, self.rows = backend, folder, args.rows
        self.started = time.perf_counter()
        self.home = dagster_home(folder)
        self.source = backend.new_url("payments")
        build_payments(backend, self.source, args.rows)
        self.dlt_source = self.source
        print(
            f"bench_payments_peers: {args.rows:,} payments on {backend.name} built in "
            f"{time.perf_counter() - self.started:.0f}s, {args.runs} round(s), "
            f"{args.changed:,} changed, workdir {folder}",
            flush=True,
        )


def versions() -> str:
    names = ("dagster", "dlt", "duckdb", "connectorx", "sqlalchemy", "sling", "sling-linux-amd64")
    found = []
    for name in names:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return ", ".join(found)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="payments (1,000,000)")
    parser.add_argument("--runs", type=int, default=2, help="rounds (2)")
    parser.add_argument("--changed", type=int, default=1_000, help="payments changed (1,000)")
    add_postgres_options(parser, "the source and our warehouse (and dlt's, Sling's)")
    parser.add_argument("--quick", action="store_true", help="5,000 rows, 200 changed, 1 round")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.changed, args.runs = 5_000, 200, 1
    folder = workdir_for(args, "bench_payments_peers_")
    started = time.perf_counter()
    backend = backend_for(folder, postgres_url(args))
    try:
        ctx = Context(args, backend, folder)
        contenders = [Ours(ctx), Ours(ctx, trivial=True), *peer_contenders(ctx, args.quick)]
        print(f"versions: {versions()}", flush=True)
        if not args.quick:  # the instance's storage, made once (--quick: by its first run)
            materialize(clean_env(DAGSTER_HOME=str(ctx.home)), folder, *TRIVIAL)
        times, rows, wrong = measure(ctx, contenders, args)
        print_tables(ctx, contenders, times, rows, args)
        for line in wrong:
            print(f"WRONG: {line}")
    finally:
        backend.close()
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
