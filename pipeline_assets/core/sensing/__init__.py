"""What the sensors see and decide, as plain values (the Dagster layer only unpacks).

Written here for ``orders`` (``new_orders_sensor``, ``paid_orders_refresh_sensor``); every
declared table has the same two (``new_N_sensor``, ``F_refresh_sensor``): the observation
and the load's tick take the table's ``spec`` and ask about its own key and cursor.

``new_orders_sensor`` asks the source one indexed question per tick about the lookback
window of the next incremental read (``updated_at >= watermark − lookback``): how many
rows, the sum of their ``order_id``, the newest ``updated_at`` as stored, and a
fingerprint of every ``(order_id, updated_at)`` pair. That answer — an
:class:`Observation` — is compared with the one kept in the sensor's cursor. The cursor
records only what was *seen*; whether it was loaded is the watermark's business alone.

The observation notices new rows, late rows older than the newest one (the count and
the id sum change), and an app update that re-sets ``updated_at`` of a row already in
the window (the fingerprint changes). It cannot notice a change of ``status`` or
``amount`` that leaves ``updated_at`` alone — no incremental reader can — and, on a
database without a fingerprint (see :func:`_fingerprint`), a re-set ``updated_at`` that
is not the new newest. Such changes are picked up by the next run that reads the
window: the next change the sensor sees, or the daily schedule.

``paid_orders_refresh_sensor`` turns the ``days_touched`` of each ``orders``
materialization into runs over the days that exist as partitions: one run per
contiguous block of touched days (see :func:`day_blocks`).

Both sensors decide from what has *landed*, not from what they asked for. A run can
die at any point (a preempted pod, an OOM kill): so each sensor keeps in its cursor the
requests it made and looks up, on every tick, what became of their runs — the run it
requested, or a retry Dagster launched for it (:func:`request_outcome`). A request is
settled only by a successful run; a run that failed or was canceled is requested again
under a new run key, and while one is queued or running nothing is requested for the
same work. ``new_orders_sensor`` keeps one request (:class:`LoadCursor`);
``paid_orders_refresh_sensor`` keeps the days it owes until a successful run requested
after they became owed has rebuilt them (:class:`RefreshCursor`).

The package, by concern: :mod:`.outcomes` (what became of a requested run),
:mod:`.observation` (the question to the source), :mod:`.load_cursor` (the new-orders
sensor's request and its tick), :mod:`.refresh_cursor` (the refresh sensor's days owed).
"""

from .load_cursor import (
    LOAD_CURSOR_VERSION,
    LoadCursor,
    LoadTick,
    Request,
    check_source,
    decide_load,
    load_run_key,
    read_watermark,
)
from .observation import (
    CURSOR_VERSION,
    Decision,
    Observation,
    check,
    decide,
    observation_start,
    observe,
)
from .outcomes import GRACE_SECONDS, IN_FLIGHT, Outcome, RunView, request_outcome, retry_delay
from .refresh_cursor import (
    REFRESH_CURSOR_VERSION,
    DayBlock,
    RefreshCursor,
    RefreshRequest,
    RefreshTick,
    Touched,
    day_blocks,
    partition_days,
    refresh_run_key,
    refresh_tick,
)

__all__ = [
    "CURSOR_VERSION",
    "GRACE_SECONDS",
    "IN_FLIGHT",
    "LOAD_CURSOR_VERSION",
    "REFRESH_CURSOR_VERSION",
    "DayBlock",
    "Decision",
    "LoadCursor",
    "LoadTick",
    "Observation",
    "Outcome",
    "RefreshCursor",
    "RefreshRequest",
    "RefreshTick",
    "Request",
    "RunView",
    "Touched",
    "check",
    "check_source",
    "day_blocks",
    "decide",
    "decide_load",
    "load_run_key",
    "observation_start",
    "observe",
    "partition_days",
    "read_watermark",
    "refresh_run_key",
    "refresh_tick",
    "request_outcome",
    "retry_delay",
]
