"""How the committed lookup of one day scales with the number of manifests in the folder.

    .venv/bin/python benchmarks/bench_committed_lookup.py [--sizes 1000,10000,100000]
        [--repeat 2000] [--quick] [--workdir DIR]

For each size N it fills a folder with N manifests (one per run, each listing
three days; written directly, without fsync, so generating them is cheap), a year of day
files, and the pointers, then times, in the same run:

- ``json.load``: a plain open + ``json.load`` of the day file (what an unchecked reader does);
- ``committed``: ``read_committed_day`` (pointer → manifest → sha256 → rows), with and
  without the shared lock;
- ``scan``: the naive check, reading every manifest to find the newest that lists the day.

The committed lookup should stay flat in N; the scan grows linearly. ``--quick`` uses
100 and 1,000 manifests and 200 lookups (a smoke run). The folders are temporary (removed
at the end) unless ``--workdir`` names where to keep them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from datetime import date, timedelta
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline_assets.core.daily_files import (
    MANIFEST_RE,
    read_committed_day,
    rebuild_pointers,
    serialize_day,
    sha256_hex,
)
from pipeline_assets.core.table import ORDERS

DAYS = [(date(2026, 1, 1) + timedelta(days=i)).isoformat() for i in range(365)]
TARGET = "2026-06-15"


def _dump(value) -> bytes:
    return (json.dumps(value, sort_keys=True, separators=(",", ":")) + "\n").encode()


def build(folder: Path, n_manifests: int) -> None:
    """A year of day files and ``n_manifests`` runs, each rewriting three days."""
    blobs = {}
    for i, day in enumerate(DAYS):
        rows = [
            {
                "order_id": i * 100 + k,
                "status": "paid",
                "amount": f"{k}.50",
                "updated_at": f"{day}T0{k % 10}:00:00+00:00",
            }
            for k in range(20)
        ]
        blobs[day] = serialize_day(day, rows, spec=ORDERS)
        (folder / f"{day}.json").write_bytes(blobs[day])
    files = {day: {"rows": 20, "sha256": sha256_hex(data)} for day, data in blobs.items()}
    for seq in range(1, n_manifests + 1):
        days = sorted({DAYS[seq % 365], DAYS[(seq * 7) % 365], TARGET})
        (folder / f"_manifest_run-{seq:07d}.json").write_bytes(
            _dump(
                {
                    "run_id": f"run-{seq:07d}",
                    "sequence": seq,
                    "days_written": days,
                    "watermark": None,
                    "written_at": "2026-12-31T00:00:00+00:00",
                    "files": {day: files[day] for day in days},
                }
            )
        )
    rebuild_pointers(folder)  # one-time repair scan: builds the pointers of every day


def naive_scan(folder: Path, day: str) -> list:
    """The baseline: the newest manifest listing the day, found by reading them all."""
    best = None
    for path in folder.iterdir():
        if MANIFEST_RE.fullmatch(path.name):
            manifest = json.loads(path.read_bytes())
            if day in manifest["files"] and (
                best is None or manifest["sequence"] > best["sequence"]
            ):
                best = manifest
    data = (folder / f"{day}.json").read_bytes()
    if best is None or sha256_hex(data) != best["files"][day]["sha256"]:
        raise ValueError(f"{day} is not committed")
    return json.loads(data)


def plain_load(folder: Path, day: str) -> list:
    with open(folder / f"{day}.json") as handle:
        return json.load(handle)


def per_call(fn, repeat: int) -> float:
    """Median seconds per call over ``repeat`` calls (after one warm-up)."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        help="comma-separated numbers of manifests "
        "(default: 1000,10000,100000; with --quick 100,1000)",
    )
    parser.add_argument(
        "--repeat", type=int, help="lookups timed per size (default 2000; with --quick 200)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, few lookups")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep the folders here (default: temporary folders, removed at the end)",
    )
    args = parser.parse_args(argv)
    sizes = [
        int(s)
        for s in (args.sizes or ("100,1000" if args.quick else "1000,10000,100000")).split(",")
    ]
    repeat = args.repeat or (200 if args.quick else 2000)
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)

    header = (
        f"{'manifests':>10} | {'json.load':>10} | {'committed':>10} | {'no lock':>10} | "
        f"{'ratio':>6} | {'naive scan':>11} | {'scan/committed':>14} | {'build':>7}"
    )
    print(header)
    print("-" * len(header))
    for n in sizes:
        folder = Path(tempfile.mkdtemp(prefix=f"bench_committed_{n}_", dir=args.workdir))
        try:
            started = time.perf_counter()
            build(folder, n)
            built = time.perf_counter() - started
            expected = plain_load(folder, TARGET)
            assert read_committed_day(folder, TARGET) == expected
            assert naive_scan(folder, TARGET) == expected
            plain = per_call(partial(plain_load, folder, TARGET), repeat)
            locked = per_call(partial(read_committed_day, folder, TARGET), repeat)
            unlocked = per_call(
                partial(read_committed_day, folder, TARGET, wait_for_writer=False), repeat
            )
            scan = per_call(partial(naive_scan, folder, TARGET), 1 if n >= 50_000 else 3)
            print(
                f"{n:>10,} | {plain * 1e6:>8.0f}µs | {locked * 1e6:>8.0f}µs | "
                f"{unlocked * 1e6:>8.0f}µs | {locked / plain:>5.1f}x | "
                f"{scan * 1e3:>9.0f}ms | {scan / locked:>13,.0f}x | {built:>6.1f}s",
                flush=True,
            )
        finally:
            if not args.workdir:
                shutil.rmtree(folder, ignore_errors=True)
    print(
        "\njson.load: plain open + json.load of the day file (no check); committed: "
        "read_committed_day (pointer, manifest, sha256, shared lock); no lock: the same "
        "with wait_for_writer=False; ratio: committed / json.load; naive scan: read every "
        "manifest. Times are medians per lookup."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
