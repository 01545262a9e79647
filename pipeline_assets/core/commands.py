"""Every command the pipeline prints for a user to type, built in one place.

Repairs are Dagster runs: an explicit-range run of a table's asset (it reads exactly the
days asked and leaves the watermark alone) and a rebuild of the partitions of its daily
files and their totals (``paid_orders`` and ``daily_revenue`` for ``orders``) of a day or
a range of days. ``verify``, the ``N_match_source`` check and the error of an uncommitted
day all print them from here, so they cannot drift apart; a test runs each form through
the real ``dagster`` CLI.

Each command names the code location it was computed for (``-m shop.definitions``; the
default is this project's) and the table's own asset names (``spec.names``). It is one
line, shell-quoted word by word (:func:`shlex.join`), so it is safe to paste as printed,
and callers print nothing after it on its line.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence
from datetime import date, timedelta

from .days import days_between, runs
from .table.spec import TableSpec

DEFINITIONS_MODULE = "pipeline_assets.definitions"
DEMO_INIT = "pipeline-assets demo init"


def verify_command(module: str | None = None, *, require_all: bool = True) -> str:
    """``pipeline-assets verify`` of the code location ``module``: what a user without the
    daemon runs after a load, whose rebuilds (``--require-all``) it prints."""
    parts = ["pipeline-assets", "verify"]
    if module is not None and module != DEFINITIONS_MODULE:
        parts += ["-m", module]
    return shlex.join(parts + (["--require-all"] if require_all else []))


def materialize(
    select: Sequence[str],
    *,
    first: str | None = None,
    last: str | None = None,
    config: dict | None = None,
    module: str = DEFINITIONS_MODULE,
) -> str:
    """``dagster asset materialize -m module`` of ``select``: for days ``first``…``last``
    (inclusive, one ``--partition`` when they are the same day) and/or with run
    ``config``."""
    parts = ["dagster", "asset", "materialize", "-m", module, "--select", ",".join(select)]
    if first is not None:
        last = last or first
        parts += (
            ["--partition", first] if first == last else ["--partition-range", f"{first}...{last}"]
        )
    if config is not None:
        parts += ["--config-json", json.dumps(config)]
    return shlex.join(parts)


def range_command(
    first: str,
    last: str,
    *,
    allow_deletes: bool = False,
    spec: TableSpec,
    module: str = DEFINITIONS_MODULE,
) -> str:
    """The explicit-range run of ``spec``'s asset that reloads days ``first``…``last``
    (inclusive); with ``allow_deletes``, one that may delete more than MAX_DELETE_SHARE
    of them."""
    end = (date.fromisoformat(last) + timedelta(days=1)).isoformat()
    config: dict = {"start": first, "end": end}
    if allow_deletes:
        config["allow_deletes"] = True
    asset = spec.names.asset  # the op of N is named N
    return materialize([asset], config={"ops": {asset: {"config": config}}}, module=module)


def daily_assets(spec: TableSpec, files: str | None = None) -> list[str]:
    """The assets a rebuild of ``spec``'s day runs: each daily file and its totals (only
    the file named ``files``, when given)."""
    chosen = [f for f in spec.daily_files if files is None or f.name == files]
    if not chosen:
        raise ValueError(
            f"{spec.name} declares no daily files"
            + (f" named {files!r}" if files is not None else "")
        )
    return [name for f in chosen for name in (f.name, f.totals and f.totals.name) if name]


def rebuild_command(
    first: str,
    last: str | None = None,
    *,
    spec: TableSpec,
    module: str = DEFINITIONS_MODULE,
    files: str | None = None,
) -> str:
    """The run that rebuilds days ``first``…``last`` of ``spec``'s daily files and their
    totals (``paid_orders`` + ``daily_revenue`` for ``orders``; only ``files`` when
    given)."""
    return materialize(daily_assets(spec, files), first=first, last=last or first, module=module)


def repair_commands(
    load_days: Iterable[str],
    rebuild_days: Iterable[str],
    allow_deletes: Iterable[str] = (),
    *,
    spec: TableSpec,
    module: str = DEFINITIONS_MODULE,
) -> list[str]:
    """Loads first (they change the warehouse), then the rebuilds that read it; one
    command per range of consecutive days. A load over any of ``allow_deletes`` (days
    whose named deletions are more than MAX_DELETE_SHARE of the day) allows them."""
    allowed = set(allow_deletes)
    loads = [
        range_command(
            a,
            b,
            allow_deletes=bool(
                allowed & set(days_between(date.fromisoformat(a), date.fromisoformat(b)))
            ),
            spec=spec,
            module=module,
        )
        for a, b in runs(load_days)
    ]
    rebuilds = [rebuild_command(a, b, spec=spec, module=module) for a, b in runs(rebuild_days)]
    return loads + rebuilds
