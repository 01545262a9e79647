"""The pipeline's error types, all in this one module.

Every error the pipeline raises on purpose is a :class:`PipelineError`: its message is
one line that says what failed (which row, day, file or database) and what to do next,
with passwords redacted. The edges — the CLI's ``main``, the assets, the sensors — catch
this family and nothing broader, so anything else (a bug) surfaces as itself, with its
traceback.

The rule of retries: an error is **terminal** (``retryable`` False: a Dagster step fails
at once, without its RetryPolicy) unless it is classified **transient** below. Terminal
is bad input, a setting, a refusal, a day to rebuild: running again unchanged fails the
same way. Transient is only what may pass by itself: a database that is unreachable,
busy or full (by the driver's code, ``core/failures.py``), a broker that did not answer,
a file store that did not answer or is full. The modules that raise these errors import
them from here (``from .errors import ...``) and re-export them under their old names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from .failures import BUSY, FULL, UNREACHABLE, classify


class PipelineError(Exception):
    """Something the user can fix; ``str(error)`` is the one-line message to show.

    ``retryable`` says whether running again unchanged may succeed (an unreachable
    database may come back; a bad row in the source does not fix itself), so a Dagster
    run retries only the errors that can pass. False unless a subclass below says so.
    """

    retryable: bool = False


# --- terminal: running again unchanged fails the same way ---------------------------------


class SettingsError(PipelineError):
    """An environment variable with a value the pipeline cannot use."""


class CommandError(PipelineError):
    """A command that cannot do what was asked: a bad option value, a folder it cannot make."""


class TimeValueError(PipelineError):
    """A value that is not a date or timestamp of a form the pipeline understands."""


class AmountError(PipelineError):
    """An amount that is not a plain decimal number."""


class InvalidRowError(PipelineError):
    """A source row that fails validation; names the row, the column and the value.

    ``row`` is how the message names the row, as its table's spec says
    (:meth:`~pipeline_assets.core.table.spec.TableSpec.row_name`: ``order 105``,
    ``payments (payment_id=7, attempt=2)``); ``key`` is the row's key (a mapping of key
    column to value; None where it has none).
    """

    def __init__(self, row: str, column: str, value: object, reason: str, *, key: object = None):
        self.row, self.column, self.value, self.reason, self.key = row, column, value, reason, key
        super().__init__(
            f"{row}: column {column} = {value!r}: {reason}. Nothing was written and the "
            "watermark is unchanged; fix the row in the source and run again."
        )


class TypeValueError(PipelineError):
    """A value a column's type cannot take; ``reason`` says why, in words for a user."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class UnknownTypeError(PipelineError):
    """A type name that is none of ``core/table/types.py``'s ``KINDS`` (or a malformed
    ``decimal(P,S)``)."""

    def __init__(self, name: object, reason: str):
        super().__init__(f"{name!r}: {reason}")
        self.reason = reason


class DeclarationError(PipelineError):
    """A declaration the pipeline cannot run: names the attribute's path and the value."""

    def __init__(self, path: str, value: object, reason: str, *, where: str = ""):
        self.path, self.value, self.reason, self.where = path, value, reason, where
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}{path}: {value!r}: {reason}")

    def located(self, where: str) -> DeclarationError:
        """The same error, naming the file it came from."""
        return DeclarationError(self.path, self.value, self.reason, where=where)


