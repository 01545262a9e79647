"""``pipeline-assets demo …``: the demo app database, changed as the app would change it."""

from __future__ import annotations

from pipeline_assets.core.db.engines import sqlite_file
from pipeline_assets.core.secrets import redact
from pipeline_assets.core.table.money import parse_amount

from .. import demo
from ..core.errors import CommandError
from ..core.times import parse_day, resolve_relative, to_instant
from .context import Context, option, print_json


def add_demo(commands) -> None:
    group = commands.add_parser("demo", help="create and change the demo app database")
    sub = group.add_subparsers(dest="demo_command", metavar="DEMO_COMMAND", required=True)
    _add_init(sub)
    _add_generate(sub)
    _add_set(sub)
    _add_delete(sub)


def _add_init(sub) -> None:
    p = sub.add_parser(
        "init",
        help="create the orders table: the story's orders 101-106 "
        "among four weeks of realistic orders, ending yesterday",
    )
    p.add_argument(
        "--force", action="store_true", help="drop and recreate an existing orders table"
    )
    p.add_argument(
        "--if-missing",
        action="store_true",
        help="do nothing (exit 0) when the orders table already exists",
    )
    p.add_argument(
        "--history-days",
        type=int,
        default=demo.HISTORY_DAYS,
        metavar="D",
        help=f"days of realistic orders before today (default: {demo.HISTORY_DAYS}; "
        "0: only orders 101-106)",
    )
    p.set_defaults(handler=_demo_init)


def _add_generate(sub) -> None:
    p = sub.add_parser("generate", help="add N realistic orders over D days, some late")
    p.add_argument("--orders", type=int, required=True, metavar="N")
    p.add_argument("--days", type=int, required=True, metavar="D")
    p.add_argument(
        "--start",
        metavar="DATE",
        help="first day, YYYY-MM-DD (default: the day after the newest order)",
    )
    p.add_argument(
        "--late-fraction",
        type=float,
        metavar="F",
        help="share of orders arriving 1-5 days late (default: 0.05)",
    )
    p.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help="random seed; the same seed gives the same orders (default: 0)",
    )
    p.set_defaults(handler=_demo_generate)


def _add_set(sub) -> None:
    p = sub.add_parser("set", help="insert or update one order, as the app would")
    p.add_argument("order_id", type=int, metavar="ORDER_ID")
    p.add_argument("--status", required=True)
    p.add_argument("--amount", required=True, help="exact decimal, e.g. 22.00")
    p.add_argument(
        "--updated-at",
        required=True,
        metavar="T",
        help="ISO-8601 date or timestamp (no offset: PIPELINE_TIMEZONE), or a day "
        "relative to today: today, yesterday, -2d, each optionally with a time "
        "('yesterday 20:00')",
    )
    p.set_defaults(handler=_demo_set)


def _add_delete(sub) -> None:
    p = sub.add_parser("delete", help="delete one order, as the app would")
    p.add_argument("order_id", type=int, metavar="ORDER_ID")
    p.set_defaults(handler=_demo_delete)


def _demo_init(args, ctx: Context) -> int:
    url = ctx.settings.source_url
    path = sqlite_file(url)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CommandError(
                f"cannot create the folder {path.parent} for the demo database: "
                f"{exc.strerror or exc}; check PIPELINE_DATA_DIR or "
                "SOURCE_DATABASE_URL"
            ) from None
    engine = ctx.source(must_exist=False, app=True)
    if args.if_missing and not args.force and demo.has_orders(engine):
        print(f"the demo app database {redact(url)} already has orders: left as it is")
        return 0
    today = ctx.today()
    count = demo.init(
        engine, force=args.force, today=today, tz=ctx.settings.tz, history_days=args.history_days
    )
    first, last = demo.CHAPTER_STORY[0][0], demo.CHAPTER_STORY[-1][0]
    story = len(demo.CHAPTER_STORY)
    history = (
        f" and {count - story} more over the {args.history_days} days before {today.isoformat()}"
        if count > story
        else ""
    )
    print(f"created the orders table in {redact(url)} with {count} orders: {first}-{last}{history}")
    return 0


def _demo_generate(args, ctx: Context) -> int:
    options = {}
    if args.start is not None:
        options["start"] = option("--start", parse_day, args.start)
    if args.late_fraction is not None:
        options["late_fraction"] = args.late_fraction
    if args.seed is not None:
        options["seed"] = args.seed
    summary = demo.generate(ctx.source(app=True), orders=args.orders, days=args.days, **options)
    print_json(summary)
    return 0


def _demo_set(args, ctx: Context) -> int:
    option("--amount", parse_amount, args.amount)
    updated_at = option("--updated-at", resolve_relative, args.updated_at, ctx.today())
    option("--updated-at", to_instant, updated_at, ctx.settings.tz)
    outcome = demo.set_order(
        ctx.source(app=True),
        args.order_id,
        status=args.status,
        amount=args.amount,
        updated_at=updated_at,
        tz=ctx.settings.tz,
    )
    print(
        f"order {args.order_id} {outcome}: {args.status.strip()} {args.amount.strip()} "
        f"{updated_at.strip()}"
    )
    return 0


def _demo_delete(args, ctx: Context) -> int:
    status, amount, updated_at = demo.delete_order(ctx.source(app=True), args.order_id)
    print(f"order {args.order_id} deleted: it was {status} {amount} {updated_at}")
    return 0
