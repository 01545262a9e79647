"""The smallest code location with one asset and one check: Dagster's own per-run cost.

``bench_run_cost.py`` materializes ``trivial`` (its check declared on the asset, so both
run in the asset's step) and ``trivial_separate`` (a separate ``@asset_check``, its own
step) through the same ``dagster asset materialize`` as ``orders``.
"""

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    Definitions,
    MaterializeResult,
    asset,
    asset_check,
)


@asset(check_specs=[AssetCheckSpec("ok", asset="trivial")])
def trivial() -> MaterializeResult:
    return MaterializeResult(
        metadata={"rows": 1}, check_results=[AssetCheckResult(check_name="ok", passed=True)]
    )


@asset
def trivial_separate() -> MaterializeResult:
    return MaterializeResult(metadata={"rows": 1})


@asset_check(asset=trivial_separate)
def separate_ok() -> AssetCheckResult:
    return AssetCheckResult(passed=True)


defs = Definitions(assets=[trivial, trivial_separate], asset_checks=[separate_ok])
