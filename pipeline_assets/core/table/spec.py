"""The shape of a declared table: :class:`TableSpec` and its parts, as plain frozen
dataclasses (:func:`.declare.declare` builds them, and every layer imports them from
:mod:`.declare`).

A :class:`TableSpec` says which source table to read (``table``), what to call it here
(``name``: the asset and the warehouse table), its key (``primary_key``, one column or
several), its change stamp (``cursor``: the watermark), the column whose day a row belongs to
(``day_column``: by default the cursor), the
columns copied and their types (:mod:`.types`), and its outputs: daily files of a
filtered view (:class:`DailyFiles`), each with optional per-day totals (:class:`Totals`).
Its :attr:`~TableSpec.names` are every Dagster name of the declaration (:class:`Names`,
:class:`FileNames`), by the one rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import InvalidRowError
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


# A daily file set's formats: its day files are ``<day>.json`` or ``<day>.parquet``.
FILE_FORMATS = ("json", "parquet")


@dataclass(frozen=True)
class DailyFiles:
    """One file per day of the rows matching ``where`` (column → allowed values), holding
    ``columns``; ``url`` is its folder (None: ``<PIPELINE_DATA_DIR>/<name>``); ``format``
    its bytes: ``json`` (an array of objects) or ``parquet`` (typed columns)."""

    name: str
    where: tuple[tuple[str, tuple], ...]
    columns: tuple[str, ...]
    url: str | None = None
    totals: Totals | None = None
    format: str = "json"

    def matches(self, row: Mapping) -> bool:
        """Whether a row (parsed values by column name) belongs in this view."""
        return all(row.get(column) in allowed for column, allowed in self.where)


# The words messages name a table's rows with, by what they say; ``{name}`` is the table,
# ``{file}`` a file set, ``{key}`` the key's columns. Only the declaration of ``orders``
# says some of them otherwise (:attr:`Legacy.words`); :meth:`TableSpec.say` picks.
WORDS = {
    "rows_counted": "row(s)",  # 4 row(s): the load's log, a refused delete
    "those_rows": "rows",  # if those rows really are gone
    "table_rows_counted": "{name} row(s)",  # 4 payments row(s) compared
    "the_source": "the source of {name}",  # check the source of payments
    "table_rows": "{name} rows",  # the warehouse holds no payments rows yet
    "Table_rows": "Rows of {name}",  # Rows of payments the source no longer has
    "Source_rows": "Rows of {table}",  # the table asset's description
    "future_keys": "keys",  # (keys [7, 9]) stamped in the future
    "file_rows_counted": "row(s) of {file}",  # 3 row(s) of big_payments in the warehouse
    "file_rows": "rows",  # the rows a day file holds, in its asset's description
    "not_in_file": "no longer in {file}",  # 2 no longer in big_payments on this day
    "a_key": "a key ({key})",  # the committed file does not hold rows with a key (…)
    "one_row": "row",  # a day file lists each row once
    "report_prefix": "{name}: ",  # verify's summary line starts with the table
    # there is no source database yet: what to do ({init}: the demo's command)
    "no_source": "point the source URL of {name} at the app's database",
    # a daily file set's asset and its totals', in the UI
    "Files_rows": "The rows of {name} in {file}",  # … of each day, one JSON file per day
    "totals_description": "Per day: the number of rows of {file} and the exact sum of "
    "{sums}, computed from its committed files.",
    "rows_listed": "{name} {keys}",  # payments (payment_id=7, attempt=2)
    "rows_listed_many": "{name} {keys}",  # payments (payment_id=7, …), (payment_id=8, …)
}


@dataclass(frozen=True)
class Legacy:
    """What the chapter's ``orders`` kept from the release before tables were declared,
    as data: the words its messages name rows with, the row rules its warehouse and files
    were built on, the Dagster names, keys and warehouse tables it had. Only a
    declaration of exactly ``orders``' shape carries one (:func:`.declare.declare` gives
    it, from :mod:`.orders`); every module asks ``spec.legacy`` (None for any other
    table) or :meth:`TableSpec.say`, never the table's name.
    """

    words: Mapping[str, str]  # WORDS it says otherwise
    keys: Mapping[str, str]  # metadata and JSON keys it names otherwise (future_keys → …)
    # how a message names one row (``{key}``: the key's value) and a row without a key
    row: str
    no_key: str
    # its row rules, where they differ from its types': why a missing value is refused,
    # by column; text columns where blank text is missing; why a key that is no integer
    # is refused; whether a reason repeats the value; two rows that tie on their stamp
    missing: Mapping[str, str]
    nonblank: tuple[str, ...]
    not_a_key: str
    reason_names_value: bool
    tie: str
    # the names it had
    files_job: str
    daily_job: str
    schedule: str
    totals_columns: tuple[str, str]  # its totals table's count and sum columns
    totals_metadata: tuple[str, str, str]  # its totals' metadata: count, sum, exact sum
    missing_table: str  # the source lacks its table: what to do ({url}, {init})

    def key(self, key: str) -> str:
        return self.keys.get(key, key)


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
    cursor: str | None  # None: no change stamp (every run compares the whole table)
    columns: tuple[Column, ...]
    daily_files: tuple[DailyFiles, ...] = ()
    source_url: str | None = None
    lookback_days: int | None = None
    lookback_ids: int | None = None  # an integer cursor's lookback (parts.LOOKBACK_IDS)
    reconcile_days: int | None = None
    max_delete_share: float | None = None
    # the column a row's day is read from, where it is not the cursor (None: the cursor)
    day_column: str | None = None
    # the attributes it was declared from (plain values): a code location carries them in
    # its table asset's metadata, and the CLI declares the same spec again from them
    attributes: Mapping | None = field(default=None, compare=False, repr=False, hash=False)
    # the file it is declared in (shop/defs/payments/defs.yaml), which every error a user
    # can fix names; None for a table declared in code (orders)
    declared_in: str | None = field(default=None, compare=False, repr=False, hash=False)
    # orders' words, rules and names from before declarations (Legacy); None for any other
    legacy: Legacy | None = field(default=None, compare=False, repr=False, hash=False)

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
    def day(self) -> str:
        """The column a row's day is read from: ``day_column``, else the cursor. Day files,
        their partitions, totals, ``verify`` and range loads go by it; the watermark and
        the lookback by the cursor."""
        return self.day_column or self.cursor

    @property
    def counts_ids(self) -> bool:
        """An integer cursor: an append-only table whose watermark is the highest id read."""
        return self.cursor is not None and self.column(self.cursor).type.kind == "integer"

    @property
    def day_apart(self) -> bool:
        """Whether the day is read from another column than the change stamp (a table with
        both: its rows carry the day column's instant beside the cursor's)."""
        return self.day_column is not None and self.cursor is not None and not self.counts_ids

    @property
    def stamp(self) -> str:
        """The column a row's instant is read from: the change stamp, or for a table
        without one (``cursor: null``, an integer cursor) the day column."""
        return self.day if self.cursor is None or self.counts_ids else self.cursor

    @property
    def compares_whole(self) -> bool:
        """``cursor: null``: no change stamp, so every run reads the whole table and
        compares it with the warehouse by key and content (deletes included)."""
        return self.cursor is None

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
        n, legacy = self.name, self.legacy
        files = {
            f.name: FileNames(
                asset=f.name,
                totals=f.totals.name if f.totals else None,
                refresh_sensor=f"{f.name}_refresh_sensor",
                job=legacy.files_job if legacy and i == 0 else f"{f.name}_job",
            )
            for i, f in enumerate(self.daily_files)
        }
        return Names(
            asset=n,
            match_check=f"{n}_match_source",
            lateness_check="lateness_within_lookback",
            new_sensor=f"new_{n}_sensor",
            load_job=f"{n}_job",
            daily_job=legacy.daily_job if legacy else f"{n}_daily_job",
            schedule=legacy.schedule if legacy else f"{n}_daily_schedule",
            files=files,
        )

    def say(self, word: str, **values: str) -> str:
        """One of :data:`WORDS` for this table (``orders``' own where it has one), filled
        in: ``spec.say("table_rows")`` → ``payments rows`` (``orders`` for orders)."""
        own = self.legacy.words.get(word) if self.legacy else None
        return (WORDS[word] if own is None else own).format(
            **{"name": self.name, "table": self.table, "key": ", ".join(self.primary_key)},
            **values,
        )

    def key_name(self, key: str) -> str:
        """A metadata or JSON key as this table names it (``future_keys``, which
        ``orders`` calls ``future_order_ids``)."""
        return self.legacy.key(key) if self.legacy else key

    def row_name(self, key: object) -> str:
        """How a message names one row: ``order 105`` (``orders``), else ``payments
        (payment_id=7, attempt=2)``; a row whose key is missing: ``a row with no
        order_id`` / ``a payments row with no key``. ``key``: a value for a key of one
        column, a tuple or a mapping of column to value otherwise."""
        return row_name(self, key)

    def row_error(self, key: object, column: str, value: object, reason: str) -> InvalidRowError:
        """The :class:`InvalidRowError` of the row with ``key`` (as :meth:`row_name` takes
        it): its ``column`` holds ``value``, refused for ``reason``."""
        return InvalidRowError(self.row_name(key), column, value, reason, key=key)

    def rows_named(self, keys: Sequence, total: int) -> str:
        """The first ``keys`` of ``total`` rows, for a message: ``payments (payment_id=7,
        attempt=2), (…) …``; ``orders 101, 102 …`` / ``order 101`` for ``orders``."""
        more = " …" if total > len(keys) else ""
        if self.legacy is None:
            listed = ", ".join(f"({key_text(self, k)})" for k in keys)
        else:
            listed = ", ".join(map(str, keys))
        return self.say("rows_listed_many" if total > 1 else "rows_listed", keys=listed) + more

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


def key_text(spec: TableSpec, key: object) -> str:
    """``payment_id=7, attempt=2``: a key as a message shows it (text quoted)."""
    if isinstance(key, Mapping):
        values = tuple(key.values())
    else:
        values = key if isinstance(key, tuple) else (key,)
    return ", ".join(
        f"{name}={value_text(value)}" for name, value in zip(spec.primary_key, values, strict=True)
    )


def value_text(value: object) -> str:
    """A key value as a message shows it: an integer as it is, anything else quoted."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else repr(value)


def row_name(spec: TableSpec, key: object) -> str:
    """:meth:`TableSpec.row_name`."""
    missing = key is None or (isinstance(key, Mapping) and None in key.values())
    if spec.legacy is not None:
        if missing:
            return spec.legacy.no_key
        value = next(iter(key.values())) if isinstance(key, Mapping) else key
        value = value[0] if isinstance(value, tuple) and len(value) == 1 else value
        return spec.legacy.row.format(key=value)
    if missing:
        if isinstance(key, Mapping):
            absent = [name for name, value in key.items() if value is None]
            known = ", ".join(
                f"{name}={value_text(value)}" for name, value in key.items() if value is not None
            )
            return f"a {spec.name} row with no {' or '.join(absent)}" + (
                f" ({known})" if known else ""
            )
        return f"a {spec.name} row with no key"
    return f"{spec.name} ({key_text(spec, key)})"
