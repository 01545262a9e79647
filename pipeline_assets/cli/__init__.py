"""The ``pipeline-assets`` command line (see docs/contract.md): a thin argparse shell over
``core``.

Every command reads its settings through :func:`pipeline_assets.settings.from_env` (the one
place that reads the environment), opens the databases it needs, calls one core function
and prints the result. It never imports Dagster.

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

SQLite files: only ``demo init`` creates the source file (and its folder). Every other
command refuses to run against a source file that does not exist rather than let SQLite
create an empty one. Commands that only read the warehouse (``watermark show``,
``watermark history``, ``watermark rewind``, ``plan``) use an empty in-memory warehouse
(``sqlite://``) when the warehouse file does not exist yet, so they never create it:
``plan`` then reports the first load (no watermark, read everything).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from sqlalchemy.engine import Engine

from . import settings as settings_module
from .core import demo
from .core import watermark as wm
from .core.commands import DEMO_INIT
from .core.db import DatabaseError, make_engine, redact, scrub, sqlite_file
from .core.errors import CommandError, PipelineError
from .core.load import load_orders
from .core.money import parse_amount
from .core.times import day_of, from_canonical, parse_day, resolve_relative, to_instant, utc_now
from .core.verify import verify

PROG = "pipeline-assets"
IN_MEMORY_WAREHOUSE = "sqlite://"

Clock = Callable[[], datetime]


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
        self.exit(2, f"{PROG}: error: {_one_line(message)}{hint}\n")

    def exit(self, status: int = 0, message: str | None = None):
        if message:
            self._print_message(message, sys.stderr)
        raise UsageError(status)


# --- the parser -------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Operate the orders pipeline: demo data, the watermark, dry runs.",
        epilog="Settings come from the environment (PIPELINE_DATA_DIR, SOURCE_DATABASE_URL, "
               "WAREHOUSE_DATABASE_URL, LOOKBACK_DAYS, PIPELINE_TIMEZONE). Exit 0: done; "
               "1: failed, nothing written; 2: bad command line.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_demo(commands)
    _add_watermark(commands)
    _add_plan(commands)
    _add_verify(commands)
    return parser


def _add_demo(commands) -> None:
    group = commands.add_parser("demo", help="create and change the demo app database")
    sub = group.add_subparsers(dest="demo_command", metavar="DEMO_COMMAND", required=True)

    p = sub.add_parser("init", help="create the orders table: the story's orders 101-106 "
                       "among four weeks of realistic orders, ending yesterday")
    p.add_argument("--force", action="store_true",
                   help="drop and recreate an existing orders table")
    p.add_argument("--if-missing", action="store_true",
                   help="do nothing (exit 0) when the orders table already exists")
    p.add_argument("--history-days", type=int, default=demo.HISTORY_DAYS, metavar="D",
                   help=f"days of realistic orders before today (default: {demo.HISTORY_DAYS}; "
                   "0: only orders 101-106)")
    p.set_defaults(handler=_demo_init)

    p = sub.add_parser("generate", help="add N realistic orders over D days, some late")
    p.add_argument("--orders", type=int, required=True, metavar="N")
    p.add_argument("--days", type=int, required=True, metavar="D")
    p.add_argument("--start", metavar="DATE",
                   help="first day, YYYY-MM-DD (default: the day after the newest order)")
    p.add_argument("--late-fraction", type=float, metavar="F",
                   help="share of orders arriving 1-5 days late (default: 0.05)")
    p.add_argument("--seed", type=int, metavar="S",
                   help="random seed; the same seed gives the same orders (default: 0)")
    p.set_defaults(handler=_demo_generate)

    p = sub.add_parser("set", help="insert or update one order, as the app would")
    p.add_argument("order_id", type=int, metavar="ORDER_ID")
    p.add_argument("--status", required=True)
    p.add_argument("--amount", required=True, help="exact decimal, e.g. 22.00")
    p.add_argument("--updated-at", required=True, metavar="T",
                   help="ISO-8601 date or timestamp (no offset: PIPELINE_TIMEZONE), or a day "
                   "relative to today: today, yesterday, -2d, each optionally with a time "
                   "('yesterday 20:00')")
    p.set_defaults(handler=_demo_set)

    p = sub.add_parser("delete", help="delete one order, as the app would")
    p.add_argument("order_id", type=int, metavar="ORDER_ID")
    p.set_defaults(handler=_demo_delete)


def _add_watermark(commands) -> None:
    group = commands.add_parser("watermark", help="show, rewind and list the watermark")
    sub = group.add_subparsers(dest="watermark_command", metavar="WATERMARK_COMMAND",
                               required=True)

    p = sub.add_parser("show", help="print the watermark and the lookback as JSON")
    p.set_defaults(handler=_watermark_show)

    p = sub.add_parser("rewind", help="move the watermark back, recording why")
    p.add_argument("value", metavar="VALUE",
                   help="date or timestamp (no offset: PIPELINE_TIMEZONE), or a relative "
                   "day such as yesterday or -3d")
    p.add_argument("--reason", required=True, help="recorded in the watermark history")
    p.set_defaults(handler=_watermark_rewind)

    p = sub.add_parser("history", help="every change of the watermark, oldest first")
    p.add_argument("--json", action="store_true",
                   help="print a JSON array instead of one line per change")
    p.set_defaults(handler=_watermark_history)


def _add_plan(commands) -> None:
    p = commands.add_parser("plan", help="dry run of the next incremental load; writes nothing")
    p.set_defaults(handler=_plan)


def _add_verify(commands) -> None:
    p = commands.add_parser(
        "verify", help="reconcile source vs warehouse per day and every day file vs its "
        "manifest and the warehouse; exit 1 with the repair commands when anything differs")
    p.add_argument("--require-all", action="store_true",
                   help="also fail on days with paid orders but no file yet (not built)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--days-from", metavar="DATE",
                   help="first day to report, YYYY-MM-DD (inclusive; default: the first)")
    p.add_argument("--days-to", metavar="DATE",
                   help="last day to report, YYYY-MM-DD (inclusive; default: the last)")
    p.set_defaults(handler=_verify)


# --- running a command ------------------------------------------------------------------

class _Context:
    """What a handler gets: the settings, the clock, and engines that are disposed after."""

    def __init__(self, settings: settings_module.Settings, clock: Clock):
        self.settings = settings
        self.clock = clock
        self._engines: list[Engine] = []

    def today(self):
        """Today in PIPELINE_TIMEZONE, by the command's clock."""
        return day_of(self.clock(), self.settings.tz)

    def engine(self, url: str, role: str) -> Engine:
        engine = make_engine(url, role=role)
        self._engines.append(engine)
        return engine

    def source(self, *, must_exist: bool = True) -> Engine:
        url = self.settings.source_url
        path = sqlite_file(url)
        if must_exist and path is not None and not path.exists():
            raise DatabaseError(
                f"the source database {redact(url)} does not exist: create the demo with "
                f"`{DEMO_INIT}` or point SOURCE_DATABASE_URL at the app database"
            )
        return self.engine(url, "source")

    def warehouse_for_reading(self) -> tuple[Engine, bool]:
        """The warehouse, or an empty in-memory one if its SQLite file does not exist yet.

        Returns ``(engine, exists)``. Core prepares the warehouse schema on first use, and
        SQLite creates a missing file on connect; neither may happen in a read-only command.
        """
        url = self.settings.warehouse_url
        path = sqlite_file(url)
        if path is not None and not path.exists():
            return self.engine(IN_MEMORY_WAREHOUSE, "warehouse"), False
        return self.engine(url, "warehouse"), True

    def close(self) -> None:
        for engine in self._engines:
            engine.dispose()