class DeclarationChanged(PipelineError):
    """A declaration whose ``primary_key`` or ``cursor`` differ from those its table's
    stored rows, state and files were written with (``core/warehouse/declaration.py``).

    Terminal: the stored rows are keyed and stamped by the old ones, and running again
    unchanged meets them again. ``changes`` is a list of ``(attribute, stored, declared)``;
    ``attribute``, ``stored`` and ``declared`` are its first. ``totals_before``: the
    totals table of a table whose state began before declarations (``orders``), whose
    rows with no ``table_name`` are its too.
    """

    def __init__(
        self,
        table: str,
        changes: list[tuple[str, object, object]],
        *,
        totals_before: str | None = None,
    ):
        self.table, self.changes = table, list(changes)
        self.attribute, self.stored, self.declared = self.changes[0]
        what = "; ".join(
            f"{attribute} is {_declared_text(declared)} in the declaration but "
            f"{_declared_text(stored)} in what is stored"
            for attribute, stored, declared in self.changes
        )
        legacy = (
            f" (for {table} also the rows whose table_name is NULL, and the table {totals_before})"
            if totals_before
            else ""
        )
        super().__init__(
            f"table {table}: {what}. A table's key and change stamp cannot change under its "
            "stored rows, watermark and files, so nothing was written. To change them, "
            f"declare the new shape under a new name (name: {table}_v2, say: a new warehouse "
            "table with its own watermark, ledger and day files), load it, then retire the "
            f"old declaration of {table} from the project. Its warehouse table {table}, its "
            "state and its day files stay as they were; to remove them, drop the table "
            f"{table} and delete its rows of pipeline_watermark (name = '{table}'), "
            "pipeline_watermark_history, pipeline_batches, pipeline_declarations, "
            "pipeline_column_fills, pipeline_comparisons and pipeline_id_holes "
            f"(table_name = '{table}'){legacy}, and its day files' folders, by hand."
        )


class SchemaChangeRefused(PipelineError):
    """A declaration whose change the warehouse table cannot follow by itself, refused
    when the run starts, before anything is written (``core/warehouse/evolve.py``). Terminal."""


class TypeChangeRefused(SchemaChangeRefused):
    """A column declared with a type its stored values may not fit (a narrowing, a change
    of kind, a key column's type).

    Terminal: the stored rows hold the old type's values until someone decides what to do
    with them. ``why`` says what the stored values may not fit.
    """

    def __init__(self, table: str, column: str, stored: str, declared: str, why: str):
        self.table, self.column, self.stored, self.declared = table, column, stored, declared
        super().__init__(
            f"table {table}: column {column} is declared {declared} but stored as {stored}, "
            f"and {why}, so nothing was written. Declare it {stored} again (or a type every "
            f"stored value fits: docs/contract.md lists the widenings the pipeline applies "
            f"itself); to store it as {declared}, declare the new shape under a new name "
            f"(name: {table}_v2, say), load it, then retire the old declaration of {table}, "
            "whose warehouse table, state and day files stay as they were."
        )


