"""The rules of :mod:`.rows` applied to a whole Arrow batch at once.

A scanned batch (``order_id``, ``status``, ``amount``, ``updated_at`` as the source holds
them) becomes a :data:`NORMAL` table: the row as the warehouse stores it (exact amount
text, canonical UTC timestamp), its instant and its day in the pipeline's zone.

The common forms take a vectorized fast path (``pyarrow.compute``): integer keys, plain
decimal amounts (``40.00``, ``-5.5``, ``0``), ISO-8601 dates and timestamps with or
without ``Z``/``±HH:MM``, native date and timestamp columns. Every row the fast path does
not vouch for (a ``+`` sign, ``1e3``, a comma, a DST-gap wall clock, a missing value ...)
goes through :func:`.rows.validate`, the exact parser, one row at a time: same result,
same error naming the order, the column and the value. The fast path only ever accepts
what the exact parser accepts and produces the same text, day and instant; the tests
compare both on every form.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.compute as pc

from .rows import InvalidRowError, validate
from .times import EPOCH, UTC, day_of

INSTANT = pa.timestamp("us", tz="UTC")
NORMAL = pa.schema([
    ("order_id", pa.int64()),
    ("status", pa.string()),
    ("amount", pa.string()),  # exact decimal text, as format_amount writes it
    ("updated_at", pa.string()),  # canonical UTC text
    ("instant", INSTANT),
    ("day", pa.int32()),  # the day in the pipeline's zone, as days since 1970-01-01
])
STORED = ("order_id", "status", "amount", "updated_at")  # the warehouse row, in order

_KEY = r"^-?[0-9]+$"
# Plain positional decimals that format_amount(parse_amount(x)) writes back unchanged.
_AMOUNT = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?$"
_DATE = r"[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_TIME = r"[T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
_BARE_DATE = f"^{_DATE}$"
_NAIVE = f"^{_DATE}{_TIME}$"
_AWARE = f"^{_DATE}{_TIME}(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
_EARLIEST = pa.scalar(datetime(1000, 1, 1, tzinfo=timezone.utc), INSTANT)
# Arrow's zone rules agree with Python's zoneinfo between these instants (past 2037 it
# stops applying daylight saving time, where zoneinfo extends the rule); outside them a
# zone other than UTC is left to the exact parser.
_ZONE_RULES_FROM = datetime(1970, 1, 2, tzinfo=timezone.utc)
_ZONE_RULES_UNTIL = datetime(2037, 1, 1, tzinfo=timezone.utc)


def zone_name(tz: tzinfo) -> str | None:
    """The IANA name Arrow needs for ``tz``; None for a zone Arrow cannot be given."""
    if tz is timezone.utc:
        return "UTC"
    if isinstance(tz, ZoneInfo) and tz.key:
        return tz.key
    return None


def normalize(raw: pa.RecordBatch | pa.Table, tz: tzinfo) -> pa.Table:
    """Validate and normalize every row of ``raw``; raises :class:`InvalidRowError`.

    Rows keep their order within each of the two paths; callers sort afterwards.
    """
    n = raw.num_rows
    zone = zone_name(tz)
    if n == 0:
        return NORMAL.empty_table()
    try:
        fast = _fast(raw, zone) if zone is not None else None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        fast = None  # something the kernels refuse: let the exact parser name it
    if fast is None:
        return _exact(raw, tz)
    table, ok = fast
    if pc.all(ok).as_py():
        return table
    good = table.filter(ok)
    rest = _exact(raw.filter(pc.invert(ok)), tz)
    return pa.concat_tables([good, rest])


def _fast(raw, zone: str) -> tuple[pa.Table, pa.Array]:
    ids, ok = _keys(raw.column("order_id"))

    status = raw.column("status")
    if not (pa.types.is_string(status.type) or pa.types.is_large_string(status.type)):
        raise pa.ArrowTypeError("status is not text")
    status = pc.cast(status, pa.string())
    ok = pc.and_(ok, pc.fill_null(pc.not_equal(pc.utf8_trim_whitespace(status), ""), False))

    amount = raw.column("amount")
    if not (pa.types.is_string(amount.type) or pa.types.is_large_string(amount.type)):
        raise pa.ArrowTypeError("amount is not text")
    amount = pc.utf8_trim_whitespace(pc.cast(amount, pa.string()))
    ok = pc.and_(ok, pc.fill_null(pc.match_substring_regex(amount, _AMOUNT), False))

    instant, ok_time = _instants(raw.column("updated_at"), zone)
    ok = pc.and_(ok, ok_time)
    instant = pc.if_else(ok, instant, _EARLIEST)  # rows not ok are dropped; keep kernels quiet
    ok = pc.and_(ok, pc.greater_equal(instant, _EARLIEST))  # %Y pads to 4 digits only
    if zone != "UTC":
        ok = pc.and_(ok, _zone_rules_hold(instant))
    table = pa.table({
        "order_id": ids,
        "status": pc.fill_null(status, ""),
        "amount": pc.fill_null(amount, ""),
        "updated_at": canonical_text(instant),
        "instant": instant,
        "day": _day_numbers(instant, zone),  # rows outside the zone rules are not ok
    }, schema=NORMAL)
    return table, ok


def _keys(ids) -> tuple[pa.Array, pa.Array]:
    """(int64 keys, ok) for an ``order_id`` column of integers or of integer text."""
    if pa.types.is_integer(ids.type):
        return pc.cast(pc.fill_null(ids, 0), pa.int64()), pc.is_valid(ids)
    if pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type):
        text = pc.utf8_trim_whitespace(ids)
        ok = pc.fill_null(pc.match_substring_regex(text, _KEY), False)
        return pc.cast(pc.if_else(ok, text, "0"), pa.int64()), ok
    raise pa.ArrowTypeError(f"order_id of type {ids.type}")


def keys_of(ids) -> pa.Array:
    """The integer keys of an ``order_id`` column; null where a value is no integer key
    (such a row is refused by validation, so it can never be an order the warehouse holds).
    """
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    try:
        keys, ok = _keys(ids)
    except pa.ArrowInvalid:  # an integer text too large for 64 bits: no key either
        return pa.array([_key_or_none(v) for v in ids.to_pylist()], pa.int64())
    return pc.if_else(ok, keys, pa.scalar(None, pa.int64()))


def _key_or_none(value) -> int | None:
    try:
        key = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return key if -(2**63) <= key < 2**63 else None


def _instants(column, zone: str) -> tuple[pa.Array, pa.Array]:
    """(instant, ok) for an ``updated_at`` column of any type the readers produce."""
    kind = column.type
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        ok = pc.is_valid(column)
        return pc.cast(pc.cast(column, pa.timestamp("us", tz=kind.tz)), INSTANT), ok
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        naive = pc.cast(column, pa.timestamp("us"))
        instant, ok = _localize(naive, zone)
        return instant, pc.and_(ok, pc.is_valid(column))
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise pa.ArrowTypeError(f"updated_at of type {kind}")
    uniform = _uniform_text(pc.cast(column, pa.string()), zone)
    if uniform is not None:
        return uniform
    text = pc.utf8_trim_whitespace(pc.cast(column, pa.string()))
    aware = pc.fill_null(pc.match_substring_regex(text, _AWARE), False)
    naive_ok = pc.fill_null(pc.or_(pc.match_substring_regex(text, _NAIVE),
                                   pc.match_substring_regex(text, _BARE_DATE)), False)
    # Arrow's ISO-8601 cast checks the calendar (2026-02-30 fails): then the whole batch
    # goes to the exact parser, which names the row.
    from_aware = pc.cast(pc.if_else(aware, text, "2000-01-01T00:00:00Z"), INSTANT)
    local, ok_local = _localize(
        pc.cast(pc.if_else(naive_ok, text, "2000-01-01"), pa.timestamp("us")), zone)
    instant = pc.if_else(aware, from_aware, local)
    return instant, pc.or_(aware, pc.and_(naive_ok, ok_local))


def canonical_text(instant: pa.Array) -> pa.Array:
    """:func:`.times.canonical` of every instant: ``2026-01-25T03:00:00.000000+00:00``.

    Built from Arrow's date and time-of-day casts (``strftime`` is ~50x slower).
    """
    wall = pc.cast(instant, pa.timestamp("us"))  # the UTC wall clock
    day = pc.cast(pc.cast(wall, pa.date32()), pa.string())
    clock = pc.cast(pc.cast(wall, pa.time64("us")), pa.string())  # HH:MM:SS.ffffff
    return pc.binary_join_element_wise(pc.binary_join_element_wise(day, clock, "T"),
                                       "+00:00", "")


def local_text(instant: pa.Array, tz: tzinfo) -> pa.Array:
    """``moment.astimezone(tz).isoformat()`` of every instant, as Python writes it:
    ``2026-01-25T04:00:00+01:00``, the microseconds only when they are not zero. The form
    a day file shows ``updated_at`` in (:func:`.paid.paid_orders_by_day`); Arrow's zone
    rules where they agree with Python's, ``isoformat`` itself for the rest."""
    zone = zone_name(tz)
    if isinstance(instant, pa.ChunkedArray):
        instant = instant.combine_chunks()
    hold = pc.fill_null(_zone_rules_hold(instant), True) if zone not in (None, "UTC") \
        else None
    if zone is None or (hold is not None and not pc.any(hold).as_py()):
        return pa.array([None if moment is None else moment.astimezone(tz).isoformat()
                         for moment in instant.to_pylist()], pa.string())
    if zone == "UTC":
        wall, offset = pc.cast(instant, pa.timestamp("us")), pa.scalar("+00:00")
    else:
        safe = pc.if_else(hold, instant, pa.scalar(_ZONE_RULES_FROM, INSTANT))
        wall = pc.local_timestamp(pc.cast(safe, pa.timestamp("us", tz=zone)))
        shift = pc.subtract(pc.cast(pc.cast(wall, pa.timestamp("us", tz="UTC")), pa.int64()),
                            pc.cast(safe, pa.int64()))  # the zone's offset, in µs
        shifts = pc.unique(shift).to_pylist()
        names = pa.array([_offset_text(us) for us in shifts], pa.string())
        offset = pc.take(names, pc.index_in(shift, value_set=pa.array(shifts, pa.int64())))
    day = pc.cast(pc.cast(wall, pa.date32()), pa.string())
    clock = pc.replace_substring_regex(pc.cast(pc.cast(wall, pa.time64("us")), pa.string()),
                                       r"\.000000$", "")
    text = pc.binary_join_element_wise(day, "T", clock, offset, "")
    if hold is None or pc.all(hold).as_py():
        return text
    exact = pa.array([moment.astimezone(tz).isoformat()
                      for moment in instant.filter(pc.invert(hold)).to_pylist()], pa.string())
    return pc.replace_with_mask(text, pc.invert(hold), exact)


