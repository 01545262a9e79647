"""The two checks of a table asset, run in its load's own step (:mod:`.assets`): rows
arriving late by half the lookback window or more, and source and warehouse agreeing
day by day.
"""

from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

from pipeline_assets.core.table.spec import TableSpec

from .core.commands import DEFINITIONS_MODULE, verify_command

if TYPE_CHECKING:
    from pipeline_assets.core.load.result import LoadResult

LATENESS_CHECK = "lateness_within_lookback"


def key_value(value):
    """A key as metadata shows it: a list for a key of several columns, text for a date."""
    if isinstance(value, tuple):
        return [key_value(v) for v in value]
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return value


def lateness_check(result: "LoadResult", lookback_days: int, spec: TableSpec) -> AssetCheckResult:
    """Warn when rows arrive late by half the lookback window or more: widen it in time
    (an integer cursor's: in ids, against its ``lookback_ids``)."""
    worst = result.max_lateness
    if spec.counts_ids:
        worst, lookback = worst or 0, spec.lookback_ids
        return _lateness(
            result,
            worst * 2 < lookback,
            f"committed up to {worst} id(s) below the watermark, at least half the lookback "
            f"of {lookback} id(s): rows later than that are missed by incremental loads "
            "(verify finds them). Widen lookback_ids.",
            {"max_lateness_ids": worst, "late_rows": result.late_rows, "lookback_ids": lookback},
        )
    hours = worst.total_seconds() / 3600 if worst else 0.0
    return _lateness(
        result,
        worst is None or worst < timedelta(days=lookback_days) / 2,
        f"arrived up to {hours:.1f} h behind the watermark, at least half the lookback "
        f"window of {lookback_days} day(s): rows later than the window are missed by "
        "incremental loads. Widen LOOKBACK_DAYS.",
        {
            "max_lateness_hours": round(hours, 3),
            "late_rows": result.late_rows,
            "lookback_days": lookback_days,
        },
    )


def _lateness(result: "LoadResult", passed: bool, why: str, metadata: dict) -> AssetCheckResult:
    """The check's result: ``why`` (after the count of late rows) when it warns."""
    return AssetCheckResult(
        check_name=LATENESS_CHECK,
        passed=passed,
        severity=AssetCheckSeverity.WARN,
        description=None if passed else f"{result.late_rows} row(s) {why}",
        metadata=metadata,
    )


def reconcile_check(
    source,
    warehouse,
    tz,
    horizon_days: int,
    days_touched: list[str],
    read_whole=None,
    max_delete_share: float = 0.5,
    *,
    spec: TableSpec,
    module: str = DEFINITIONS_MODULE,
    full_at: datetime | None = None,
) -> AssetCheckResult:
    """Source and warehouse agree day by day over the days the load read whole, compared
    with what it read (``read_whole``), within the window ending at the watermark (no
    clock: the window is anchored on the data, core/verify/horizon.py) and beyond it.
    ``full_at`` (the daily schedule's run): the whole window, and every day touched since
    the last full comparison."""
    from pipeline_assets.core.verify.horizon import reconcile_horizon

    from .core.verify import Repairs, VerifyError

    check = spec.names.match_check
    try:
        h, days, verdict = reconcile_horizon(
            source.engine(),
            warehouse.engine(),
            tz,
            reconcile_days=horizon_days,
            days_touched=days_touched,
            read_whole=read_whole,
            max_delete_share=max_delete_share,
            spec=spec,
            repairs=Repairs(spec, module),
            full_at=full_at,
        )
    except VerifyError as exc:
        return AssetCheckResult(check_name=check, passed=False, description=str(exc))
    return AssetCheckResult(
        check_name=check,
        passed=verdict.passed,
        description=verdict.description or _deferred(h, module),
        metadata=_metadata(h, days, verdict, full=full_at is not None),
    )


def _metadata(h, days, verdict, *, full: bool) -> dict:
    """What the check's evaluation shows: its days, what differs, the repair."""
    return {
        "comparison": "full" if full else "load",
        "anchored_on": h.anchored_on,
        "anchor": h.anchor.isoformat() if h.anchor else "none",
        "window": f"{h.first}...{h.last}" if h.first else "none",
        "touched_outside_window": MetadataValue.json([str(d) for d in h.touched]),
        "deferred_days": MetadataValue.json([str(d) for d in h.deferred]),
        "window_days_left": MetadataValue.json([str(d) for d in h.left]),
        "owed_days": MetadataValue.json([str(d) for d in h.owed]),
        "days_compared": verdict.days_compared,
        "differing_days": MetadataValue.json(verdict.differing),
        "deleted_from_source": MetadataValue.json(
            {
                d: key_value(days[d].only_in_warehouse)
                for d in verdict.differing
                if days[d].only_in_warehouse
            }
        ),
        "repair": MetadataValue.json(verdict.repair),
        **({"days_to_fill": MetadataValue.json(verdict.to_fill)} if verdict.to_fill else {}),
    }


def _deferred(h, module: str) -> str | None:
    """What a passing load's check left to the full comparison, if anything."""
    parts = []
    if h.left:
        parts.append(
            f"{len(h.left)} day(s) of the window this load did not read ("
            + ", ".join(str(d) for d in h.left)
            + ")"
        )
    if h.deferred:
        parts.append(
            f"{len(h.deferred)} day(s) the batch touched outside the window without reading "
            "them (rows left them for newer days: " + ", ".join(str(d) for d in h.deferred) + ")"
        )
    if not parts:
        return None
    return (
        "Compared the days this load read. "
        + " and ".join(parts)
        + " are left to the full comparison of the daily schedule's run and to "
        f"`{verify_command(module)}`, which find a row later than the lookback window."
    )
