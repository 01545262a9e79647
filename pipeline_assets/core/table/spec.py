"""The shape of a declared table: :class:`TableSpec` and its parts, as plain frozen
dataclasses (:func:`.declare.declare` builds them, and every layer imports them from
:mod:`.declare`).

A :class:`TableSpec` says which source table to read (``table``), what to call it here
(``name``: the asset and the warehouse table), its key (``primary_key``, one column or
several), its change stamp (``cursor``: the watermark, and the day a row belongs to), the
columns copied and their types (:mod:`.types`), and its outputs: daily files of a
filtered view (:class:`DailyFiles`), each with optional per-day totals (:class:`Totals`).
Its :attr:`~TableSpec.names` are every Dagster name of the declaration (:class:`Names`,
:class:`FileNames`), by the one rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .types import ColumnType


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    nullable: bool = False


@dataclass(frozen=True)
class Totals:
    """Per-day totals of a daily file: the row count and the exact sum of each column."""

    name: str
    sum: tuple[str, ...]


@dataclass(frozen=True)
class DailyFiles:
    """One JSON file per day of the rows matching ``where`` (column → allowed values),
    holding ``columns``; ``url`` is its folder (None: ``<PIPELINE_DATA_DIR>/<name>``)."""

    name: str
    where: tuple[tuple[str, tuple], ...]
    columns: tuple[str, ...]
    url: str | None = None
    totals: Totals | None = None

    def matches(self, row: Mapping) -> bool:
        """Whether a row (parsed values by column name) belongs in this view."""
        return all(row.get(column) in allowed for column, allowed in self.where)


@dataclass(frozen=True)
class Names:
    """Every Dagster name of one declaration, by the one rule (``orders`` excepted)."""

    asset: str
    match_check: str
    lateness_check: str
    new_sensor: str
    load_job: str
    daily_job: str
    schedule: str
    files: dict[str, FileNames] = field(default_factory=dict)


@dataclass(frozen=True)
class FileNames:
    asset: str
    totals: str | None
    refresh_sensor: str
    job: str


@dataclass(frozen=True)
class TableSpec:
    name: str
    table: str
    primary_key: tuple[str, ...]
    cursor: str
    columns: tuple[Column, ...]
    daily_files: tuple[DailyFiles, ...] = ()
    source_url: str | None = None
    lookback_days: int | None = None
    reconcile_days: int | None = None
    max_delete_share: float | None = None
    # the attributes it was declared from (plain values): a code location carries them in
    # its table asset's metadata, and the CLI declares the same spec again from them
    attributes: Mapping | None = field(default=None, compare=False, repr=False, hash=False)
    # the file it is declared in (shop/defs/payments/defs.yaml), which every error a user
    # can fix names; None for a table declared in code (orders)
    declared_in: str | None = field(default=None, compare=False, repr=False, hash=False)

    def about(self, message: str) -> str:
        """``message`` as a user meets it: naming the table and the file it is declared
        in (``payments (shop/defs/payments/defs.yaml): …``), where it has one."""
        return about(self.name, self.declared_in, message)

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def source_name(self) -> str:
        """The source table without its schema: ``shop.payments`` → ``payments``."""
        return self.table.rpartition(".")[2]

    @property
    def names(self) -> Names:
        """``N``, ``N_match_source``, ``new_N_sensor``, ``N_job``, ``N_daily_job``,
        ``N_daily_schedule``; per file ``F``: ``F``, its totals, ``F_refresh_sensor``,
        ``F_job``. ``orders`` keeps the names it had before declarations existed:
        ``daily_files_job``, ``daily_job`` and ``daily_schedule``."""
        n = self.name
        legacy = n == "orders"
        files = {
            f.name: FileNames(
                asset=f.name,
                totals=f.totals.name if f.totals else None,
                refresh_sensor=f"{f.name}_refresh_sensor",
                job="daily_files_job" if legacy and i == 0 else f"{f.name}_job",
            )
            for i, f in enumerate(self.daily_files)
        }
        return Names(
            asset=n,
            match_check=f"{n}_match_source",
            lateness_check="lateness_within_lookback",
            new_sensor=f"new_{n}_sensor",
            load_job=f"{n}_job",
            daily_job="daily_job" if legacy else f"{n}_daily_job",
            schedule="daily_schedule" if legacy else f"{n}_daily_schedule",
            files=files,
        )

    def taken_names(self) -> dict[str, str]:
        """Every asset and warehouse-table name this declaration takes, by attribute path:
        what two declarations of one code location may not share."""
        out = {"name": self.name}
        for i, f in enumerate(self.daily_files):
            out[f"daily_files[{i}].name"] = f.name
            if f.totals:
                out[f"daily_files[{i}].totals.name"] = f.totals.name
        return out


def about(name: str, declared_in: str | None, message: str) -> str:
    """``message`` naming ``name`` (a table or one of its file sets) and the file it is
    declared in; as it is for a table declared in code (``orders``)."""
    return f"{name} ({declared_in}): {message}" if declared_in else message
