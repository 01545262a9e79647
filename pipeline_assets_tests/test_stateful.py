"""Random histories against the real core, checked after every step against a plain model.

A Hypothesis state machine plays the app (new orders, updates, status changes to and from
``paid``, late rows inside and beyond the lookback, rows exactly on local midnights, every
text form of ``updated_at``), runs incremental loads, range backfills of the load, dry runs
and day-file rebuilds (``paid_orders_by_day`` + ``write_day_files``, what the asset and its
IO manager do), crashes any of them at every named crash point and then retries or not,
and leaves a killed writer's temp files behind. After every step the real SQLite or
PostgreSQL databases and the real folder must agree with :mod:`.model`.

Budget: ``PIPELINE_STATEFUL_EXAMPLES`` histories of ``PIPELINE_STATEFUL_STEPS`` steps
(defaults keep CI near a minute per backend); ``PIPELINE_STATEFUL_SEED`` replays a run.
A failure prints the seed, the steps, and a ``@reproduce_failure`` blob.

Random histories reach a crash point only by chance, so one fixed history per backend
(``test_every_crash_point_in_a_fixed_history_*``) drives the same machine through every
point of ``core/crash.py`` with the same checks after each step, and asserts that each
point was crashed at.

The second declared table runs the same histories (issue 23): :class:`PaymentHistories`
shares the load rules and the invariants of warehouse, ledger and watermark
(:class:`LoadHistories`) and plays ``tables.PAYMENTS``' app: a key of two columns, every
type, NULLs, Unicode text, attempts deleted one at a time, and the day files of
``captured_payments``; its fixed history crashes at every point too, and once more with
those files in Parquet (:class:`PaymentParquetHistories`).
"""

from __future__ import annotations

import inspect
import json
import os
import secrets
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, currently_in_test_context, note, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from pipeline_assets import demo
from pipeline_assets.core.crash import POINTS, SimulatedCrash
from pipeline_assets.core.daily_files import (
    DAY_FILE_RE,
    MANIFEST_RE,
    UncommittedDayError,
    day_status,
    read_committed_day,
    write_day_files,
)
from pipeline_assets.core.daily_files.parquet import parquet_bytes, read_parquet
from pipeline_assets.core.daily_files.views import day_rows
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.db.schema import warehouse_table
from pipeline_assets.core.db.state import batches, of_table, watermark_history, watermark_state
from pipeline_assets.core.errors import DeleteRefused, LoadError
from pipeline_assets.core.load.batch import load_table
from pipeline_assets.core.load.deletions import DeletePolicy
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.table.spec import TableSpec
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets_tests.orders import load_orders, paid_orders_by_day

from .conftest import MysqlDatabases, PostgresDatabases
from .model import Model, Payment, Version, canonical, day_file_bytes, parquet_day_rows
from .support import crashing_at
from .tables import PAYMENTS, PAYMENTS_PARQUET, delete_payment, make_payments

orders = warehouse_table(ORDERS)  # orders' warehouse table

try:  # the function run_state_machine_as_test wraps; public enough for HypoFuzz
    from hypothesis.stateful import get_state_machine_test
except ImportError:  # pragma: no cover - a Hypothesis without it: run unseeded
    get_state_machine_test = None

UTC = timezone.utc
NOW = datetime(2026, 3, 15, 12, 0, tzinfo=UTC)  # after every generated updated_at
FIRST_DAY = date(2026, 3, 2)  # eleven local days around the US DST start (2026-03-08)
N_DAYS = 11
WINDOW_DAYS = [(FIRST_DAY + timedelta(days=n)).isoformat() for n in range(N_DAYS)]
ZONES = ["America/New_York", "America/New_York", "UTC", "Asia/Kolkata", "Pacific/Chatham"]
STATUSES = ["paid", "pending", "refunded", "cancelled"]
CRASH_VARS = ("PIPELINE_CRASH_AT", "PIPELINE_CRASH_MODE", "PIPELINE_CRASH_ONCE_FILE")

# What a crash at each point leaves behind (raise mode: the process survives, so
# `finally` blocks run). Loads: committed or not. Files: which steps of the write landed.
LOAD_COMMITTED = {
    "load_after_stage": False,
    "load_after_compare": False,
    "load_before_delete": False,
    "load_after_delete": False,
    "load_after_merge": False,
    "load_after_watermark": False,
    "load_before_commit": False,
    "load_after_commit": True,
}
RANGE_ONLY = {"load_before_delete", "load_after_delete"}  # the delete step of a range load
FILES_LANDED = {  # point → (day files replaced: "none" | "first" | "all", manifest written)
    "day_file_before_rename": ("none", False),
    "files_between_days": ("first", False),
    "files_before_manifest": ("all", False),
    "manifest_before_rename": ("all", False),
    "files_after_manifest": ("all", True),
    "files_after_pointers": ("all", True),
}
LOAD_POINTS = sorted(p for p in POINTS if p in LOAD_COMMITTED)
INCREMENTAL_POINTS = [p for p in LOAD_POINTS if p not in RANGE_ONLY]
FILE_POINTS = sorted(p for p in POINTS if p in FILES_LANDED)
# Reached only when a declaration changes under stored rows, which the machines' fixed
# declarations never do: killed for real, and raised, in test_schema_changes.py.
SCHEMA_CHANGE_POINTS = {"load_after_alter"}

EXAMPLES = int(os.environ.get("PIPELINE_STATEFUL_EXAMPLES", "0")) or None
STEPS = int(os.environ.get("PIPELINE_STATEFUL_STEPS", "30"))
# payments' random histories per backend (at most about a minute each, measured)
PAYMENT_EXAMPLES = {"sqlite": 30, "postgresql": 12}
# a range load of all of time: every generated updated_at is inside it
EVERYTHING = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
STATS: Counter = Counter()
Step = Callable[..., None]  # the fixed history's step(rule, **arguments)

# --- strategies ------------------------------------------------------------------------

order_ids = st.integers(101, 118)  # 101–106 come from `demo init`
statuses = st.sampled_from(STATUSES)
amounts = st.builds(
    lambda n, scale: format(Decimal(n).scaleb(-scale), "f"),
    st.integers(-500, 100_000),
    st.integers(0, 3),
)
clocks = st.one_of(
    st.sampled_from(
        [
            time(0),
            time(23, 59, 59, 999_999),
            time(0, 0, 0, 1),
            time(3, 0),
            time(2, 30),
            time(19, 0),
            time(5, 0),
        ]
    ),
    st.times(),
)
forms = st.sampled_from(["date", "naive", "space", "utc", "z", "local", "minus5", "plus0530"])
# (local day index, local wall clock, text form): midnights and DST-gap clocks included
when = st.tuples(st.integers(0, N_DAYS - 1), clocks, forms)
lateness = st.sampled_from(["edge", "just_outside", "inside", "far", "at_watermark"])
bounds = st.one_of(
    st.tuples(st.just("midnight"), st.integers(0, N_DAYS)), st.tuples(st.just("at"), when)
)
load_crashes = st.lists(st.sampled_from(INCREMENTAL_POINTS), max_size=2)
range_crashes = st.lists(st.sampled_from(LOAD_POINTS), max_size=2)
file_crashes = st.lists(st.sampled_from(FILE_POINTS), max_size=2)
day_choices = st.one_of(
    st.tuples(st.just("range"), st.integers(0, N_DAYS - 1), st.integers(1, 4)),
    st.just(("touched", 0, 0)),
)


