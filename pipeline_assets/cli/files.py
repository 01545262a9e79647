"""``pipeline-assets files``: the committed days of a code location's day files, for a
reader outside Dagster (DuckDB, Polars, Spark) to read exactly those."""

from __future__ import annotations

from pipeline_assets.core.daily_files import committed_files, shape_of
from pipeline_assets.core.table.spec import TableSpec

from .. import settings as settings_module
from ..core.errors import CommandError
from .context import Context, add_location, chosen_tables, print_json, told


def add_files(commands) -> None:
    p = commands.add_parser(
        "files",
        help="list the committed day files (day, path or URL, rows, sha256, format); a day "
        "not committed, or whose bytes do not match its manifest, is not listed",
    )
    p.add_argument("--files", metavar="F", help="only the file set F (default: every one)")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    add_location(p, every=True)
    p.set_defaults(handler=_files)


def _files(args, ctx: Context) -> int:
    sets = [(spec, f) for spec in chosen_tables(args, ctx, every=True) for f in spec.daily_files]
    if args.files is not None:
        names = ", ".join(f.name for _, f in sets) or "none"
        sets = [(spec, f) for spec, f in sets if f.name == args.files]
        if not sets:
            raise CommandError(
                f"--files {args.files}: the code location {args.module} declares no such "
                f"file set; its file sets: {names}"
            )
    listed = [entry for spec, files in sets for entry in _listed(spec, files, ctx)]
    if args.json:
        print_json(listed)
        return 0
    for entry in listed:
        print(
            "  ".join(
                [
                    entry["files"],
                    entry["day"],
                    entry["format"],
                    f"{entry['rows']} row(s)",
                    entry["sha256"][:12],
                    entry.get("path") or entry["url"],
                    *(["stale"] if entry.get("stale") else []),
                ]
            )
        )
    if not listed:
        print("no committed day file")
    return 0


def _listed(spec: TableSpec, files, ctx: Context) -> list[dict]:
    with told(spec):
        folder = settings_module.files_location(ctx.settings, spec, files)
        return committed_files(folder, files.name, shape_of(spec, files))
