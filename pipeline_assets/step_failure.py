"""How whatever a step raises becomes its failure: one rule for every asset of every
table and for the IO manager of their day files.

- A :class:`~.core.errors.PipelineError` (a bad row, a missing column, a refused delete,
  a database that does not answer) fails the step with its one line as the failure's
  description, which is the first line a user sees of it; for a table declared in a
  ``defs.yaml`` the line names the table and that file (:meth:`TableSpec.about`). The
  step's RetryPolicy retries it only when it is transient (``retryable``).
- Anything else is either a driver's failure the core did not word, retried when it is
  transient (:func:`~.core.errors.retryable`: a database unreachable, busy or full, a
  connection lost), or a bug: that fails at once, not retried (running again unchanged
  fails the same way), saying so on its first line, with its traceback kept as the
  failure's cause.
- Dagster's own (:class:`Failure`, :class:`RetryRequested`) pass through as raised.

No `from __future__ import annotations` here, as in every module of the Dagster layer.
"""

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Optional, Union

from dagster import Failure, RetryRequested

from pipeline_assets.core.table.spec import TableSpec

from .core.errors import PipelineError, retryable

# what names the table and its declaration file in a message: a spec, or its ``about``
About = Optional[Union[TableSpec, Callable[[str], str]]]  # noqa: UP007, UP045


def _told(about: About, message: str) -> str:
    if about is None:
        return message
    return about.about(message) if isinstance(about, TableSpec) else about(message)


def step_failure(
    exc: PipelineError,
    about: About = None,
    metadata: Optional[Mapping] = None,  # noqa: UP045 - the Dagster layer's annotations
) -> Failure:
    """The step's failure for an error a user can fix: its one line (naming the table and
    its declaration file), retried only when a retry can pass."""
    return Failure(
        description=_told(about, str(exc)), allow_retries=exc.retryable, metadata=metadata
    )


def internal_failure(exc: BaseException, about: About = None) -> Failure:
    """The step's failure for a bug: not retried, its first line saying what it is."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    what = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    message = (
        f"internal error ({what}): a bug of pipeline_assets, not a failure that may pass, "
        "so the step is not retried (running it again unchanged fails the same way). The "
        "stack trace below shows where; please report it with the declaration."
    )
    return Failure(description=_told(about, message), allow_retries=False)


@contextmanager
def failing_step(about: About = None) -> Iterator[None]:
    """Turn what the block raises into the step's failure, by the rules above; ``about``
    (a table's spec, or a function that names what failed) words its first line."""
    try:
        yield
    except (Failure, RetryRequested):
        raise
    except PipelineError as exc:
        raise step_failure(exc, about) from exc  # its first line; where it came from below
    except Exception as exc:
        if retryable(exc):
            raise  # Dagster's RetryPolicy takes it: a database or a connection may come back
        raise internal_failure(exc, about) from exc
