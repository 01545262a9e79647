"""What every command handler shares: its :class:`Context` (the settings, the clock, the
engines it opened, the URLs scrubbed from its errors) and the small helpers of the
command line: the tables a command works on (``-m MODULE``, ``--table N``), an option's
parse error naming the option, JSON output."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy.engine import Engine

from pipeline_assets.core.db.engines import make_engine, sqlite_file
from pipeline_assets.core.errors import DatabaseError
from pipeline_assets.core.secrets import redact
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.table.spec import TableSpec

from .. import settings as settings_module
from ..core.commands import DEFINITIONS_MODULE, DEMO_INIT
from ..core.errors import CommandError, PipelineError
from ..core.times import day_of

IN_MEMORY_WAREHOUSE = "sqlite://"

Clock = Callable[[], datetime]


class Context:
    """What a handler gets: the settings, the clock, and engines that are disposed after."""

    def __init__(self, settings: settings_module.Settings, clock: Clock):
        self.settings = settings
        self.clock = clock
        self.urls = [settings.source_url, settings.warehouse_url]  # scrubbed from errors
        self._engines: list[Engine] = []

    def today(self):
        """Today in PIPELINE_TIMEZONE, by the command's clock."""
        return day_of(self.clock(), self.settings.tz)

    def engine(self, url: str, role: str) -> Engine:
        engine = make_engine(url, role=role)
        self._engines.append(engine)
        return engine

    def source(
        self, *, must_exist: bool = True, spec: TableSpec | None = None, app: bool = False
    ) -> Engine:
        """The app database: SOURCE_DATABASE_URL, or the ``source_url`` ``spec`` declares;
        ``app``: opened as the app (the demo commands), which may write and create it."""
        own = spec.source_url if spec is not None else None
        url = own or self.settings.source_url
        if own:
            self.urls.append(own)
        path = sqlite_file(url)
        if must_exist and path is not None and not path.exists():
            if own:
                raise DatabaseError(
                    f"the source database {redact(url)} of the table "
                    f"{spec.name} does not exist: check its source_url"
                )
            raise DatabaseError(
                f"the source database {redact(url)} does not exist: create the demo with "
                f"`{DEMO_INIT}` or point SOURCE_DATABASE_URL at the app database"
            )
        return self.engine(url, "app" if app else "source")

    def tables(self, module: str) -> dict[str, TableSpec]:
        """``{name: spec}`` of every table the code location ``module`` declares. This
        project's own location declares ``orders`` alone (test_location holds it to
        that): known without importing Dagster, which costs seconds a command."""
        if module == DEFINITIONS_MODULE:
            return {ORDERS.name: ORDERS}
        from ..location import declared_tables  # imports Dagster and the location: only here

        return declared_tables(module)

    def lookback_days(self, spec: TableSpec) -> int:
        return spec.lookback_days if spec.lookback_days is not None else self.settings.lookback_days

    def max_delete_share(self, spec: TableSpec) -> float:
        return (
            spec.max_delete_share
            if spec.max_delete_share is not None
            else self.settings.max_delete_share
        )

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


@contextmanager
def told(spec: TableSpec) -> Iterator[None]:
    """An error of a command on ``spec``'s table names the table and the ``defs.yaml`` it
    is declared in (:meth:`TableSpec.about`), as a step's failure does."""
    try:
        yield
    except PipelineError as exc:
        if not spec.declared_in:
            raise
        raise CommandError(spec.about(str(exc))) from None


def one_line(message: str) -> str:
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip())


def option(name: str, parse: Callable, *values):
    """``parse(*values)``, with an error that names the option the bad value came from."""
    try:
        return parse(*values)
    except PipelineError as exc:
        raise CommandError(f"{name}: {exc}") from None


def add_location(p: argparse.ArgumentParser, *, every: bool = False) -> None:
    p.add_argument(
        "-m",
        "--module",
        default=DEFINITIONS_MODULE,
        metavar="MODULE",
        help=f"the code location, as `dagster -m` names it (default: {DEFINITIONS_MODULE})",
    )
    p.add_argument(
        "--table",
        metavar="N",
        help="the declared table (default: every table)"
        if every
        else "the declared table; needed only when the location declares several",
    )


def chosen_tables(args, ctx: Context, *, every: bool = False) -> list[TableSpec]:
    """The tables a command works on: ``--table``'s, else the location's only one (every
    one, with ``every``); a missing or unknown ``--table`` names the tables there are."""
    module = args.module
    tables = ctx.tables(module)
    names = ", ".join(tables)
    if not tables:
        raise CommandError(
            f"the code location {module} declares no table: "
            "declare one with the pipeline_assets.IncrementalTable component"
        )
    if args.table is not None:
        if args.table not in tables:
            raise CommandError(
                f"--table {args.table}: the code location {module} declares "
                f"no such table; its tables: {names}"
            )
        return [tables[args.table]]
    if every or len(tables) == 1:
        return list(tables.values())
    raise CommandError(
        f"the code location {module} declares {len(tables)} tables ({names}): name one with --table"
    )


def chosen_table(args, ctx: Context) -> TableSpec:
    (spec,) = chosen_tables(args, ctx)
    return spec


def print_json(value) -> None:
    print(json.dumps(value, indent=2))