def _offset_text(microseconds: int) -> str:
    """A UTC offset as ``isoformat`` ends with it: ``+01:00``, ``-03:30``."""
    zone = timezone(timedelta(microseconds=microseconds))
    return datetime(2000, 1, 1, tzinfo=zone).isoformat()[19:]


def day_numbers(instant: pa.Array, tz: tzinfo) -> pa.Array:
    """The day of every instant in ``tz``, as days since 1970-01-01 (int32): the rule of
    :func:`.times.day_of`, for a whole array. Arrow's zone rules do the work where they
    agree with Python's; the instants outside them take ``day_of`` itself."""
    zone = zone_name(tz)
    if isinstance(instant, pa.ChunkedArray):
        instant = instant.combine_chunks()
    if zone is None:
        return pa.array([None if moment is None else (day_of(moment, tz) - EPOCH).days
                         for moment in instant.to_pylist()], pa.int32())
    if zone == "UTC":
        return _day_numbers(instant, zone)
    hold = pc.fill_null(_zone_rules_hold(instant), True)
    if pc.all(hold).as_py():
        return _day_numbers(instant, zone)
    exact = pa.array([(day_of(moment, tz) - EPOCH).days
                      for moment in instant.filter(pc.invert(hold)).to_pylist()], pa.int32())
    fast = _day_numbers(pc.if_else(hold, instant, pa.scalar(_ZONE_RULES_FROM, INSTANT)), zone)
    return pc.replace_with_mask(fast, pc.invert(hold), exact)


