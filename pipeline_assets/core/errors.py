"""The one family of errors a user can fix.

Every error the pipeline raises on purpose is a :class:`PipelineError`: its message is
one line that says what failed (which row, day, file or database) and what to do next,
with passwords redacted. The edges — the CLI's ``main``, the assets, the sensors — catch
this family and nothing broader, so anything else (a bug) surfaces as itself, with its
traceback.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Something the user can fix; ``str(error)`` is the one-line message to show.

    ``retryable`` says whether running again unchanged may succeed (an unreachable
    database may come back; a bad row in the source does not fix itself), so a Dagster
    run retries only the errors that can pass.
    """

    retryable: bool = True