def render(instant: datetime, form: str, tz, naive: datetime | None = None) -> str:
    """``instant`` written the way some app would; ``naive`` keeps a wall clock as drawn."""
    local = instant.astimezone(tz)
    if naive is None:
        naive = local.replace(tzinfo=None)
        if naive.replace(tzinfo=tz) != instant:  # an ambiguous clock: keep the offset
            form = "utc" if form in ("naive", "space", "date") else form
    if form == "date" and naive.time() == time(0):
        return naive.date().isoformat()
    if form in ("naive", "date"):
        return naive.isoformat()
    if form == "space":
        return naive.isoformat(sep=" ")
    if form == "utc":
        return instant.astimezone(UTC).isoformat()
    if form == "z":
        return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if form == "local":
        return local.isoformat()
    hours = -5 if form == "minus5" else 5.5
    return instant.astimezone(timezone(timedelta(hours=hours))).isoformat()


class EmptiedDatabases:
    """A source and a warehouse database on PostgreSQL for every history of one test,
    emptied when a history starts and dropped at the end, and their two engines.

    Emptying leaves what a fresh database would: every session left on it by the history
    before is ended (as ``DROP DATABASE … WITH (FORCE)`` would: its temporary tables and
    locks go with it), then every schema but PostgreSQL's own is dropped with all it holds
    (tables, sequences, types, functions) and an empty ``public`` made again.

    The engines (``make_engine``'s, as a history would make them) are disposed before each
    history, which so starts on new connections; what they keep is SQLAlchemy's cache of
    compiled statements and the dialect's first-connect checks (70 ms of CPU a history).

    A fresh pair of databases per history cost 0.4 s more each on an idle machine and
    several seconds under load: ``CREATE DATABASE`` copies ``template1`` into the WAL and
    waits for its flush; emptying a database writes next to nothing."""

    SESSIONS = (
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    SCHEMAS = (
        "SELECT nspname FROM pg_namespace"
        " WHERE nspname <> 'information_schema' AND NOT starts_with(nspname, 'pg_')"
    )

    def __init__(self, admin: sa.Engine):
        self.databases = PostgresDatabases(admin)
        urls = [self.databases.url(f"sm_{label}") for label in ("source", "warehouse")]
        # one connection each, kept from history to history: none of the histories' own
        self.cleaners = [
            sa.create_engine(url, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0)
            for url in urls
        ]
        self.engines = (make_engine(urls[0], role="app"), make_engine(urls[1], role="warehouse"))

    def fresh(self) -> tuple[sa.Engine, sa.Engine]:
        """The (source, warehouse) engines on the two databases, emptied: nothing of any
        history before is left, no connection of it either."""
        for engine in self.engines:
            engine.dispose()
        for cleaner in self.cleaners:
            with cleaner.connect() as conn:
                conn.exec_driver_sql(self.SESSIONS)
                for name in conn.exec_driver_sql(self.SCHEMAS).scalars().all():
                    conn.exec_driver_sql(f'DROP SCHEMA "{name}" CASCADE')
                conn.exec_driver_sql("CREATE SCHEMA public")
        return self.engines

    def drop_all(self) -> None:
        for engine in (*self.engines, *self.cleaners):
            engine.dispose()
        self.databases.drop_all()


@pytest.fixture
def emptied(postgres_admin):
    """:class:`EmptiedDatabases` for the random histories of one test, dropped after it."""
    databases = EmptiedDatabases(postgres_admin)
    yield databases
    databases.drop_all()


# --- the machine -----------------------------------------------------------------------


class LoadHistories(RuleBasedStateMachine):
    """What every declared table's machine shares: one history on fresh databases (and a
    folder), the loads (incremental, range, dry run) with their crashes and retries, and
    the invariants of the warehouse, the ledger and the watermark of ``spec``'s table.

    A table's machine adds the app's rules for its table (writes, late rows, deletes),
    how its warehouse rows are read back (:meth:`_warehouse_rows`), and its own
    invariants (the source's rows, its files). Hypothesis orders rules by name, wherever
    they are defined, so the orders machine draws exactly as it did before this class
    existed."""

    backend = "sqlite"
    admin: sa.Engine | None = None  # PostgreSQL: makes and drops the history's databases
    spec: TableSpec = ORDERS
    rows_noun = "orders"  # in the counts: "deleted orders"
    min_invariants = 6  # check_all fails when fewer are found
    other_batches = 0  # ledger rows of other tables the machine's start writes
    emptied: EmptiedDatabases | None = None  # PostgreSQL: one pair emptied per history

    @staticmethod
    def load(source, warehouse, **kwargs):
        raise NotImplementedError

    def __init__(self):
        super().__init__()
        STATS["histories"] += 1
        self.history = STATS["histories"]
        self.steps = 0
        self.tmp = Path(tempfile.mkdtemp(prefix="pa-stateful-"))
        self.folder = self.tmp / self.spec.daily_files[0].name  # paid_orders
        self.databases = None
        if self.emptied is not None:  # PostgreSQL's databases, emptied, and their engines
            self.source, self.warehouse = self.emptied.fresh()
        else:
            urls = self._new_databases()
            self.source = make_engine(urls[0], role="app")
            self.warehouse = make_engine(urls[1], role="warehouse")
        self.planted: set[Path] = set()  # a killed writer's temp files, until a write
        self.repaired = False
        self.last_sequence = 0
        self.model: Model
        if currently_in_test_context():  # not in the fixed history, driven by hand
            note(f"history {self.history} on {self.backend}; seed {STATS['seed']}")

    def _new_databases(self) -> list[str]:
        """The (source, warehouse) URLs of new databases: SQLite files in the history's
        folder, or made on the server (and dropped at the teardown)."""
        if self.backend == "sqlite":
            return [f"sqlite:///{self.tmp / name}" for name in ("app.db", "warehouse.db")]
        if self.backend == "mariadb":  # a MariaDB source, a SQLite warehouse
            self.databases = MysqlDatabases(self.admin)
            return [self.databases.url("sm_source"), f"sqlite:///{self.tmp / 'warehouse.db'}"]
        self.databases = PostgresDatabases(self.admin)
        return [self.databases.url(f"sm_{label}") for label in ("source", "warehouse")]

    def teardown(self):
        STATS["steps"] += self.steps
        if hasattr(self, "model"):
            STATS.update(self.model.stats)
        self.source.dispose()
        self.warehouse.dispose()
        if self.databases is not None:
            self.databases.drop_all()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _step(self, name: str) -> None:
        self.steps += 1
        STATS[f"rule {name}"] += 1

    # --- time -------------------------------------------------------------------------

    @property
    def tz(self):
        return self.model.tz

    def _at(self, spec) -> tuple[str, datetime]:
        """(text, instant) for a drawn (day, clock, form): the instant comes first."""
        day, clock, form = spec
        # text carries no fold: a drawn fold=1 (st.times draws it) would put a clock of the
        # DST gap or overlap an hour from where the core reads its text, fold=0
        naive = datetime.combine(FIRST_DAY + timedelta(days=day), clock.replace(fold=0))
        instant = naive.replace(tzinfo=self.tz)  # a DST-gap clock reads as the core reads it
        return render(instant, form, self.tz, naive), instant.astimezone(UTC)

    def _bound(self, spec) -> datetime:
        kind, value = spec
        if kind == "midnight":
            day = FIRST_DAY + timedelta(days=value)
            return datetime.combine(day, time(0), tzinfo=self.tz).astimezone(UTC)
        return self._at(value)[1]

    # --- loads ------------------------------------------------------------------------

    def _call_load(self, start=None, end=None, dry_run=False, allow=False):
        return self.load(
            self.source,
            self.warehouse,
            tz=self.tz,
            lookback_days=self.model.lookback_days,
            now=NOW,
            start=start,
            end=end,
            dry_run=dry_run,
            deletes=DeletePolicy(allow=allow),
        )

    def _late_instant(self, late: str, seconds: int) -> datetime:
        """An instant older than the watermark: inside the lookback, on its edge, beyond."""
        edge = self.model.watermark - timedelta(days=self.model.lookback_days)
        STATS[f"late row {late}"] += 1
        return {
            "edge": edge,  # exactly W − lookback: still read (>=)
            "just_outside": edge - timedelta(microseconds=1),
            "inside": min(edge + timedelta(seconds=seconds), self.model.watermark),
            "far": edge - timedelta(seconds=seconds),
            "at_watermark": self.model.watermark,
        }[late]

    def _load(self, start, end, crashes, retry, allow=False):
        if start is not None and self.model.predict_load(start, end, allow_deletes=allow).refused:
            with pytest.raises(DeleteRefused):  # nothing written: every invariant holds
                self._call_load(start, end, allow=allow)
            STATS["refused deletes"] += 1
            return
        for point in crashes:
            prediction = self.model.predict_load(start, end, allow_deletes=allow)
            with crashing_at(point), pytest.raises(SimulatedCrash):
                self._call_load(start, end, allow=allow)
            STATS[f"crash {point}"] += 1
            if LOAD_COMMITTED[point]:  # the lost acknowledgement: it did land
                self.model.commit_load(prediction)
            if not retry:
                return
            self._check_warehouse()
        prediction = self.model.predict_load(start, end, allow_deletes=allow)
        result = self._call_load(start, end, allow=allow)
        self._check_result(result, prediction)
        self.model.commit_load(prediction)
        self.model.last_days_touched = result.days_touched
        STATS[f"deleted {self.rows_noun}"] += len(prediction.deleted)

    def _check_result(self, result, p) -> None:
        got = (
            result.kind,
            result.skipped,
            result.window_start,
            result.window_end,
            result.watermark_before,
            result.watermark_after,
            result.rows_read,
            result.inserted,
            result.updated,
            result.unchanged,
            result.newest_read,
            result.rows_deleted,
            result.deleted_keys,
        )
        want = (
            p.kind,
            p.skipped,
            p.window_start,
            p.window_end,
            p.watermark_before,
            p.watermark_after,
            len(p.read),
            p.inserted,
            p.updated,
            p.unchanged,
            p.newest,
            len(p.deleted) if p.kind == "range" else None,
            p.deleted[:20],
        )
        assert got == want
        touched = set(result.days_touched)
        assert p.needed_days <= touched, f"days_touched misses {p.needed_days - touched}"
        assert touched <= p.possible_days, f"days_touched has extra {touched - p.possible_days}"
        if p.key in self.model.batch_ids:
            assert result.batch_id == self.model.batch_ids[p.key], "same batch, new id"
        else:
            assert result.batch_id not in self.model.batch_ids.values(), "two batches, one id"
            if not result.dry_run:
                self.model.batch_ids[p.key] = result.batch_id
        STATS["skipped batches"] += result.skipped

    @rule(plan_first=st.booleans(), crashes=load_crashes, retry=st.booleans())
    def incremental_load(self, plan_first, crashes, retry):
        self._step("incremental_load")
        if plan_first:  # `pipeline-assets plan`: predicts this load, writes nothing
            result = self._call_load(dry_run=True)
            assert result.dry_run
            self._check_result(result, self.model.predict_load())
            self._check_warehouse()
            STATS["dry runs"] += 1
        self._load(None, None, crashes, retry)

    @rule(start=bounds, end=bounds, crashes=range_crashes, retry=st.booleans(), allow=st.booleans())
    def range_load(self, start, end, crashes, retry, allow):
        """A backfill of the load over [start, end): the watermark must not move; the
        orders of the range the app deleted go, within the guard unless allowed."""
        self._step("range_load")
        start, end = self._bound(start), self._bound(end)
        if end <= start:
            with pytest.raises(LoadError):
                self._call_load(start, end)
            return
        self._load(start, end, crashes, retry, allow)

    # --- invariants -------------------------------------------------------------------

    def _has_tables(self) -> bool:
        with self.warehouse.connect() as conn:
            return sa.inspect(conn).has_table(warehouse_table(self.spec).name)

    def _warehouse_rows(self) -> dict:
        """key → the stored row, as the model's ``stored`` gives it; the table exists."""
        raise NotImplementedError

    def _check_warehouse(self) -> None:
        rows = self._warehouse_rows() if self._has_tables() else {}
        want = {oid: v.stored(oid) for oid, v in self.model.warehouse.items()}
        assert rows == want
        source = {oid: v.stored(oid) for oid, v in self.model.source.items()}
        differs = {oid for oid in set(source) | set(rows) if rows.get(oid) != source.get(oid)}
        assert differs == self.model.stale(), "rows differ from the source unexpectedly"

    def check_all(self) -> None:
        """Every ``@invariant`` below, for the fixed history (Hypothesis calls them itself).

        Found by the mark ``@invariant`` leaves, so a new invariant is never left out; if a
        Hypothesis release renames the mark, nothing is found and this fails loudly."""
        checks = [
            name
            for name, f in inspect.getmembers(type(self))
            if hasattr(f, "hypothesis_stateful_invariant")
        ]
        assert len(checks) >= self.min_invariants, f"invariants not found: {checks}"
        for name in checks:
            getattr(self, name)()

    @invariant()
    def warehouse_equals_source_except_predicted_late_rows(self):
        self._check_warehouse()

    @invariant()
    def each_batch_once_in_the_ledger(self):
        if not self._has_tables():
            assert not self.model.ledger
            return
        b = batches.c
        with self.warehouse.connect() as conn:
            count, distinct = conn.execute(
                sa.select(sa.func.count(), sa.func.count(sa.distinct(b.batch_id)))
            ).one()
            rows = conn.execute(
                sa.select(
                    b.batch_id,
                    b.kind,
                    b.window_start,
                    b.window_end,
                    b.rows_read,
                    b.inserted,
                    b.updated,
                    b.unchanged,
                    b.watermark_before,
                    b.watermark_after,
                    b.rows_deleted,
                ).where(of_table(b.table_name, self.spec))
            ).all()
        assert count == distinct
        # the table's own rows, and no other table's batch came or went
        assert count == len(rows) + self.other_batches
        columns = (
            "kind",
            "window_start",
            "window_end",
            "rows_read",
            "inserted",
            "updated",
            "unchanged",
            "watermark_before",
            "watermark_after",
            "rows_deleted",
        )
        got = Counter(tuple(r[1:]) for r in rows)
        want = Counter(tuple(e[c] for c in columns) for e in self.model.ledger.values())
        assert got == want
        by_id = {r[0]: tuple(r[1:]) for r in rows}
        for key, batch_id in self.model.batch_ids.items():
            entry = self.model.ledger[key]
            assert by_id.get(batch_id) == tuple(entry[c] for c in columns)

    @invariant()
    def watermark_is_newest_incremental_row_and_never_moved_back(self):
        assert wm.current(self.warehouse, table=self.spec.name) == self.model.watermark
        history = wm.history(self.warehouse, spec=self.spec)
        assert [(h.kind, h.old_value, h.new_value) for h in history] == [
            ("load", old and canonical(old), canonical(new))
            for old, new in self.model.watermark_changes
        ]
        for old, new in self.model.watermark_changes:
            assert old is None or new > old

    def _days(self, choice) -> list[str]:
        kind, first, count = choice
        if kind == "touched":
            return list(self.model.last_days_touched) or WINDOW_DAYS[:1]
        return WINDOW_DAYS[first : first + count]

    @precondition(
        lambda self: not self.repaired and set(self.model.warehouse) - set(self.model.source)
    )
    @rule()
    def repair_everything(self):
        """The repair verify prints, of every day at once: a range load of all of time with
        deletes allowed, then every day rebuilt. Afterwards the warehouse is the source and
        every day file is the warehouse's, whatever happened before."""
        self._step("repair_everything")
        self.repaired = True  # once a history: it rewrites every day file
        self._load(EVERYTHING[0], EVERYTHING[1], [], True, allow=True)
        days = sorted(
            set(WINDOW_DAYS)
            | set(self.model.vouched)
            | {v.day(self.tz).isoformat() for v in self.model.warehouse.values()}
        )
        self._write(days, f"h{self.history}-s{self.steps}-repair", None)
        assert self.model.warehouse == self.model.source
        assert not self.model.stale()
        for day in days:
            assert self.model.day_state(day) == ("committed", self._expected([day])[day])
        STATS["repairs of everything"] += 1

    # --- day files --------------------------------------------------------------------

    def _view(self, days: list[str]) -> dict[str, list[dict]]:
        """The rows of the table's daily file on ``days``, as its asset builds them."""
        raise NotImplementedError

    def _expected(self, days: list[str]) -> dict[str, list[dict]]:
        """The same, by the model."""
        raise NotImplementedError

    def _write(self, days: list[str], run_id: str, point: str | None) -> bool:
        """Build and write ``days`` as the asset + IO manager do; True when it completed."""
        by_day = self._view(days)
        expected = self._expected(days)
        assert by_day == expected
        watermark = wm.current(self.warehouse, table=self.spec.name)
        assert watermark == self.model.watermark
        watermark_text = watermark.isoformat() if watermark else None
        landed, manifest = FILES_LANDED.get(point, ("all", True))
        if point == "files_between_days" and len(days) < 2:
            point, landed, manifest = None, "all", True  # a single day never gets there
        try:
            with crashing_at(point) if point else nullcontext():
                written = write_day_files(
                    self.folder,
                    by_day,
                    run_id=run_id,
                    written_at=NOW,
                    watermark=watermark_text,
                    spec=self.spec,
                )
        except SimulatedCrash:
            assert point is not None, "crashed with no crash point set"
            STATS[f"crash {point}"] += 1
            completed = False
        else:
            assert point is None, f"no crash at {point}"
            completed = True
        self.planted.clear()  # every writer clears stale temps first, under the lock
        replaced = {"none": [], "first": sorted(days)[:1], "all": sorted(days)}[landed]
        self.model.files_replaced(expected, replaced)
        if manifest:
            self.model.manifest_written(expected)
        if completed:
            self._check_manifest(written, days, expected, watermark_text, run_id)
        return completed

    def _check_manifest(self, written, days, expected, watermark_text, run_id) -> None:
        manifest = json.loads(written.manifest_path.read_text())
        assert written.sequence > self.last_sequence
        self.last_sequence = written.sequence
        assert manifest["run_id"] == run_id
        assert manifest["days_written"] == sorted(days)
        assert manifest["watermark"] == watermark_text
        assert manifest["written_at"] == NOW.isoformat()
        assert manifest.get("format", "json") == self.form
        assert {d: f["rows"] for d, f in manifest["files"].items()} == {
            d: len(rows) for d, rows in expected.items()
        }

    @rule(choice=day_choices, crashes=file_crashes, retry=st.booleans(), same_run_id=st.booleans())
    def rebuild_days(self, choice, crashes, retry, same_run_id):
        """The table's daily files (paid_orders) for some days; crashes, then a retry (a
        step retry keeps the run id)."""
        self._step("rebuild_days")
        days = self._days(choice)
        run = f"h{self.history}-s{self.steps}"
        for attempt, point in enumerate(crashes):
            run_id = run if same_run_id else f"{run}-a{attempt}"
            if self._write(days, run_id, point) or not retry:
                return
            self._check_days()
        self._write(days, run if same_run_id else f"{run}-a{len(crashes)}", None)

    @rule(day=st.sampled_from(WINDOW_DAYS), in_pointers=st.booleans())
    def writer_killed_leaving_temp(self, day, in_pointers):
        """What a SIGKILL between a temp file's write and its rename leaves behind."""
        self._step("writer_killed_leaving_temp")
        where = self.folder / "_committed" if in_pointers else self.folder
        where.mkdir(parents=True, exist_ok=True)
        form = "json" if in_pointers else self.form  # a pointer is JSON in either format
        temp = where / f".{day}.{form}.{os.getpid()}.{secrets.token_hex(4)}.partial"
        temp.write_bytes(b'[{"amount":"1')
        self.planted.add(temp)

    # --- invariants of the daily files --------------------------------------------

    def _check_days(self) -> None:
        for day in sorted(set(WINDOW_DAYS) | set(self.model.vouched) | set(self.model.on_disk)):
            state, rows = self.model.day_state(day)
            status = day_status(self.folder, day)
            assert (day, status.state) == (day, state), status.reason
            if rows is not None:
                assert status.format == self.form
                assert self._as_read(read_committed_day(self.folder, day)) == self._typed(rows)
                STATS["committed day checks"] += 1
            else:
                with pytest.raises(UncommittedDayError):
                    read_committed_day(self.folder, day)
                STATS[f"{state} day checks"] += 1

    @property
    def form(self) -> str:
        """The format of the table's day files: json or parquet."""
        return self.spec.daily_files[0].format

    def _as_read(self, got) -> list[dict]:
        """A committed day as a reader gets it: a list of rows (JSON), or a
        ``pyarrow.Table`` of typed columns (Parquet), as its rows."""
        if self.form == "parquet":
            assert isinstance(got, pa.Table), type(got)
            return got.to_pylist()
        assert isinstance(got, list), type(got)
        return got

    def _typed(self, rows: list[dict]) -> list[dict]:
        """The model's rows of a day (JSON-ready) as a reader gets them from its file."""
        if self.form == "parquet":
            types = {c.name: str(c.type) for c in self.spec.columns}
            return parquet_day_rows(rows, types, self.spec.primary_key)
        return rows

    @invariant()
    def committed_days_hold_the_paid_orders_as_written(self):
        self._check_days()

    @invariant()
    def no_temp_file_outlives_a_write(self):
        found = set(self.tmp.rglob("*.partial"))
        assert found == self.planted
        if self.folder.exists():
            for entry in self.folder.iterdir():
                assert (
                    DAY_FILE_RE.fullmatch(entry.name)
                    or MANIFEST_RE.fullmatch(entry.name)
                    or entry.name in (".lock", "_committed")
                    or entry in self.planted
                ), f"unexpected file {entry.name}"
                day_file = DAY_FILE_RE.fullmatch(entry.name)
                assert not day_file or day_file.group(2) == self.form, entry.name


class PipelineHistories(LoadHistories):
    """The orders machine: the chapter's app writing orders, and paid_orders' day files."""

    load = staticmethod(load_orders)

    def _view(self, days):
        return paid_orders_by_day(self.warehouse, days, self.tz)

    def _expected(self, days):
        return self.model.paid_by_day(days)

    # --- the app ----------------------------------------------------------------------

    @initialize(zone=st.sampled_from(ZONES), lookback=st.sampled_from([2, 1, 0]))
    def start(self, zone, lookback):
        self.model = Model(tz=ZoneInfo(zone), lookback_days=lookback)
        demo.init(self.source)
        for order_id, status, amount, updated_at in demo.CHAPTER_ORDERS:
            instant = datetime.combine(date.fromisoformat(updated_at), time(0), tzinfo=self.tz)
            self.model.set_order(
                order_id, Version(status, amount, updated_at, instant.astimezone(UTC))
            )

    def _set(self, order_id: int, status: str, amount: str, text: str, instant: datetime):
        demo.set_order(
            self.source, order_id, status=status, amount=amount, updated_at=text, tz=self.tz
        )
        self.model.set_order(order_id, Version(status, amount, text, instant))

    @rule(order_id=order_ids, status=statuses, amount=amounts, at=when)
    def app_writes_order(self, order_id, status, amount, at):
        self._step("app_writes_order")
        self._set(order_id, status, amount, *self._at(at))

    @precondition(lambda self: self.model.source)
    @rule(data=st.data(), at=st.one_of(st.none(), when))
    def app_flips_paid(self, data, at):
        """A status change to or from paid, with a new timestamp or (a sloppy app) none."""
        self._step("app_flips_paid")
        order_id = data.draw(st.sampled_from(sorted(self.model.source)), label="order_id")
        old = self.model.source[order_id]
        status = (
            "paid"
            if old.status != "paid"
            else data.draw(st.sampled_from(STATUSES[1:]), label="status")
        )
        text, instant = (old.updated_at, old.instant) if at is None else self._at(at)
        self._set(order_id, status, old.amount, text, instant)

    @precondition(lambda self: self.model.watermark is not None)
    @rule(
        order_id=order_ids,
        status=statuses,
        amount=amounts,
        late=lateness,
        form=forms,
        seconds=st.integers(1, 2 * 86_400),
    )
    def app_writes_late_row(self, order_id, status, amount, late, form, seconds):
        """A row older than the watermark: inside the lookback, on its edge, or beyond."""
        self._step("app_writes_late_row")
        instant = self._late_instant(late, seconds)
        self._set(order_id, status, amount, render(instant, form, self.tz), instant)

    @precondition(lambda self: len(self.model.source) > 1)
    @rule(data=st.data())
    def app_deletes_order(self, data):
        """The app deletes an order (a test order purged, an erasure request)."""
        self._step("app_deletes_order")
        order_id = data.draw(st.sampled_from(sorted(self.model.source)), label="order_id")
        with self.source.begin() as conn:
            conn.execute(sa.text("DELETE FROM orders WHERE order_id = :id"), {"id": order_id})
        self.model.delete_order(order_id)

    # --- invariants of orders and its files ------------------------------------------

    def _warehouse_rows(self) -> dict[int, tuple]:
        rows: dict[int, tuple] = {}
        with self.warehouse.connect() as conn:
            count, distinct = conn.execute(
                sa.select(sa.func.count(), sa.func.count(sa.distinct(orders.c.order_id)))
            ).one()
            assert count == distinct, "an order is stored twice"
            for row in conn.execute(sa.select(orders)):
                rows[int(row.order_id)] = (
                    int(row.order_id),
                    row.status,
                    row.amount,
                    row.updated_at,
                )
        return rows

    @invariant()
    def source_only_changes_through_the_app(self):
        t = demo.source_orders
        with self.source.connect() as conn:
            rows = {
                r[0]: tuple(r[1:])
                for r in conn.execute(
                    sa.select(t.c.order_id, t.c.status, t.c.amount, t.c.updated_at)
                )
            }
        assert rows == {
            oid: (v.status, v.amount, v.updated_at) for oid, v in self.model.source.items()
        }


# --- the second declared table: payments -------------------------------------------------

# A key of two columns, every type, NULLs in the nullable columns, Unicode text: what the
# app writes into tables.PAYMENTS' source table (tables.make_payments' DDL, one per dialect).
PAYMENT_STATUSES = ["captured", "failed", "pending", "refunded"]
payment_keys = st.tuples(st.integers(1, 6), st.integers(1, 3))  # several attempts an id
cents = st.one_of(st.integers(-(10**6), 10**9), st.sampled_from([0, -(2**63), 2**63 - 1]))
fees = st.builds(
    lambda n: Decimal(n).scaleb(-2),  # decimal(10,2): every digit, both signs
    st.one_of(st.integers(-(10**4), 10**6), st.sampled_from([10**10 - 1, 1 - 10**10])),
)
payment_values = st.tuples(
    st.sampled_from(PAYMENT_STATUSES),
    cents,
    fees,
    st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),  # rate
    st.one_of(st.none(), st.text(st.characters(codec="utf-8"), max_size=8)),  # note
    st.booleans(),  # refundable
    st.one_of(st.none(), st.dates(date(1000, 1, 1), date(9999, 12, 31))),  # settle_on
)