def _one_line(message: str) -> str:
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip())


def _fail(message: str, urls: Sequence[str] = ()) -> int:
    text = _one_line(message) or "failed"
    for url in urls:  # core already redacts; this catches anything a driver echoed
        text = scrub(text, url)
    print(f"{PROG}: error: {text}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None, *, environ: Mapping[str, str] | None = None,
         clock: Clock = utc_now, parser: argparse.ArgumentParser | None = None) -> int:
    """Run one command; returns the exit code. ``environ``/``clock`` default to the real
    ones, ``parser`` to :func:`build_parser`'s (whose subcommands name their handler)."""
    try:
        args = (parser or build_parser()).parse_args(argv)
    except UsageError as exc:
        return exc.status
    urls: list[str] = []
    ctx = None
    try:
        settings = settings_module.from_env(environ)
        urls = [settings.source_url, settings.warehouse_url]
        ctx = _Context(settings, clock)
        return args.handler(args, ctx)
    except PipelineError as exc:  # anything else is a bug: it surfaces with its traceback
        return _fail(str(exc), urls)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    finally:
        if ctx is not None:
            ctx.close()


def _option(name: str, parse: Callable, *values):
    """``parse(*values)``, with an error that names the option the bad value came from."""
    try:
        return parse(*values)
    except PipelineError as exc:
        raise CommandError(f"{name}: {exc}") from None


def _print_json(value) -> None:
    print(json.dumps(value, indent=2))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _iso_stored(value: str | None) -> str | None:
    return from_canonical(value).isoformat() if value else None


# --- demo -------------------------------------------------------------------------------

def _demo_init(args, ctx: _Context) -> int:
    url = ctx.settings.source_url
    path = sqlite_file(url)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CommandError(f"cannot create the folder {path.parent} for the demo database: "
                              f"{exc.strerror or exc}; check PIPELINE_DATA_DIR or "
                              "SOURCE_DATABASE_URL") from None
    engine = ctx.source(must_exist=False)
    if args.if_missing and not args.force and demo.has_orders(engine):
        print(f"the demo app database {redact(url)} already has orders: left as it is")
        return 0
    today = ctx.today()
    count = demo.init(engine, force=args.force, today=today, tz=ctx.settings.tz,
                      history_days=args.history_days)
    first, last = demo.CHAPTER_STORY[0][0], demo.CHAPTER_STORY[-1][0]
    story = len(demo.CHAPTER_STORY)
    history = (f" and {count - story} more over the {args.history_days} days before "
               f"{today.isoformat()}" if count > story else "")
    print(f"created the orders table in {redact(url)} with {count} orders: "
          f"{first}-{last}{history}")
    return 0


