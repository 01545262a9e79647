"""Declared tables (issue 23, "Speed and memory"): ``orders`` declared against the previous
release, and a second declared table, ``payments``, against ``orders`` and against dlt, in
one run.

    .venv/bin/python benchmarks/bench_tables.py [--rows 1000000] [--runs 3]
        [--previous abcf903] [--only release,rate,peer] [--postgres ADMIN_URL]
        [--workdir DIR] [--quick]

1. **release** — ``orders``, this checkout against the previous release (``--previous``,
   the commit before the declared-table machinery: abcf903). The script extracts that
   commit's ``pipeline_assets/`` with ``git archive`` into its workdir (nothing is
   registered in the repository, unlike a worktree; outside a git checkout, or when the
   commit is missing, it stops and says so), then runs the same whole runs through the
   CLI, ``dagster asset materialize -m pipeline_assets.definitions --select orders``,
   with ``PYTHONPATH`` pointing at that tree for the previous release (checked: each
   side's ``pipeline_assets`` is imported from where it should be). On one source of N
   generated orders (``demo.generate``, 60 days), each side into its own warehouse, in
   ``--runs`` rounds (the side that goes first alternates): first load (fresh
   warehouses), nothing changed, then 1,000 orders changed by the app (once, both sides
   read the same change). Each line: the median seconds of both, the ratio (target
   ≤ 1.1×), and the peak resident memory of the run (the largest ``VmHWM`` among the
   ``dagster`` process and its descendants: the step's process). Then the same three
   loads in process (``load_orders`` of each tree, each in a fresh subprocess:
   ``load_child.py``), without Dagster.
2. **rate** — ``payments`` (``PAYMENTS`` of ``pipeline_assets_tests/tables.py``: key
   payment_id + attempt, ten columns of every type, NULLs, Unicode) against ``orders``:
   a first load of N/10 and of N rows of each, ``load_table(spec=PAYMENTS)`` and
   ``load_orders`` each in a fresh subprocess, best of ``--runs`` at N; rows/s, their
   ratio (target: payments ≥ 0.75× orders), and the process's memory before the load
   and at its peak (it streams in batches: the growth must not scale with N). The
   payments source is the tests' DDL (``PAYMENTS_DDL``, with an undeclared column) plus
   an index on ``modified_at``, as the demo's ``orders`` has on ``updated_at``; its rows
   are generated with NumPy and written with ``executemany`` (SQLite) or ``COPY``
   (PostgreSQL).
3. **peer** — the whole first run of ``payments`` through the CLI (the code location
   ``benchmarks/payments_location.py``: ``build_definitions(settings, spec=PAYMENTS)``,
   the ``payments_match_source`` check in the same step) minus Dagster's trivial asset +
   check run through the same CLI (``benchmarks/trivial_location.py``), next to dlt's
   ``sql_table(..., backend="connectorx", primary_key=["payment_id", "attempt"],
   incremental=dlt.sources.incremental("modified_at"), write_disposition="merge")`` into
   duckdb, each into a fresh destination, median of ``--runs`` (target: ≤ 1.5× dlt).
   Needs the ``bench`` extra; without dlt this part says so and is skipped.

``--postgres ADMIN_URL``: sources and warehouses on that server (throw-away databases,
dropped at the end). ``--quick`` (the smoke test): 20,000 rows, one round; part 1 runs
only the first load through the CLI (the first run also makes the Dagster instance's
storage) and nothing in process, part 2 only at 20,000, part 3 once. Nothing is written
in the checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from common import (  # noqa: E402
    BIN,
    HERE,
    OURS,
    TRIVIAL,
    add_postgres_options,
    backend_for,
    build_source,
    change_some,
    dagster_home,
    postgres_url,
    workdir_for,
)
from dlt_child import run_pipeline  # noqa: E402
from sqlalchemy import make_url  # noqa: E402

from pipeline_assets.core.db.engines import make_engine
from pipeline_assets_tests.tables import PAYMENTS_DDL  # noqa: E402

REPO = HERE.parent
PREVIOUS = "abcf903"  # the release before the declared tables (issue 23)
CHANGED = 1_000
RECONCILE_DAYS = 7
PAYMENTS_LOCATION = ("-f", str(HERE / "payments_location.py"), "--select", "payments")
PAYMENT_STATUSES = (("captured", 0.70), ("failed", 0.15), ("refunded", 0.08), ("pending", 0.07))
NOTES = np.array(
    ["card 4242", "Grüße ☕", "retry after 3-D Secure", "naïve 'quoted'", "𝄞 refund asked", ""]
)
PART_NAMES = ("release", "rate", "peer")


# --- the previous release --------------------------------------------------------------


def previous_release(folder: Path, commit: str) -> Path:
    """``pipeline_assets/`` of ``commit``, extracted with ``git archive`` under ``folder``;
    a clear stop outside a git checkout or when the commit is not in it."""

    def git(*args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, **kw)

    try:
        inside = git("rev-parse", "--is-inside-work-tree", text=True)
    except FileNotFoundError:
        raise SystemExit(
            "bench_tables: git is not installed; the previous release is "
            "taken from this repository's history (git archive)"
        ) from None
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        raise SystemExit(
            f"bench_tables: {REPO} is not a git checkout, so the previous "
            f"release ({commit}) cannot be extracted; run it from a clone "
            "of the repository, or pass --only rate,peer"
        )
    found = git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", text=True)
    if found.returncode != 0:
        raise SystemExit(
            f"bench_tables: commit {commit} is not in this checkout (a "
            "shallow clone?): `git fetch --unshallow`, or pass --previous"
        )
    tree = folder / f"previous_{commit}"
    tree.mkdir()
    archive = git("archive", "--format=tar", commit, "pipeline_assets")
    if archive.returncode != 0:
        raise SystemExit(
            f"bench_tables: git archive {commit} failed: {archive.stderr.decode(errors='replace')}"
        )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_") and k != "PYTHONPATH"
    }
    env.update(extra)
    return env


def check_imports(env: dict, cwd: Path, expected: Path) -> None:
    """The ``pipeline_assets`` this environment imports lives under ``expected``."""
    proc = subprocess.run(
        [sys.executable, "-c", "import pipeline_assets; print(pipeline_assets.__file__)"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    got = Path(proc.stdout.strip() or "?").resolve()
    if proc.returncode != 0 or not got.is_relative_to(expected.resolve()):
        raise SystemExit(
            f"bench_tables: expected pipeline_assets from {expected}, the "
            f"environment imports {got}:\n{proc.stderr[-2000:]}"
        )


# --- runs ------------------------------------------------------------------------------


def tree_peaks(root: int, peaks: dict[int, int]) -> None:
    """Record in ``peaks`` the ``VmHWM`` (KiB) of ``root`` and of each of its descendants
    (Linux ``/proc``; nothing elsewhere)."""
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            peaks[pid] = int(status.split("VmHWM:", 1)[1].split()[0])
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, IndexError, ValueError):  # gone meanwhile, or not Linux
            continue


def materialize(env: dict, cwd: Path, *target: str) -> tuple[float, int]:
    """Seconds and peak resident memory (KiB: the largest ``VmHWM`` of the ``dagster``
    process and its descendants, the step's process being the largest, read every
    0.1 s) of one whole ``dagster asset materialize``.

    Not ``ru_maxrss`` from ``wait4``: a child started by this process (vfork + exec)
    carries this process's own peak into its ``ru_maxrss``, so after dlt's run here
    (700 MiB) every later child seemed to peak there."""
    log = cwd / "materialize.log"
    peaks: dict[int, int] = {}
    started = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(BIN / "dagster"), "asset", "materialize", *target],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        while proc.poll() is None:
            tree_peaks(proc.pid, peaks)
            time.sleep(0.1)
    seconds = time.perf_counter() - started
    text = log.read_text()
    if proc.returncode != 0:
        raise SystemExit(f"dagster asset materialize {' '.join(target)} failed:\n{text[-3000:]}")
    failed = [
        line
        for line in text.splitlines()
        if "ASSET_CHECK_EVALUATION" in line and "passed." not in line
    ]
    if failed:  # a run whose check failed did not do what is being measured
        raise SystemExit(
            f"dagster asset materialize {' '.join(target)}: a check failed:\n{failed[0][-500:]}"
        )
    return seconds, max(peaks.values(), default=0)


def child(script: str, table: str, env: dict) -> dict:
    """Run ``script`` for ``table`` in a fresh process: the JSON line it prints."""
    proc = subprocess.run(
        [sys.executable, str(HERE / script), table], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"{script} {table} failed in its subprocess:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def load_child(
    table: str, source_url: str, warehouse_url: str, pythonpath: Path | None = None
) -> dict:
    """One load in a fresh process (``load_child.py``): seconds, rows, memory."""
    env = clean_env(BENCH_SOURCE_URL=source_url, BENCH_WAREHOUSE_URL=warehouse_url)
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    return child("load_child.py", table, env)


def floor_child(table: str, source_url: str, backend) -> dict:
    """The raw database floor of one first load in a fresh process (``floor_child.py``):
    the source read by its Arrow driver, then written as the load writes and by ADBC."""
    env = clean_env(
        BENCH_SOURCE_URL=source_url,
        BENCH_WAREHOUSE_URL=backend.new_url(f"warehouse_floor_{table}"),
        BENCH_WAREHOUSE_C_URL=backend.new_url(f"warehouse_floor_c_{table}"),
    )
    return child("floor_child.py", table, env)


def last_rows_read(warehouse_url: str) -> int:
    engine = make_engine(warehouse_url, role="warehouse")
    try:
        with engine.connect() as conn:
            return int(
                conn.exec_driver_sql(
                    "SELECT rows_read FROM pipeline_batches ORDER BY id DESC"
                ).scalar()
            )
    finally:
        engine.dispose()


def mib(kib: float) -> str:
    return f"{kib / 1024:,.0f}"


def rule(header: str) -> None:
    print(header)
    print("-" * len(header))


# --- the payments source ---------------------------------------------------------------


def payment_rows(n: int, *, postgres: bool, seed: int = 1, days: int = 60, chunk: int = 100_000):
    """``n`` payments in ``PAYMENTS_DDL``'s column order (with ``legacy_code``), in chunks
    of tuples: ids in order, one to a few attempts each (80 % one), stamps over ``days``
    days from 2026-01-01 (UTC, with an offset on SQLite as the app writes them), fee
    exact with two places, 30 % NULL rate, 50 % NULL note (Unicode text), settle_on for
    captured payments only."""
    rng = np.random.default_rng(seed)
    names = np.array([s for s, _ in PAYMENT_STATUSES])
    weights = [w for _, w in PAYMENT_STATUSES]
    next_id = 0
    origin = np.datetime64("2026-01-01T00:00:00")
    for lo in range(0, n, chunk):
        size = min(chunk, n - lo)
        new = rng.random(size) >= 0.2
        new[0] = True
        ids = next_id + np.cumsum(new)
        next_id = int(ids[-1])
        starts = np.maximum.accumulate(np.where(new, np.arange(size), 0))
        attempts = np.arange(size) - starts + 1
        moments = origin + rng.integers(0, days * 86_400, size).astype("timedelta64[s]")
        stamps = moments.astype(str)
        stamps = (
            np.char.add(stamps, "+00:00")
            if not postgres
            else np.char.add(np.char.replace(stamps, "T", " "), "+00")
        )
        status = names[rng.choice(len(names), size, p=weights)]
        cents = rng.integers(100, 250_000, size)
        fee = cents * 29 // 1000 + 30
        fees = np.char.add(
            np.char.add((fee // 100).astype(str), "."), np.char.zfill((fee % 100).astype(str), 2)
        )
        rate = np.round(rng.random(size), 6)
        rate_null = rng.random(size) < 0.3
        note = NOTES[rng.integers(0, len(NOTES), size)]
        note_null = rng.random(size) < 0.5
        refundable = rng.random(size) < 0.6
        settle = (moments.astype("datetime64[D]") + 2).astype(str)
        captured = status == "captured"
        yield list(
            zip(
                ids.tolist(),
                attempts.tolist(),
                status.tolist(),
                cents.tolist(),
                fees.tolist(),
                [None if m else v for m, v in zip(rate_null.tolist(), rate.tolist(), strict=True)],
                [None if m else v for m, v in zip(note_null.tolist(), note.tolist(), strict=True)],
                refundable.tolist(),
                [v if c else None for c, v in zip(captured.tolist(), settle.tolist(), strict=True)],
                stamps.tolist(),
                ["x"] * size,
                strict=True,
            )
        )


def build_payments(backend, url: str, n: int, *, seed: int = 1) -> None:
    """The app's payments table (the tests' DDL, an index on ``modified_at``) with ``n``
    generated rows."""
    postgres = backend.name == "postgresql"
    conn = backend.raw_connect(url)
    try:
        conn.execute(PAYMENTS_DDL["postgresql" if postgres else "sqlite"].format(t="payments"))
        columns = (
            "payment_id, attempt, status, amount_cents, fee, rate, note, refundable, "
            "settle_on, modified_at, legacy_code"
        )
        for rows in payment_rows(n, postgres=postgres, seed=seed):
            if postgres:
                with conn.cursor().copy(f"COPY payments ({columns}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            else:
                conn.executemany(
                    f"INSERT INTO payments ({columns}) VALUES ({', '.join('?' * 11)})", rows
                )
        conn.execute("CREATE INDEX payments_modified_at_idx ON payments (modified_at)")
        conn.commit()
    finally:
        conn.close()


def sources(backend, args, n: int, cache: dict) -> tuple[str, str]:
    """The orders and payments sources of ``n`` rows (built once per run)."""
    if n not in cache:
        started = time.perf_counter()
        orders_url = backend.new_url(f"orders_{n}")
        build_source(orders_url, n)
        built_orders = time.perf_counter() - started
        payments_url = backend.new_url(f"payments_{n}")
        build_payments(backend, payments_url, n)
        print(
            f"sources of {n:,} rows on {backend.name}: orders in {built_orders:.0f}s, "
            f"payments in {time.perf_counter() - started - built_orders:.0f}s",
            flush=True,
        )
        cache[n] = (orders_url, payments_url)
    return cache[n]


# --- 1. orders: declared against the previous release ----------------------------------


def order_of(sides: dict, round_: int) -> list[str]:
    """The sides in the order they run in this round: the first alternates."""
    return list(sides) if round_ % 2 == 0 else list(reversed(sides))


def part_release(args, backend, folder: Path, home: Path, n: int, cache: dict) -> None:
    previous = previous_release(folder, args.previous)
    orders_url, _ = sources(backend, args, n, cache)
    sides = {}
    for side, tree in (("previous", previous), ("declared", REPO)):
        cwd = folder / side
        cwd.mkdir()
        env = clean_env(
            DAGSTER_HOME=str(home),
            SOURCE_DATABASE_URL=orders_url,
            PIPELINE_DATA_DIR=str(cwd / "data"),
            RECONCILE_DAYS=str(RECONCILE_DAYS),
        )
        if side == "previous":
            env["PYTHONPATH"] = str(previous)
        check_imports(env, cwd, tree / "pipeline_assets")
        sides[side] = (env, cwd)
    print(
        f"\n1. orders through the CLI: this checkout against the previous release "
        f"({args.previous}, git archive into {previous})",
        flush=True,
    )
    cases = ["first load", "nothing changed", f"{CHANGED:,} rows changed"]
    if args.quick:
        cases = cases[:1]
    times = {(c, s): [] for c in cases for s in sides}
    peaks = {(c, s): [] for c in cases for s in sides}
    read = {}
    for round_ in range(args.runs):
        order = order_of(sides, round_)
        for case in cases:
            if case == cases[-1] and len(cases) == 3:
                change_some(
                    orders_url, CHANGED, seed=round_ + 10, status="paid", amount=f"{round_ + 10}.23"
                )
            for side in order:
                env, cwd = sides[side]
                if case == "first load":
                    env["WAREHOUSE_DATABASE_URL"] = backend.new_url(f"warehouse_{side}")
                seconds, peak = materialize(env, cwd, *OURS)
                times[case, side].append(seconds)
                peaks[case, side].append(peak)
                read[case, side] = last_rows_read(env["WAREHOUSE_DATABASE_URL"])
    print(
        f"\nwhole `dagster asset materialize --select orders`, {n:,} orders, "
        f"{backend.name}, median of {args.runs}; ratio: declared / previous "
        "(target <= 1.10x); peak: MiB of the run's processes"
    )
    rule(
        f"{'case':<24} | {'rows read':>9} | {'previous':>8} | {'declared':>8} | "
        f"{'ratio':>6} | {'peak prev':>9} | {'peak decl':>9} | {'runs: previous / declared':<30}"
    )
    for case in cases:
        prev, decl = (statistics.median(times[case, s]) for s in sides)
        runs = (
            " ".join(f"{t:.1f}" for t in times[case, "previous"])
            + " / "
            + " ".join(f"{t:.1f}" for t in times[case, "declared"])
        )
        print(
            f"{case:<24} | {read[case, 'declared']:>9,} | {prev:>8.2f} | {decl:>8.2f} | "
            f"{decl / prev:>5.2f}x | {mib(max(peaks[case, 'previous'])):>9} | "
            f"{mib(max(peaks[case, 'declared'])):>9} | {runs:<30}"
        )
        print(
            f"  peaks of each run, MiB: previous "
            f"{' '.join(mib(k) for k in peaks[case, 'previous'])} / declared "
            f"{' '.join(mib(k) for k in peaks[case, 'declared'])}"
        )
        if read[case, "declared"] != read[case, "previous"]:
            print(f"  (rows read differ: previous {read[case, 'previous']:,})")
    if args.quick:
        return
    # The same loads without Dagster, each tree's load_orders in a fresh process.
    # (best of --runs rounds, each on fresh warehouses; the source changes each round)
    results: dict[tuple[str, str], dict] = {}
    for round_ in range(args.runs):
        warehouses = {side: backend.new_url(f"warehouse_inproc_{side}") for side in sides}
        for case in cases:
            if case == cases[-1]:
                change_some(
                    orders_url, CHANGED, seed=round_ + 90, status="paid", amount=f"{round_ + 90}.23"
                )
            for side in order_of(sides, round_):
                got = load_child(
                    "orders", orders_url, warehouses[side], previous if side == "previous" else None
                )
                if (case, side) not in results or got["seconds"] < results[case, side]["seconds"]:
                    results[case, side] = got
    print(
        f"\nthe same loads in process (load_orders, a fresh process each, {n:,} orders, "
        f"best of {args.runs}); ratio: declared / previous"
    )
    rule(
        f"{'case':<24} | {'rows read':>9} | {'previous':>8} | {'declared':>8} | "
        f"{'ratio':>6} | {'peak prev':>9} | {'peak decl':>9}"
    )
    for case in cases:
        p, d = results[case, "previous"], results[case, "declared"]
        print(
            f"{case:<24} | {d['rows_read']:>9,} | {p['seconds']:>8.2f} | "
            f"{d['seconds']:>8.2f} | {d['seconds'] / p['seconds']:>5.2f}x | "
            f"{mib(p['peak_kib']):>9} | {mib(d['peak_kib']):>9}"
        )


# --- 2. payments against orders: rows/s and memory -------------------------------------


def part_rate(args, backend, n: int, cache: dict) -> dict:
    sizes = [n] if args.quick else [n // 10, n]
    best: dict[tuple[str, int], dict] = {}
    for size in sizes:
        orders_url, payments_url = sources(backend, args, size, cache)
        repeat = args.runs if size == n else 1
        for _ in range(repeat):
            for table, url in (("orders", orders_url), ("payments", payments_url)):
                got = load_child(table, url, backend.new_url(f"warehouse_rate_{table}"))
                if (table, size) not in best or got["seconds"] < best[table, size]["seconds"]:
                    best[table, size] = got
    print(
        f"\n2. first load in process (a fresh process each, best of {args.runs} at "
        f"{n:,}), {backend.name}; ratio: payments rows/s / orders rows/s at the same "
        "size (target >= 0.75x); MiB: the process before the load and at its peak"
    )
    rule(
        f"{'case':<38} | {'rows read':>9} | {'seconds':>8} | {'rows/s':>9} | "
        f"{'ratio':>6} | {'base MiB':>8} | {'peak MiB':>8} | {'growth':>6}"
    )
    for size in sizes:
        orders_rate = best["orders", size]["rows_read"] / best["orders", size]["seconds"]
        for table, what in (("orders", "load_orders"), ("payments", "load_table(spec=PAYMENTS)")):
            got = best[table, size]
            rate = got["rows_read"] / got["seconds"]
            print(
                f"{f'{what}, {size:,}':<38} | {got['rows_read']:>9,} | "
                f"{got['seconds']:>8.2f} | {rate:>9,.0f} | {rate / orders_rate:>5.2f}x | "
                f"{mib(got['base_rss_kib']):>8} | {mib(got['peak_kib']):>8} | "
                f"{mib(got['peak_kib'] - got['base_rss_kib']):>6}"
            )
    floors = {}
    for table, url in zip(("orders", "payments"), sources(backend, args, n, cache), strict=True):
        for _ in range(1 if args.quick else args.runs):
            got = floor_child(table, url, backend)
            if table not in floors or got["read"] + got["write_driver"] < (
                floors[table]["read"] + floors[table]["write_driver"]
            ):
                floors[table] = got
    print(
        f"\n2b. the raw database floor at {n:,} (floor_child.py, best of the same runs): "
        "the source read by its Arrow driver with no check, then written into an empty "
        "table of the warehouse's DDL as the load writes (driver) or by ADBC's "
        "adbc_ingest (C); ratio: payments rows/s / orders rows/s"
    )
    rule(
        f"{'case':<40} | {'orders s':>8} | {'payments s':>10} | {'ratio':>6} | "
        f"{'load / floor: orders, payments':>30}"
    )

    def ratio(parts: tuple[str, ...], seconds: dict) -> float:
        if seconds:
            rate = {t: best[t, n]["rows_read"] / seconds[t] for t in floors}
        else:
            rate = {t: floors[t]["rows"] / sum(floors[t][x] for x in parts) for t in floors}
        return rate["payments"] / rate["orders"]

    load_s = {t: best[t, n]["seconds"] for t in ("orders", "payments")}
    cases = (
        ("read (ADBC) + write as the load does", ("read", "write_driver")),
        ("read (ADBC) + write by adbc_ingest (C)", ("read", "write_c")),
        ("read alone", ("read",)),
        ("write as the load does, alone", ("write_driver",)),
    )
    for case, parts in cases:
        o, p = (sum(floors[t][x] for x in parts) for t in ("orders", "payments"))
        versus = (
            f"{load_s['orders'] / o:>5.2f}x, {load_s['payments'] / p:.2f}x"
            if len(parts) == 2
            else ""
        )
        print(f"{case:<40} | {o:>8.2f} | {p:>10.2f} | {ratio(parts, {}):>5.2f}x | {versus:>30}")
    for table, got in floors.items():
        best["floor", table] = got  # for part 3
    floor = ratio(("read", "write_driver"), {})
    loads = ratio((), load_s)
    print(
        f"the loads' ratio {loads:.2f}x is {loads / floor:.2f} of the ratio the same "
        f"reader and writer allow ({floor:.2f}x)"
    )
    return best


# --- 3. payments: the whole first run against dlt + connectorx -------------------------


def dlt_first_load(credentials: str, folder: Path, label: str) -> tuple[float, int]:
    """dlt's first load into duckdb, in this process (``dlt_child.run_pipeline``)."""
    return run_pipeline(credentials, folder=folder, name=f"payments_{label}")


