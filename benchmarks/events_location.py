"""A code location declaring the tests' append-only table, ``events``, as a user's would.

``bench_lookback_ids.py`` materializes ``events`` (its ``events_match_source`` check in
the same step) through the real ``dagster asset materialize``: ``EVENTS`` of
``pipeline_assets_tests/tables.py`` (an integer cursor, ``occurred_at`` its day column)
with the default ``lookback_ids``, built by ``build_definitions(settings, spec=…)`` as
the component builds each declaration.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline_assets import settings  # noqa: E402
from pipeline_assets.core.table.declare import declare  # noqa: E402
from pipeline_assets.definitions import build_definitions  # noqa: E402
from pipeline_assets_tests.tables import EVENTS_ATTRIBUTES  # noqa: E402

EVENTS = declare({k: v for k, v in EVENTS_ATTRIBUTES.items() if k != "lookback_ids"})
defs = build_definitions(settings.from_env(), spec=EVENTS)
