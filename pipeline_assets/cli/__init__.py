"""The ``pipeline-assets`` command line (see docs/contract.md): a thin argparse shell over
``core``: the ``demo`` commands in :mod:`.demo`, those that work on a code location's
tables in :mod:`.tables`, what a handler is given in :mod:`.context`.

Every command reads its settings through :func:`pipeline_assets.settings.from_env` (the one
place that reads the environment), opens the databases it needs, calls one core function
and prints the result. Importing it imports no Dagster; the table commands load the code
location they are pointed at (which does), and nothing else of Dagster.

Output: results go to stdout: JSON for ``demo generate``, ``watermark show``, ``plan``,
``watermark history --json`` and ``verify --json``; one line of text for ``demo init``,
``demo set``, ``demo delete`` and ``watermark rewind``; and for ``watermark history`` one
line per change, oldest first,
``<changed_at>  <kind>  <old> -> <new>  batch <batch_id> | reason: <reason>``
(all times ISO-8601). ``plan`` prints the fields of core's ``LoadResult`` (the same names as the
``orders`` materialization metadata: ``window_start``, ``window_end``,
``watermark_before``, ``watermark_after``, ``rows_read``, ``inserted``, ``updated``,
``unchanged``, ``days_touched``, ...) plus ``lookback_days``, ``warehouse`` (redacted URL)
and ``warehouse_exists``. ``verify`` prints one block per day that differs, each with the
command that repairs it (see docs/verify.md), and exits 1 when any day needs repair.
Errors a user can fix (a ``PipelineError``) go to stderr as ONE line,
``pipeline-assets: error: <what failed and what to do>``, never with a traceback and never
with a database password in it. Anything else is a bug and surfaces as itself, with its
traceback.

Exit codes:

- ``0``: done.
- ``1``: the command could not do what was asked, and wrote nothing: bad input (an
  unparseable date or amount, a forward rewind), an unreachable database, a missing
  source table, invalid settings in the environment; for ``verify``, a day that needs
  repair (or, with ``--require-all``, one never built).
- ``2``: the command line itself is malformed: unknown command, missing or unknown
  option, a number option that is not a number (argparse's usage errors).
- ``130``: interrupted (Ctrl-C).

The code location: ``watermark show|rewind|history``, ``plan`` and ``verify`` work on the
tables a code location declares, found as ``dagster -m MODULE`` finds its definitions
(``-m``, default ``pipeline_assets.definitions``; :func:`pipeline_assets.location.
declared_tables`, which imports Dagster and the module only when such a command runs).
``--table N`` picks one; it is needed only when the location declares several, and
``verify`` without it checks every table. Each table reads its own source
(``source_url``, else SOURCE_DATABASE_URL), watermark, lookback and delete share, and
every command ``verify`` prints names the same ``-m MODULE`` and the table's assets.

SQLite files: only ``demo init`` creates the source file (and its folder). Every other
command refuses to run against a source file that does not exist rather than let SQLite
create an empty one. Commands that only read the warehouse (``watermark show``,
``watermark history``, ``watermark rewind``, ``plan``) use an empty in-memory warehouse
(``sqlite://``) when the warehouse file does not exist yet, so they never create it:
``plan`` then reports the first load (no watermark, read everything).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence

from pipeline_assets.core.secrets import scrub

from .. import settings as settings_module
from ..core.errors import PipelineError
from ..core.times import utc_now
from .context import Clock, Context, one_line
from .demo import add_demo
from .files import add_files
from .tables import add_plan, add_verify, add_watermark

PROG = "pipeline-assets"


class UsageError(Exception):
    """A malformed command line; argparse has already said what is wrong."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2) instead of usage + error."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # `--updated-at -2d` is a value, not an unknown option: argparse lets values that
        # look like negative numbers through, and so does Python 3.13 for "-2d" (no
        # option of ours starts with a dash and a digit).
        self._negative_number_matcher = re.compile(r"^-\d")

    def error(self, message: str):
        hint = f" (see `{self.prog} --help`)"
        self.exit(2, f"{PROG}: error: {one_line(message)}{hint}\n")

    def exit(self, status: int = 0, message: str | None = None):
        if message:
            self._print_message(message, sys.stderr)
        raise UsageError(status)


# --- the parser -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Operate the pipeline of a code location's declared tables (this "
        "project's orders by default): demo data, the watermark, dry runs, "
        "verify, the committed day files.",
        epilog="Settings come from the environment (PIPELINE_DATA_DIR, SOURCE_DATABASE_URL, "
        "WAREHOUSE_DATABASE_URL, LOOKBACK_DAYS, PIPELINE_TIMEZONE). Exit 0: done; "
        "1: failed, nothing written; 2: bad command line.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_demo(commands)
    add_watermark(commands)
    add_plan(commands)
    add_verify(commands)
    add_files(commands)
    return parser


# --- running a command ------------------------------------------------------------------


def _fail(message: str, urls: Sequence[str] = ()) -> int:
    text = one_line(message) or "failed"
    for url in urls:  # core already redacts; this catches anything a driver echoed
        text = scrub(text, url)
    print(f"{PROG}: error: {text}", file=sys.stderr)
    return 1


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    clock: Clock = utc_now,
    parser: argparse.ArgumentParser | None = None,
) -> int:
    """Run one command; returns the exit code. ``environ``/``clock`` default to the real
    ones, ``parser`` to :func:`build_parser`'s (whose subcommands name their handler)."""
    try:
        args = (parser or build_parser()).parse_args(argv)
    except UsageError as exc:
        return exc.status
    ctx = None
    try:
        ctx = Context(settings_module.from_env(environ), clock)
        return args.handler(args, ctx)
    except PipelineError as exc:  # anything else is a bug: it surfaces with its traceback
        return _fail(str(exc), ctx.urls if ctx is not None else ())
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    finally:
        if ctx is not None:
            ctx.close()