class PaymentHistories(LoadHistories):
    """The same histories on ``payments``: the app writes attempts of every type (a fee
    spelled with its two places or without), flips them to and from captured, writes
    them late, deletes single attempts. Loads, range loads under the delete guard, dry
    runs, rebuilds of ``captured_payments`` (``views.day_rows`` and ``write_day_files``
    with the spec), crashes at every crash point, the repair, and the invariants of
    warehouse (by the composite key), ledger, watermark and day files are the shared
    ones; its own are the source's rows and ``orders`` (loaded once beside it) left
    alone."""

    spec = PAYMENTS
    rows_noun = "payments"
    min_invariants = 7
    other_batches = 1  # the one load of orders at the start

    def load(self, source, warehouse, **kwargs):
        return load_table(source, warehouse, spec=self.spec, **kwargs)

    @initialize(zone=st.sampled_from(ZONES), lookback=st.sampled_from([2, 1, 0]))
    def start(self, zone, lookback):
        self.model = Model(tz=ZoneInfo(zone), lookback_days=lookback)
        make_payments(self.source)
        demo.init(self.source)  # the chapter's orders beside it, loaded once
        load_orders(self.source, self.warehouse, tz=self.tz, lookback_days=lookback, now=NOW)
        self.neighbour = self._orders_state()

    def _put(
        self, key: tuple[int, int], values, text: str, instant: datetime, trim: bool = False
    ) -> None:
        """Insert or replace one attempt as the app does (one transaction)."""
        status, amount_cents, fee, rate, note, refundable, settle_on = values
        if self.backend != "sqlite" and note is not None:
            note = note.replace("\x00", "\ufffd")  # a server's text holds no NUL
        payment = Payment(
            status,
            amount_cents,
            fee,
            rate,
            note,
            refundable,
            settle_on,
            text if self.backend == "sqlite" else instant.isoformat(),
            instant,
        )
        with self.source.begin() as conn:
            conn.execute(
                sa.text("DELETE FROM payments WHERE payment_id = :p AND attempt = :a"),
                {"p": key[0], "a": key[1]},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO payments (payment_id, attempt, status, amount_cents, fee, rate, "
                    "note, refundable, settle_on, modified_at, legacy_code) VALUES (:p, :a, :s, "
                    ":c, :f, :r, :n, :b, :d, :m, 'x')"
                ),
                {
                    "p": key[0],
                    "a": key[1],
                    "s": status,
                    "c": amount_cents,
                    "f": format(fee.normalize() if trim else fee, "f"),
                    "r": rate,
                    "n": note,
                    "b": refundable,
                    "d": settle_on and settle_on.isoformat(),
                    # SQLite keeps the text as written; a server's timestamptz the instant
                    "m": text if self.backend == "sqlite" else instant,
                },
            )
        self.model.set_row(key, payment)

    @rule(key=payment_keys, values=payment_values, at=when, trim=st.booleans())
    def app_writes_payment(self, key, values, at, trim):
        self._step("app_writes_payment")
        self._put(key, values, *self._at(at), trim=trim)

    @precondition(lambda self: self.model.source)
    @rule(data=st.data(), at=st.one_of(st.none(), when))
    def app_flips_captured(self, data, at):
        """A status change to or from captured, with a new stamp or (a sloppy app) none."""
        self._step("app_flips_captured")
        key = data.draw(st.sampled_from(sorted(self.model.source)), label="key")
        old = self.model.source[key]
        status = (
            "captured"
            if old.status != "captured"
            else data.draw(st.sampled_from(PAYMENT_STATUSES[1:]), label="status")
        )
        text, instant = (old.modified_at, old.instant) if at is None else self._at(at)
        self._put(
            key,
            (status, old.amount_cents, old.fee, old.rate, old.note, old.refundable, old.settle_on),
            text,
            instant,
        )

    @precondition(lambda self: self.model.watermark is not None)
    @rule(
        key=payment_keys,
        values=payment_values,
        late=lateness,
        form=forms,
        seconds=st.integers(1, 2 * 86_400),
    )
    def app_writes_late_payment(self, key, values, late, form, seconds):
        """An attempt older than the watermark: inside the lookback, on its edge, beyond."""
        self._step("app_writes_late_payment")
        instant = self._late_instant(late, seconds)
        self._put(key, values, render(instant, form, self.tz), instant)

    @precondition(lambda self: len(self.model.source) > 1)
    @rule(data=st.data())
    def app_deletes_payment(self, data):
        """The app deletes one attempt of a payment; its other attempts stay."""
        self._step("app_deletes_payment")
        key = data.draw(st.sampled_from(sorted(self.model.source)), label="key")
        delete_payment(self.source, *key)
        self.model.delete_row(key)

    def _view(self, days):
        return day_rows(self.warehouse, days, self.tz, self.spec)

    def _expected(self, days):
        return self.model.view_by_day(days)

    def _write(self, days: list[str], run_id: str, point: str | None) -> bool:
        """As for any table; then each day file written holds the bytes of the model's
        captured attempts (sorted by the whole key, compact, key-sorted ASCII JSON), or in
        Parquet: the bytes its rows give in any order, which read back (by pyarrow
        itself) as the model's rows in their declared types; no file of the other format."""
        completed = super()._write(days, run_id, point)
        if completed:
            key = self.spec.primary_key
            for day, rows in self._expected(days).items():
                data = (self.folder / f"{day}.{self.form}").read_bytes()
                if self.form == "parquet":
                    assert data == parquet_bytes(day, rows[::-1], self.spec)[0], day
                    read = read_parquet(data).to_pylist()
                    assert read == self._typed(rows), day
                else:
                    assert data == day_file_bytes(rows, key), day
                other = "json" if self.form == "parquet" else "parquet"
                assert not (self.folder / f"{day}.{other}").exists(), day
                STATS["day bytes checks"] += 1
        return completed

    # --- invariants of payments -----------------------------------------------------

    def _warehouse_rows(self) -> dict[tuple, tuple]:
        rows: dict[tuple, tuple] = {}
        with self.warehouse.connect() as conn:
            for r in conn.execute(sa.select(warehouse_table(self.spec))):
                key = (int(r.payment_id), int(r.attempt))
                assert key not in rows, f"payment {key} is stored twice"
                rows[key] = tuple(r)
        for key, row in rows.items():  # every value in its stored type (a fee as text)
            if key in self.model.warehouse:
                want = self.model.warehouse[key].stored(key)
                assert [type(v) for v in row] == [type(v) for v in want], (row, want)
        return rows

    def _source_value(self, name: str, value):
        if value is None:
            return None
        if name == "fee":  # SQLite's NUMERIC affinity keeps a number; a server a Decimal
            return Decimal(str(value))
        if name == "refundable":
            return bool(value)
        if name == "settle_on":
            return value if isinstance(value, str) else value.isoformat()
        if name == "modified_at" and self.backend != "sqlite":
            return value.astimezone(UTC)  # the instant a timestamptz holds
        return value

    @invariant()
    def source_only_changes_through_the_app(self):
        names = self.spec.column_names
        with self.source.connect() as conn:
            rows = {
                tuple(r[:2]): tuple(
                    self._source_value(n, v) for n, v in zip(names[2:], r[2:], strict=True)
                )
                for r in conn.execute(sa.text(f"SELECT {', '.join(names)} FROM payments"))
            }
        assert rows == {
            key: (
                p.status,
                p.amount_cents,
                p.fee,
                p.rate,
                p.note,
                p.refundable,
                p.settle_on and p.settle_on.isoformat(),
                p.modified_at if self.backend == "sqlite" else p.instant,
            )
            for key, p in self.model.source.items()
        }

    def _orders_state(self) -> tuple:
        """orders' rows, watermark, history and ledger, as they are (one connection)."""
        w, h, b = watermark_state.c, watermark_history.c, batches.c
        with self.warehouse.connect() as conn:
            return (
                sorted(tuple(r) for r in conn.execute(sa.select(orders))),
                conn.execute(sa.select(w.name, w.value).where(w.name == ORDERS.name)).all(),
                conn.execute(
                    sa.select(h.kind, h.new_value, h.batch_id)
                    .where(of_table(h.table_name, ORDERS))
                    .order_by(h.id)
                ).all(),
                conn.execute(sa.select(b.batch_id).where(of_table(b.table_name, ORDERS)))
                .scalars()
                .all(),
            )

    @invariant()
    def orders_beside_it_left_alone(self):
        """Each table's state is its own: payments' loads never touch orders'."""
        assert self._orders_state() == self.neighbour