def offset_free_copy(backend, url: str, label: str) -> str:
    """A copy of the SQLite payments source at ``url`` whose stamps are written without
    their offset (the same instants): connectorx cannot parse the app's "…+00:00"."""
    copy = backend.new_url(label)
    shutil.copyfile(make_url(url).database, make_url(copy).database)
    conn = backend.raw_connect(copy)
    conn.execute("UPDATE payments SET modified_at = substr(modified_at, 1, 19)")
    conn.commit()
    conn.close()
    return copy


def part_peer(
    args, backend, folder: Path, home: Path, n: int, cache: dict, rate: dict | None
) -> None:
    try:
        import dlt
    except ImportError:
        print(
            "\n3. skipped: dlt is not installed; install the bench extra "
            "(pip install -e '.[bench]') to compare with it"
        )
        return
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    os.environ.setdefault("RUNTIME__LOG_LEVEL", "ERROR")  # its type-mapping warnings
    os.environ.setdefault("DLT_DATA_DIR", str(folder / "dlt_data"))
    _, payments_url = sources(backend, args, n, cache)
    dlt_url, ours_on_copy = payments_url, None
    if backend.name == "sqlite":  # connectorx cannot parse the app's "…+00:00" stamps
        # (dlt reads a copy whose stamps are written without the offset: the same instants)
        dlt_url = offset_free_copy(backend, payments_url, f"payments_{n}_naive")
        if not args.quick:
            ours_on_copy = load_child(
                "payments", dlt_url, backend.new_url("warehouse_payments_naive")
            )
    cwd = folder / "payments_cli"
    cwd.mkdir()
    env = clean_env(
        DAGSTER_HOME=str(home),
        SOURCE_DATABASE_URL=payments_url,
        PIPELINE_DATA_DIR=str(cwd / "data"),
        RECONCILE_DAYS=str(RECONCILE_DAYS),
    )
    runs = 1 if args.quick else args.runs
    trivial, whole, peaks, dlt_runs = [], [], [], []
    for round_ in range(runs):
        trivial.append(materialize(env, cwd, *TRIVIAL)[0])
        env["WAREHOUSE_DATABASE_URL"] = backend.new_url("warehouse_payments_cli")
        seconds, peak = materialize(env, cwd, *PAYMENTS_LOCATION)
        whole.append(seconds)
        peaks.append(peak)
        read = last_rows_read(env["WAREHOUSE_DATABASE_URL"])
        credentials = dlt_url.replace("postgresql+psycopg://", "postgresql://")
        dlt_runs.append(dlt_first_load(credentials, folder, f"r{round_}"))
    dlt_s = statistics.median(s for s, _ in dlt_runs)
    base = statistics.median(trivial)
    whole_s = statistics.median(whole)
    print(
        f"\n3. payments, first load of {n:,} rows, {backend.name}, median of {runs}; "
        f"ratio: / dlt {dlt.__version__} + connectorx (target for the whole run minus "
        "the trivial run: <= 1.50x)"
    )
    rule(f"{'case':<52} | {'rows':>9} | {'seconds':>8} | {'ratio':>6} | {'runs':<20}")
    lines = [
        (
            "dlt sql_table(connectorx) -> duckdb, merge",
            dlt_runs[0][1],
            dlt_s,
            [s for s, _ in dlt_runs],
        ),
        (
            "payments whole run (CLI) - trivial run",
            read,
            whole_s - base,
            [w - t for w, t in zip(whole, trivial, strict=True)],
        ),
        ("payments whole run (CLI)", read, whole_s, whole),
        ("trivial asset + check (CLI)", 1, base, trivial),
    ]
    if rate and ("payments", n) in rate:
        got = rate["payments", n]
        lines.insert(
            2,
            (
                "load_table(spec=PAYMENTS) in process (part 2)",
                got["rows_read"],
                got["seconds"],
                [got["seconds"]],
            ),
        )
    if rate and ("floor", "payments") in rate:
        floor = rate["floor", "payments"]
        for label, part in (("as the load writes", "write_driver"), ("by adbc_ingest", "write_c")):
            seconds = floor["read"] + floor[part]
            lines.append(
                (f"raw floor (part 2b): read + write {label}", floor["rows"], seconds, [seconds])
            )
    if ours_on_copy:
        lines.insert(
            3,
            (
                "load_table(spec=PAYMENTS), dlt's copy (no offsets)",
                ours_on_copy["rows_read"],
                ours_on_copy["seconds"],
                [ours_on_copy["seconds"]],
            ),
        )
    for case, rows, seconds, each in lines:
        print(
            f"{case:<52} | {rows:>9,} | {seconds:>8.2f} | {seconds / dlt_s:>5.2f}x | "
            f"{' '.join(f'{t:.1f}' for t in each):<20}"
        )
    print(
        f"peak memory of the payments whole runs (each run): {' '.join(mib(k) for k in peaks)} MiB"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows",
        type=int,
        default=1_000_000,
        help="orders and payments in the sources (default 1,000,000)",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--previous", default=PREVIOUS, help=f"the previous release's commit (default {PREVIOUS})"
    )
    parser.add_argument(
        "--only",
        default=",".join(PART_NAMES),
        help="parts to run, comma-separated: release, rate, peer",
    )
    add_postgres_options(parser, "sources and warehouses")
    parser.add_argument(
        "--quick", action="store_true", help="20,000 rows, one round, the first load only"
    )
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PART_NAMES))
    if unknown:
        parser.error(
            f"--only: unknown part(s) {', '.join(unknown)}; known: {', '.join(PART_NAMES)}"
        )
    if args.quick:
        args.rows, args.runs = 20_000, 1
    folder = workdir_for(args, "bench_tables_")
    started = time.perf_counter()
    backend = backend_for(folder, postgres_url(args))
    cache: dict = {}
    try:
        home = dagster_home(folder)
        print(
            f"bench_tables: {args.rows:,} rows, {args.runs} run(s), parts "
            f"{', '.join(parts)}, {backend.name}, workdir {folder}",
            flush=True,
        )
        # the instance's storage, made once (--quick: by its first measured run)
        if not args.quick and ("release" in parts or "peer" in parts):
            materialize(clean_env(DAGSTER_HOME=str(home)), folder, *TRIVIAL)
        if "release" in parts:
            part_release(args, backend, folder, home, args.rows, cache)
        rate = part_rate(args, backend, args.rows, cache) if "rate" in parts else None
        if "peer" in parts:
            part_peer(args, backend, folder, home, args.rows, cache, rate)
    finally:
        backend.close()
        if not args.workdir:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