def _demo_generate(args, ctx: _Context) -> int:
    options = {}
    if args.start is not None:
        options["start"] = _option("--start", parse_day, args.start)
    if args.late_fraction is not None:
        options["late_fraction"] = args.late_fraction
    if args.seed is not None:
        options["seed"] = args.seed
    summary = demo.generate(ctx.source(), orders=args.orders, days=args.days, **options)
    _print_json(summary)
    return 0


def _demo_set(args, ctx: _Context) -> int:
    _option("--amount", parse_amount, args.amount)
    updated_at = _option("--updated-at", resolve_relative, args.updated_at, ctx.today())
    _option("--updated-at", to_instant, updated_at, ctx.settings.tz)
    outcome = demo.set_order(ctx.source(), args.order_id, status=args.status,
                             amount=args.amount, updated_at=updated_at,
                             tz=ctx.settings.tz)
    print(f"order {args.order_id} {outcome}: {args.status.strip()} {args.amount.strip()} "
          f"{updated_at.strip()}")
    return 0


def _demo_delete(args, ctx: _Context) -> int:
    status, amount, updated_at = demo.delete_order(ctx.source(), args.order_id)
    print(f"order {args.order_id} deleted: it was {status} {amount} {updated_at}")
    return 0


# --- watermark --------------------------------------------------------------------------

def _watermark_show(args, ctx: _Context) -> int:
    engine, _ = ctx.warehouse_for_reading()
    current = wm.current(engine)
    lookback = ctx.settings.lookback_days
    _print_json({
        "watermark": _iso(current),
        "lookback_days": lookback,
        "window_start": _iso(wm.window_start(current, lookback)),
    })
    return 0


def _watermark_rewind(args, ctx: _Context) -> int:
    value = _option("VALUE", to_instant, _option("VALUE", resolve_relative, args.value,
                                                 ctx.today()), ctx.settings.tz)
    engine, _ = ctx.warehouse_for_reading()  # no file: no watermark, and core says so
    old, new = wm.rewind(engine, value, reason=args.reason, at=ctx.clock())
    print(f"watermark rewound from {_iso(old)} to {_iso(new)}")
    return 0


def _watermark_history(args, ctx: _Context) -> int:
    engine, _ = ctx.warehouse_for_reading()
    changes = [
        {
            "changed_at": _iso_stored(c.changed_at),
            "kind": c.kind,
            "old_value": _iso_stored(c.old_value),
            "new_value": _iso_stored(c.new_value),
            "reason": c.reason,
            "batch_id": c.batch_id,
        }
        for c in wm.history(engine)
    ]
    if args.json:
        _print_json(changes)
        return 0
    if not changes:
        print("no watermark changes yet")
    for c in changes:
        why = f"batch {c['batch_id']}" if c["kind"] == "load" else \
            f"reason: {_one_line(c['reason'] or '')}"
        print(f"{c['changed_at']}  {c['kind']:<6}  {c['old_value'] or 'none'} -> "
              f"{c['new_value'] or 'none'}  {why}")
    return 0


# --- plan -------------------------------------------------------------------------------

def _plan(args, ctx: _Context) -> int:
    source = ctx.source()
    warehouse, exists = ctx.warehouse_for_reading()
    result = load_orders(source, warehouse, tz=ctx.settings.tz,
                         lookback_days=ctx.settings.lookback_days, now=ctx.clock(),
                         dry_run=True)
    plan = result.to_json()
    plan["lookback_days"] = ctx.settings.lookback_days
    plan["warehouse"] = redact(ctx.settings.warehouse_url)
    plan["warehouse_exists"] = exists
    _print_json(plan)
    return 0


# --- verify -----------------------------------------------------------------------------

def _verify(args, ctx: _Context) -> int:
    days_from = _option("--days-from", parse_day, args.days_from) if args.days_from else None
    days_to = _option("--days-to", parse_day, args.days_to) if args.days_to else None
    settings = ctx.settings
    source = ctx.source()
    warehouse, _ = ctx.warehouse_for_reading()
    result = verify(source, warehouse, settings.paid_orders_location, tz=settings.tz,
                    today=day_of(ctx.clock(), settings.tz),
                    partitions_start=settings.partitions_start, days_from=days_from,
                    days_to=days_to, require_all=args.require_all,
                    max_delete_share=settings.max_delete_share)
    if args.json:
        _print_json(result.to_json())
    else:
        print("\n".join(result.lines()))
    return result.exit_code
