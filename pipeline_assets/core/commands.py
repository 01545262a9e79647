"""Every command the pipeline prints for a user to type, built in one place.

Repairs are Dagster runs: an explicit-range ``orders`` run (it reads exactly the days
asked and leaves the watermark alone) and a rebuild of the ``paid_orders`` and
``daily_revenue`` partitions of a day or a range of days. ``verify``, the
``orders_match_source`` check and the error of an uncommitted day all print them from
here, so they cannot drift apart; a test runs each form through the real ``dagster`` CLI.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence
from datetime import date, timedelta

from .days import days_between, runs

DEFINITIONS_MODULE = "pipeline_assets.definitions"
DAILY_FILES = ("paid_orders", "daily_revenue")
DEMO_INIT = "pipeline-assets demo init"


def materialize(select: Sequence[str], *, first: str | None = None, last: str | None = None,
                config: dict | None = None) -> str:
    """``dagster asset materialize`` of ``select``: for days ``first``…``last`` (inclusive,
    one ``--partition`` when they are the same day) and/or with run ``config``."""
    parts = ["dagster", "asset", "materialize", "-m", DEFINITIONS_MODULE,
             "--select", ",".join(select)]
    if first is not None:
        last = last or first
        parts += (["--partition", first] if first == last
                  else ["--partition-range", f"{first}...{last}"])
    if config is not None:
        parts += ["--config-json", shlex.quote(json.dumps(config))]
    return " ".join(parts)


def orders_range_command(first: str, last: str, *, allow_deletes: bool = False) -> str:
    """The explicit-range ``orders`` run that reloads days ``first``…``last`` (inclusive);
    with ``allow_deletes``, one that may delete more than MAX_DELETE_SHARE of them."""
    end = (date.fromisoformat(last) + timedelta(days=1)).isoformat()
    config: dict = {"start": first, "end": end}
    if allow_deletes:
        config["allow_deletes"] = True
    return materialize(["orders"], config={"ops": {"orders": {"config": config}}})


def rebuild_command(first: str, last: str | None = None) -> str:
    """The ``paid_orders`` + ``daily_revenue`` run that rebuilds days ``first``…``last``."""
    return materialize(DAILY_FILES, first=first, last=last or first)


def repair_commands(load_days: Iterable[str], rebuild_days: Iterable[str],
                    allow_deletes: Iterable[str] = ()) -> list[str]:
    """Loads first (they change the warehouse), then the rebuilds that read it; one
    command per range of consecutive days. A load over any of ``allow_deletes`` (days
    whose named deletions are more than MAX_DELETE_SHARE of the day) allows them."""
    allowed = set(allow_deletes)
    return ([orders_range_command(a, b, allow_deletes=bool(allowed & set(days_between(
                 date.fromisoformat(a), date.fromisoformat(b)))))
             for a, b in runs(load_days)]
            + [rebuild_command(a, b) for a, b in runs(rebuild_days)])
