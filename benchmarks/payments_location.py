"""A code location declaring the tests' second table, ``payments``, as a user's would.

``bench_tables.py`` materializes ``payments`` (its ``payments_match_source`` check in the
same step) through the same ``dagster asset materialize`` as ``orders``: the declaration
is ``PAYMENTS`` of ``pipeline_assets_tests/tables.py`` (composite key payment_id +
attempt, ten columns of every type, NULLs, the ``captured_payments`` day files), built by
``build_definitions(settings, spec=PAYMENTS)`` as the component builds each declaration.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline_assets import settings  # noqa: E402
from pipeline_assets.definitions import build_definitions  # noqa: E402
from pipeline_assets_tests.tables import PAYMENTS  # noqa: E402

defs = build_definitions(settings.from_env(), spec=PAYMENTS)