def _day_numbers(instant: pa.Array, zone: str) -> pa.Array:
    if zone == "UTC":
        wall = pc.cast(instant, pa.timestamp("us"))
    else:
        wall = pc.local_timestamp(pc.cast(instant, pa.timestamp("us", tz=zone)))
    return pc.cast(pc.cast(wall, pa.date32()), pa.int32())


def day_text(number: int) -> str:
    return (EPOCH + timedelta(days=number)).isoformat()


def _zone_rules_hold(instant) -> pa.Array:
    return pc.and_(pc.greater_equal(instant, pa.scalar(_ZONE_RULES_FROM, INSTANT)),
                   pc.less(instant, pa.scalar(_ZONE_RULES_UNTIL, INSTANT)))


def _uniform_text(text: pa.Array, zone: str) -> tuple[pa.Array, pa.Array] | None:
    """The common case without classifying row by row: every value has an offset, or
    none has; one ISO-8601 cast reads them all. None when that does not hold.

    Of the texts Arrow's cast reads, only the hour-only forms (``2026-01-25T03``,
    ``…T03Z``) are refused by the exact parser, which needs ``HH:MM``: a batch with a
    timestamp lacking ``:`` after its hour is not uniform.
    """
    if text.null_count or len(text) == 0:
        return None
    raw = text.cast(pa.binary())
    lengths = pc.binary_length(raw)
    clock = pc.equal(pc.binary_slice(raw, 13, 14), b":")
    if not pc.all(pc.or_(pc.equal(lengths, 10), clock)).as_py():
        return None
    try:
        return pc.cast(text, INSTANT), pc.is_valid(text)
    except pa.ArrowInvalid:
        pass
    try:
        return _localize(pc.cast(text, pa.timestamp("us")), zone)
    except pa.ArrowInvalid:
        return None