class PaymentParquetHistories(PaymentHistories):
    """The payments machine with ``captured_payments`` in Parquet
    (``tables.PAYMENTS_PARQUET``): the same loads, and the file writer's every crash point
    in the other format, each committed day read back as a ``pyarrow.Table`` of typed
    columns holding the model's rows."""

    spec = PAYMENTS_PARQUET


# --- the tests -------------------------------------------------------------------------


@contextmanager
def no_crash_settings_from_outside():
    """The machine sets the crash variables itself; any from the environment wait outside."""
    saved = {name: os.environ.pop(name) for name in CRASH_VARS if name in os.environ}
    try:
        yield
    finally:
        for name in CRASH_VARS:
            os.environ.pop(name, None)
        os.environ.update(saved)


def _run(machine: type[RuleBasedStateMachine], default_examples: int) -> None:
    chosen = os.environ.get("PIPELINE_STATEFUL_SEED")
    run_seed = int(chosen) if chosen else secrets.randbits(32)
    STATS.clear()
    STATS["seed"] = run_seed
    print(
        f"\nstateful {machine.backend}: seed {run_seed} (replay: PIPELINE_STATEFUL_SEED={run_seed})"
    )
    config = settings(
        max_examples=EXAMPLES or default_examples,
        stateful_step_count=STEPS,
        deadline=None,
        derandomize=False,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    try:
        with no_crash_settings_from_outside():
            if get_state_machine_test is not None:
                seed(run_seed)(get_state_machine_test(machine, settings=config))()
            else:  # pragma: no cover
                from hypothesis.stateful import run_state_machine_as_test

                run_state_machine_as_test(machine, settings=config)
    finally:
        summary = ", ".join(f"{k}: {v}" for k, v in sorted(STATS.items()) if k != "seed")
        print(f"stateful {machine.backend} seed {run_seed}: {summary}")


class _Fixed:
    """Stands for ``st.data()`` in the fixed history: every draw gives ``value``."""

    def __init__(self, value):
        self.value = value

    def draw(self, strategy, label=None):
        return self.value


def _fixed_history(machine_class: type[LoadHistories], play: Callable[[Step], None]) -> Counter:
    """One fixed history: the start, then ``play(step)``, each check after every step; the
    counts. ``step(rule, **arguments)`` runs one rule of the machine, then every check."""
    STATS.clear()
    STATS["seed"] = "fixed"
    machine = machine_class()

    def step(rule: str, **arguments) -> None:
        getattr(machine, rule)(**arguments)
        machine.check_all()

    try:
        with no_crash_settings_from_outside():
            step("start", zone="America/New_York", lookback=2)
            play(step)
    finally:
        machine.teardown()
    return Counter({k: v for k, v in STATS.items() if k != "seed"})


def _range_load(step: Step, start: int, end: int, crashes: list[str], retry: bool) -> None:
    """A range load of the local days [start, end) under the delete guard."""
    step(
        "range_load",
        start=("midnight", start),
        end=("midnight", end),
        crashes=crashes,
        retry=retry,
        allow=False,
    )


def _crash_every_incremental_point(step: Step, write: Callable[[int, tuple], None]) -> None:
    """An incremental load crashed at each of its points, then retried. Before load ``n``,
    ``write(n, at)`` gives it new rows to write: ``at`` is day 4 + n, a microsecond before
    local midnight, in another text form for each load."""
    for n, point in enumerate(INCREMENTAL_POINTS):
        write(
            n,
            (4 + n, time(23, 59, 59, 999_999), ("utc", "naive", "date", "z", "local", "minus5")[n]),
        )
        step("incremental_load", plan_first=n == 0, crashes=[point], retry=True)


def _crash_every_file_point(step: Step, write: Callable[[int], None]) -> None:
    """Day files rebuilt crashing at each file point over three days ("between days" is
    reached), then retried: first a killed writer's temp file left, ``write(n)`` a row on
    day n + 1, loaded by a range load of that day (older than the watermark's lookback by
    now: an incremental load would not read it). So each rebuild but the first rewrites a
    committed day with new rows: before its manifest that day reads as uncommitted (the
    check of its bytes against the manifest is what says so), after it as the new
    version. Then the touched days, crashing twice without a retry."""
    for n, point in enumerate(FILE_POINTS):
        step("writer_killed_leaving_temp", day=WINDOW_DAYS[n], in_pointers=n % 2 == 1)
        write(n)
        _range_load(step, n + 1, n + 2, crashes=[], retry=True)
        step(
            "rebuild_days",
            choice=("range", n, 3),
            crashes=[point],
            retry=True,
            same_run_id=n % 2 == 0,
        )
    step(
        "rebuild_days",
        choice=("touched", 0, 0),
        crashes=FILE_POINTS[:2],
        retry=False,
        same_run_id=True,
    )


def _delete_then_repair(step: Step, rule: str, first, later, days: tuple[int, int]) -> None:
    """The app deletes ``first`` (``rule``); a range load of all of time dies at its delete
    step, then is retried. The app deletes ``later``: the range load of ``days`` is refused
    (too many of its rows gone). Last, the repair of everything."""
    step(rule, data=_Fixed(first))
    _range_load(step, 0, N_DAYS, sorted(RANGE_ONLY), retry=True)
    for key in later:
        step(rule, data=_Fixed(key))
    _range_load(step, *days, crashes=[], retry=True)
    step("repair_everything")


def _orders_history(step: Step) -> None:
    """orders: loads crashed at every point (each has new rows to write), a refund on a
    local midnight, a range load crashed without a retry and run again, day files rebuilt
    crashing at every point, deletes, a refused range load, the repair."""

    def new_order(n: int, at: tuple) -> None:
        step("app_writes_order", order_id=107 + n, status="paid", amount=f"{n}.50", at=at)

    _crash_every_incremental_point(step, new_order)
    step(
        "app_writes_order",
        order_id=101,
        status="refunded",
        amount="40.00",
        at=(0, time(0), "local"),
    )
    _range_load(step, 0, 2, crashes=LOAD_POINTS[:2], retry=False)
    _range_load(step, 0, 2, crashes=[], retry=True)

    def order_on_day(n: int) -> None:
        step(
            "app_writes_order",
            order_id=111 + n,
            status="paid",
            amount="7.05",
            at=(n + 1, time(2, 30), "space"),
        )

    _crash_every_file_point(step, order_on_day)
    # 107 goes at the delete step; then 108, and two of the three orders of days 1–3
    # (111, 112): the range load of days 1–3 is refused
    _delete_then_repair(step, "app_deletes_order", 107, (108, 111, 112), days=(1, 4))


def _assert_every_point_crashed(counts: Counter, history: str = "history") -> None:
    missed = [
        point
        for point in POINTS
        if not counts[f"crash {point}"] and point not in SCHEMA_CHANGE_POINTS
    ]
    assert not missed, f"the fixed {history} never crashed at {missed}"
    assert counts["committed day checks"] and counts["uncommitted day checks"]
    assert counts["refused deletes"] == 1 and counts["repairs of everything"] == 1


def _check_orders_history(machine_class: type[PipelineHistories]) -> None:
    """The orders history reached every crash point, refused once, deleted four orders."""
    counts = _fixed_history(machine_class, _orders_history)
    _assert_every_point_crashed(counts)
    assert counts["deleted orders"] == 4  # 107 at the delete step; 108, 111, 112 repaired


def _on(machine: type[LoadHistories], backend: str, admin: sa.Engine, **more) -> type:
    """``machine`` on ``backend``: "postgresql", or "mariadb" (the source on MariaDB, the
    warehouse a SQLite file), its databases made through ``admin``; ``more``: other
    class attributes (``emptied``)."""
    name = {"postgresql": "OnPostgres", "mariadb": "OnMariaDB"}[backend]
    return type(name, (machine,), {"backend": backend, "admin": admin, **more})


def test_every_crash_point_in_a_fixed_history_sqlite():
    """Every crash point, deterministically, each run: not left to the random seed."""
    _check_orders_history(PipelineHistories)


@pytest.mark.postgres
def test_every_crash_point_in_a_fixed_history_postgresql(postgres_admin):
    """The same history on real PostgreSQL databases: every crash point, each run."""
    _check_orders_history(_on(PipelineHistories, "postgresql", postgres_admin))


@pytest.mark.mysql
def test_every_crash_point_in_a_fixed_history_mariadb(mysql_admin):
    """The same history with the source on MariaDB: every crash point of the load."""
    _check_orders_history(_on(PipelineHistories, "mariadb", mysql_admin))


@pytest.mark.mysql
@pytest.mark.long
def test_random_histories_mariadb_source(mysql_admin):
    """Random histories with the source on MariaDB (a SQLite warehouse): every text form
    of updated_at through the MariaDB reader."""
    _run(_on(PipelineHistories, "mariadb", mysql_admin), default_examples=15)


@pytest.mark.long
def test_random_histories_sqlite():
    """Random histories on SQLite files: loads, backfills, rebuilds, crashes, late rows."""
    _run(PipelineHistories, default_examples=80)


@pytest.mark.postgres
@pytest.mark.long
def test_random_histories_postgresql(postgres_admin, emptied):
    """The same histories on real PostgreSQL databases, emptied for each history."""
    machine = _on(PipelineHistories, "postgresql", postgres_admin, emptied=emptied)
    _run(machine, default_examples=40)


def test_machine_knows_every_crash_point():
    """A crash point the machine does not model would go untested: add it to the tables."""
    assert set(POINTS) == set(LOAD_COMMITTED) | set(FILES_LANDED) | SCHEMA_CHANGE_POINTS


def test_step_retry_dying_twice_after_its_manifest_keeps_days_committed(tmp_path):
    """Regression found by the machine: a step retry keeps the run id, so both attempts
    write the same manifest name with different sequences; the newest manifest lists the
    day and matches the file, so the day stays committed."""
    folder = tmp_path / "paid_orders"
    rows = [
        {
            "order_id": 7,
            "status": "paid",
            "amount": "12.50",
            "updated_at": "2026-03-02T03:00:00-05:00",
        }
    ]
    for _attempt in range(2):  # the run, then its step retry: both die after the manifest
        with crashing_at("files_after_manifest"), pytest.raises(SimulatedCrash):
            write_day_files(
                folder, {"2026-03-02": rows}, run_id="run-1", written_at=NOW, spec=ORDERS
            )
    assert day_status(folder, "2026-03-02").state == "committed"
    assert read_committed_day(folder, "2026-03-02") == rows


# --- payments: the same histories on the second declared table -----------------------------


def _payments_history(step: Step) -> None:
    """One payments history that crashes at every crash point: incremental loads, a late
    row, a flip, day files rebuilt (a killed writer's temp files left), a range load
    dying at its delete step, a refused mass delete, the repair."""
    values = ("captured", 1999, Decimal("1.10"), -0.0, "Grüße ☕ 𝄞", True, date(2026, 3, 20))

    def two_attempts(n: int, at: tuple) -> None:
        step("app_writes_payment", key=(n + 1, 1), values=values, at=at, trim=n % 2 == 0)
        step(
            "app_writes_payment",
            key=(n + 1, 2),
            values=("failed", -(2**63), Decimal("-99999999.99"), None, None, False, None),
            at=(4 + n, time(0), "date"),
            trim=True,
        )

    _crash_every_incremental_point(step, two_attempts)
    step(
        "app_writes_late_payment",
        key=(1, 3),
        values=("pending", *values[1:]),
        late="edge",
        form="plus0530",
        seconds=1,
    )
    step("app_flips_captured", data=_Fixed((1, 3)), at=None)  # to captured, same stamp
    step("incremental_load", plan_first=False, crashes=[], retry=True)

    def attempt_on_day(n: int) -> None:
        step(
            "app_writes_payment",
            key=(n + 1, 3),
            values=values,  # day n + 1
            at=(n + 1, time(2, 30), "space"),
            trim=False,
        )

    _crash_every_file_point(step, attempt_on_day)
    # (1, 2) goes at the delete step; then four of the six attempts of days 5–6
    later = ((2, 1), (2, 2), (3, 1), (3, 2))
    _delete_then_repair(step, "app_deletes_payment", (1, 2), later, days=(5, 7))


def _check_payments_history(machine_class: type[PaymentHistories]) -> None:
    """The payments history reached every crash point, refused once, deleted five
    attempts, checked day files' bytes and wrote a row on the lookback's edge."""
    counts = _fixed_history(machine_class, _payments_history)
    _assert_every_point_crashed(counts, "payments history")
    assert counts["deleted payments"] == 5  # (1, 2) at the delete step; four repaired
    assert counts["day bytes checks"] and counts["late row edge"] == 1


def test_every_crash_point_in_a_fixed_payments_history_sqlite():
    """payments: every crash point, of the load and of the files, deterministically."""
    _check_payments_history(PaymentHistories)


def test_every_crash_point_in_a_fixed_payments_parquet_history_sqlite():
    """The same payments history with its day files in Parquet: every crash point of
    the file writer in that format, each day checked against the model."""
    _check_payments_history(PaymentParquetHistories)


@pytest.mark.postgres
def test_every_crash_point_in_a_fixed_payments_history_postgresql(postgres_admin):
    """The same payments history on real PostgreSQL databases: every crash point."""
    _check_payments_history(_on(PaymentHistories, "postgresql", postgres_admin))


@pytest.mark.long
def test_random_payments_histories_sqlite():
    """Random histories of payments on SQLite files: every type, composite keys, late
    rows, single attempts deleted, loads and range loads crashed and retried."""
    _run(PaymentHistories, default_examples=PAYMENT_EXAMPLES["sqlite"])


@pytest.mark.postgres
@pytest.mark.long
def test_random_payments_histories_postgresql(postgres_admin, emptied):
    """The same payments histories on real PostgreSQL databases (a timestamptz stamp,
    numeric fee, double rate, date and boolean columns in the source)."""
    machine = _on(PaymentHistories, "postgresql", postgres_admin, emptied=emptied)
    _run(machine, default_examples=PAYMENT_EXAMPLES["postgresql"])
