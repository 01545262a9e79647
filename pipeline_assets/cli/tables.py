"""``pipeline-assets watermark show|rewind|history``, ``plan`` and ``verify``: the commands
that work on the tables a code location declares (``-m MODULE``, ``--table N``)."""

from __future__ import annotations

from pipeline_assets.core.load.batch import load_table
from pipeline_assets.core.secrets import redact
from pipeline_assets.core.table.spec import TableSpec
from pipeline_assets.core.warehouse import watermark as wm

from .. import settings as settings_module
from ..core.errors import CommandError, WatermarkError
from ..core.times import day_of, parse_day, resolve_relative, to_instant
from ..core.verify import verify
from .context import (
    Context,
    add_location,
    chosen_table,
    chosen_tables,
    one_line,
    option,
    print_json,
    told,
)

# what `watermark history` shows unless told: the newest changes, read backwards through
# the key, as cheap after a year of loads every few minutes as on the first day
HISTORY_SHOWN = 100


def add_watermark(commands) -> None:
    group = commands.add_parser("watermark", help="show, rewind and list the watermark")
    sub = group.add_subparsers(dest="watermark_command", metavar="WATERMARK_COMMAND", required=True)

    p = sub.add_parser("show", help="print the watermark and the lookback as JSON")
    add_location(p)
    p.set_defaults(handler=_watermark_show)

    p = sub.add_parser("rewind", help="move the watermark back, recording why")
    p.add_argument(
        "value",
        metavar="VALUE",
        help="date or timestamp (no offset: PIPELINE_TIMEZONE), or a relative "
        "day such as yesterday or -3d",
    )
    p.add_argument("--reason", required=True, help="recorded in the watermark history")
    add_location(p)
    p.set_defaults(handler=_watermark_rewind)

    p = sub.add_parser(
        "history", help=f"the newest {HISTORY_SHOWN} changes of the watermark, oldest first"
    )
    p.add_argument(
        "--json", action="store_true", help="print a JSON array instead of one line per change"
    )
    shown = p.add_mutually_exclusive_group()
    shown.add_argument(
        "--all", action="store_true", help="every change since the first load, however many"
    )
    shown.add_argument(
        "--newest",
        type=int,
        metavar="N",
        help=f"the newest N changes (default {HISTORY_SHOWN})",
    )
    add_location(p)
    p.set_defaults(handler=_watermark_history)


def add_plan(commands) -> None:
    p = commands.add_parser("plan", help="dry run of the next incremental load; writes nothing")
    add_location(p)
    p.set_defaults(handler=_plan)


def add_verify(commands) -> None:
    p = commands.add_parser(
        "verify",
        help="reconcile source vs warehouse per day and every day file vs its "
        "manifest and the warehouse; exit 1 with the repair commands when anything differs",
    )
    p.add_argument(
        "--require-all",
        action="store_true",
        help="also fail on days with paid orders but no file yet (not built)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--days-from",
        metavar="DATE",
        help="first day to report, YYYY-MM-DD (inclusive; default: the first)",
    )
    p.add_argument(
        "--days-to",
        metavar="DATE",
        help="last day to report, YYYY-MM-DD (inclusive; default: the last)",
    )
    add_location(p, every=True)
    p.set_defaults(handler=_verify)


# --- watermark --------------------------------------------------------------------------


def _watermark_show(args, ctx: Context) -> int:
    spec = chosen_table(args, ctx)
    engine, _ = ctx.warehouse_for_reading()
    current = wm.current(engine, table=spec.name)
    if spec.counts_ids:  # an append-only table: its highest id, and its lookback in ids
        name, lookback = "lookback_ids", spec.lookback_ids
    else:
        name, lookback = "lookback_days", ctx.lookback_days(spec)
    print_json(
        {
            "watermark": wm.shown(current),
            name: lookback,
            "window_start": wm.shown(wm.window_start(current, lookback)),
        }
    )
    return 0


def _watermark_rewind(args, ctx: Context) -> int:
    spec = chosen_table(args, ctx)
    if spec.counts_ids:  # an id: the highest id the next run counts as read
        value = _an_id(args.value)
    else:
        value = option(
            "VALUE",
            to_instant,
            option("VALUE", resolve_relative, args.value, ctx.today()),
            ctx.settings.tz,
        )
    if spec.compares_whole:
        raise WatermarkError(
            spec.about(
                "it has no cursor (cursor: null): every run reads the whole table, so there "
                "is no watermark to rewind; a range load (start/end) reloads chosen days"
            )
        )
    engine, _ = ctx.warehouse_for_reading()  # no file: no watermark, and core says so
    old, new = wm.rewind(engine, value, reason=args.reason, at=ctx.clock(), table=spec.name)
    print(f"watermark rewound from {wm.shown(old)} to {wm.shown(new)}")
    return 0