def _localize(naive: pa.Array, zone: str) -> tuple[pa.Array, pa.Array]:
    """Wall clocks in ``zone`` → instants, as ``datetime.replace(tzinfo=zone)`` reads them.

    A repeated wall clock (DST ends) is its first occurrence, as Python's ``fold=0``; a
    wall clock that does not exist (DST starts) is not vouched for (the exact parser
    reads it), which the round trip back to local time detects.
    """
    if zone == "UTC":
        return pc.cast(pc.cast(naive, pa.timestamp("us", tz="UTC")), INSTANT), \
            pc.is_valid(naive)
    local = pc.assume_timezone(naive, timezone=zone, ambiguous="earliest",
                               nonexistent="earliest")
    back = pc.local_timestamp(local)
    return pc.cast(local, INSTANT), pc.fill_null(pc.equal(back, naive), False)


def _exact(raw, tz: tzinfo) -> pa.Table:
    """The exact parser, row by row: the same rules and messages as the row path had."""
    cols = {name: raw.column(name).to_pylist() for name in STORED}
    out = {name: [] for name in NORMAL.names}
    for order_id, status, amount, updated_at in zip(
            cols["order_id"], cols["status"], cols["amount"], cols["updated_at"], strict=True):
        order = validate(order_id, status, amount, updated_at, tz)
        for name, value in zip(STORED, order.stored, strict=True):
            out[name].append(value)
        out["instant"].append(order.updated_at)
        out["day"].append((day_of(order.updated_at, tz) - EPOCH).days)
    return pa.table(out, schema=NORMAL)


def within(table: pa.Table, start: datetime | None, end: datetime | None) -> pa.Table:
    """Only the rows with ``start <= instant < end`` (either side open)."""
    mask = None
    if start is not None:
        mask = pc.greater_equal(table["instant"], pa.scalar(start.astimezone(UTC), INSTANT))
    if end is not None:
        upper = pc.less(table["instant"], pa.scalar(end.astimezone(UTC), INSTANT))
        mask = upper if mask is None else pc.and_(mask, upper)
    return table if mask is None else table.filter(mask)


def newest_per_order(table: pa.Table) -> tuple[pa.Table, int]:
    """One row per order: the newest ``updated_at`` wins; returns (rows, copies dropped).

    Two copies with the same instant and different values cannot be ordered: the batch
    is refused, naming the order. Identical copies are one row. The result is sorted by
    ``order_id``.
    """
    table = table.sort_by([("order_id", "ascending"), ("instant", "ascending")])
    n = table.num_rows
    if n < 2:
        return table, 0
    table = table.combine_chunks()
    ids = table["order_id"].chunk(0)
    same_next = pc.equal(ids.slice(0, n - 1), ids.slice(1))
    if not pc.any(same_next).as_py():
        return table, 0
    def pairs(name):
        column = table[name].chunk(0)
        return column.slice(0, n - 1), column.slice(1)

    tied = pc.and_(same_next, pc.equal(*pairs("instant")))
    differ = pc.or_(pc.not_equal(*pairs("status")), pc.not_equal(*pairs("amount")))
    clash = pc.and_(tied, differ)
    if pc.any(clash).as_py():
        at = pc.index(clash, True).as_py()
        row = table.slice(at, 2).to_pylist()
        raise InvalidRowError(
            row[0]["order_id"], "updated_at", row[0]["updated_at"],
            "the source holds two rows of this order with this updated_at and different "
            f"values ({row[0]['status']} {row[0]['amount']} and {row[1]['status']} "
            f"{row[1]['amount']}), so neither can win; keep one")
    keep = pc.invert(pa.concat_arrays([same_next, pa.array([False])]))
    kept = table.filter(keep)
    return kept, n - kept.num_rows


def days_of(updated_at: list[str], tz: tzinfo) -> set[str]:
    """The days (in ``tz``) of canonical UTC texts, as the warehouse stores them."""
    if not updated_at:
        return set()
    instants = pc.cast(pa.array(updated_at, pa.string()), INSTANT)
    return {day_text(n) for n in pc.unique(day_numbers(instants, tz)).to_pylist()}