def _declared_text(value: object) -> str:
    """A key (a list of columns) or a change stamp as a message shows it."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


class LocationError(PipelineError):
    """A module that is not a code location of declared tables."""


class DemoError(PipelineError):
    """A demo command that cannot do what was asked."""


class LoadError(PipelineError):
    """A load asked for something impossible (say, an empty range)."""


class DeleteRefused(PipelineError):
    """A range load that would delete more of its range than the policy lets it.

    Terminal: the source will not find its rows by being asked again. ``rows`` and
    ``those`` are how the table's messages count and name its rows (``row(s)``, ``rows``);
    ``by`` how a range holds them (by their stamp, or by their ``day_column``).
    """

    def __init__(
        self,
        would_delete: int,
        in_range: int,
        start: datetime,
        end: datetime,
        max_share: float,
        *,
        rows: str = "row(s)",
        those: str = "rows",
        by: str = "stamped in it",
    ):
        self.would_delete, self.in_range = would_delete, in_range
        self.start, self.end, self.max_share = start, end, max_share
        share = f"({would_delete / in_range:.0%}, more than MAX_DELETE_SHARE={max_share:g})"
        if start is None:  # cursor: null, every run compares the whole table
            setting = share.replace("MAX_DELETE_SHARE", "max_delete_share")
            what = (
                f"the comparison of the whole table would delete {would_delete} of the "
                f"{in_range} {rows} the warehouse holds {setting}"
            )
            allow = (
                "allow_deletes: true (that run only), or raise the declaration's max_delete_share."
            )
        else:
            what = (
                f"the range load of [{start.isoformat()}, {end.isoformat()}) would delete "
                f"{would_delete} of the {in_range} {rows} the warehouse holds {by} {share}"
            )
            allow = "allow_deletes: true."
        super().__init__(
            f"{what}, because the source no longer holds them; nothing was written. A "
            "source that answers with missing rows (a wrong SOURCE_DATABASE_URL, a replica "
            "being rebuilt, a half-restored backup) looks exactly like this: check it "
            f"first. If those {those} really are gone, run the load again with run config "
            f"{allow}"
        )

    @property
    def metadata(self) -> dict:
        return {
            "would_delete": self.would_delete,
            "rows_in_range": self.in_range,
            "range_start": self.start.isoformat() if self.start else "everything",
            "range_end": self.end.isoformat() if self.end else "everything",
            "max_delete_share": self.max_share,
        }


class WatermarkError(PipelineError):
    """A watermark operation that would break the rules of ``core/warehouse/watermark.py``.

    Terminal: a negative lookback, a rewind forward or without a reason; a load moving it
    back cannot happen under the watermark's lock, so it is a bug, not a race.
    """


class VerifyError(PipelineError):
    """Verify could not compare: an invalid source row, an unreadable warehouse row."""


class DayFilesError(PipelineError):
    """Bad input to a write, or a store that refused it: says which file and what to do.

    Terminal: a bad day, run id or row; a folder the pipeline may not write, a bucket
    that does not exist or refuses the credentials, a store it cannot open. A store that
    did not answer, or is full, is :class:`StoreUnavailable`, below.
    """


class UncommittedDayError(PipelineError):
    """One or more days that are not committed: missing, edited, or never finished.

    Terminal: a reader already waits for a run that is writing right now
    (``daily_files.settled_statuses``), so the days it reports need a rebuild, which its
    message names; reading them again does not commit them.
    """

    state = "is not committed"

    def __init__(self, reasons: Mapping[str, str], *, name: str, rebuild: Callable[[str], str]):
        self.reasons = dict(sorted(reasons.items()))
        self.days = tuple(self.reasons)
        parts = [f"{name} day {day} {self.state}: {why}." for day, why in self.reasons.items()]
        # each command alone on its line, nothing after it: pasted as printed, it runs
        commands = [rebuild(day) for day in self.days]
        how = (
            f" Rebuild it: {commands[0]}"
            if len(commands) == 1
            else " Rebuild them, one command per line:\n" + "\n".join(commands)
        )
        super().__init__(" ".join(parts) + how)


class StaleDayError(UncommittedDayError):
    """Committed days written under another declaration of their file set (other columns,
    types or filter): a reader of the declared shape would mix two shapes. Terminal: a
    rebuild writes them in the declared shape."""

    state = "was written with another declaration"


# --- transient: may pass when run again ----------------------------------------------------


class DatabaseError(PipelineError):
    """A database the pipeline cannot use; the message never contains a password.

    ``kind`` is what :func:`classify` found (read-only, full, unreachable, ...), or None
    for a problem of the pipeline's own finding (a missing table, two URLs the same).
    """

    def __init__(self, message: str, *, kind: str | None = None):
        super().__init__(message)
        self.kind = kind

    @property
    def retryable(self) -> bool:
        """A server that is down, a lock, a full disk may pass; a read-only database, a
        missing right or a setting the pipeline refuses will not, however often it runs."""
        return self.kind in (UNREACHABLE, BUSY, FULL)


class BrokerUnreachable(PipelineError):
    """The broker did not answer the run worker."""

    retryable = True  # a broker that is restarting comes back; the sensors ask again


class StoreUnavailable(DayFilesError):
    """The day files' store did not answer, or is full: a network failure, a timeout, a
    throttled or failing object store, no space left on the disk.

    Transient, as a database that is unreachable or full is: the store comes back, space
    is freed, and the write of a run replaces each file whole, so a retry is safe.
    """

    retryable = True


def retryable(exc: BaseException) -> bool:
    """Whether running again unchanged may succeed: the one rule of retries for whatever a
    step raises.

    A :class:`PipelineError` says so itself. Anything else is transient only when it is a
    database's or a connection's failure that may pass (the driver's code says
    unreachable, busy or full: :func:`.failures.classify`; a connection lost or timed
    out), or says it stands for a lost process (``transient``: a crash point's
    simulated crash). Everything else is a bug, which fails the same way however often
    it runs: terminal, with its traceback.
    """
    if isinstance(exc, PipelineError):
        return exc.retryable
    if getattr(exc, "transient", False) is True:
        return True
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    return classify(exc) in (UNREACHABLE, BUSY, FULL)