def _an_id(text: str) -> int:
    if not text.strip().lstrip("-").isdigit():
        raise CommandError(f"VALUE: {text!r} is not an id: the table's cursor is an integer")
    return int(text)


def _watermark_history(args, ctx: Context) -> int:
    spec = chosen_table(args, ctx)
    engine, _ = ctx.warehouse_for_reading()
    if args.newest is not None and args.newest < 1:
        raise CommandError(f"--newest {args.newest}: give a number of changes, 1 or more")
    wanted = None if args.all else (args.newest or HISTORY_SHOWN)
    # one more than shown: whether there are earlier ones, without counting them all
    found = wm.history(engine, spec=spec, newest=None if wanted is None else wanted + 1)
    earlier = wanted is not None and len(found) > wanted
    changes = [
        {
            "changed_at": wm.shown(wm.parsed(c.changed_at)),
            "kind": c.kind,
            "old_value": wm.shown(wm.parsed(c.old_value)),
            "new_value": wm.shown(wm.parsed(c.new_value)),
            "reason": c.reason,
            "batch_id": c.batch_id,
        }
        for c in (found[1:] if earlier else found)
    ]
    if args.json:
        print_json(changes)
        return 0
    if not changes:
        print("no watermark changes yet")
    if earlier:
        print(f"(the newest {wanted} changes; --all lists every one)")
    for c in changes:
        why = (
            f"batch {c['batch_id']}"
            if c["kind"] == "load"
            else f"reason: {one_line(c['reason'] or '')}"
        )
        print(
            f"{c['changed_at']}  {c['kind']:<6}  {c['old_value'] or 'none'} -> "
            f"{c['new_value'] or 'none'}  {why}"
        )
    return 0


# --- plan -------------------------------------------------------------------------------


def _plan(args, ctx: Context) -> int:
    spec = chosen_table(args, ctx)
    lookback = ctx.lookback_days(spec)
    with told(spec):
        source = ctx.source(spec=spec)
        warehouse, exists = ctx.warehouse_for_reading()
        result = load_table(
            source,
            warehouse,
            spec=spec,
            tz=ctx.settings.tz,
            lookback_days=lookback,
            now=ctx.clock(),
            dry_run=True,
        )
    plan = result.to_json()
    plan["lookback_days"] = lookback
    plan["warehouse"] = redact(ctx.settings.warehouse_url)
    plan["warehouse_exists"] = exists
    print_json(plan)
    return 0


# --- verify -----------------------------------------------------------------------------


def _verify(args, ctx: Context) -> int:
    days_from = option("--days-from", parse_day, args.days_from) if args.days_from else None
    days_to = option("--days-to", parse_day, args.days_to) if args.days_to else None
    specs = chosen_tables(args, ctx, every=True)
    results = {spec.name: _verify_table(spec, args, ctx, days_from, days_to) for spec in specs}
    if len(results) == 1:  # one table: the report as it always was
        (result,) = results.values()
        if args.json:
            print_json(result.to_json())
        else:
            print("\n".join(result.lines()))
        return result.exit_code
    exit_code = max(r.exit_code for r in results.values())
    if args.json:
        print_json(
            {
                "ok": exit_code == 0,
                "exit_code": exit_code,
                "module": args.module,
                "repair": [c for r in results.values() for c in r.repair],
                "tables": {name: r.to_json() for name, r in results.items()},
            }
        )
        return exit_code
    for i, (name, result) in enumerate(results.items()):
        print(("\n" if i else "") + f"table {name} ({args.module}):")
        print("\n".join(result.lines()))
    return exit_code


def _verify_table(spec: TableSpec, args, ctx: Context, days_from, days_to):
    with told(spec):
        return _verify_one(spec, args, ctx, days_from, days_to)


def _verify_one(spec: TableSpec, args, ctx: Context, days_from, days_to):
    settings = ctx.settings
    source = ctx.source(spec=spec)
    warehouse, _ = ctx.warehouse_for_reading()
    folders = {f.name: settings_module.files_location(settings, spec, f) for f in spec.daily_files}
    return verify(
        source,
        warehouse,
        folders,
        tz=settings.tz,
        today=day_of(ctx.clock(), settings.tz),
        partitions_start=settings.partitions_start,
        days_from=days_from,
        days_to=days_to,
        require_all=args.require_all,
        max_delete_share=ctx.max_delete_share(spec),
        spec=spec,
        module=args.module,
    )
