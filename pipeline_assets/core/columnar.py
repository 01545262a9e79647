"""The row rules applied to a whole Arrow batch at once, for any declared table.

A scanned batch (a :class:`~.spec.TableSpec`'s declared columns, as the source holds
them) becomes that table's NORMAL table (:func:`normal_schema`): each declared column as
the warehouse stores it (:meth:`.types.ColumnType.stored`: exact decimal text, canonical
UTC timestamps, ``YYYY-MM-DD`` dates), plus the row's ``instant`` (its cursor as an
instant) and ``day`` (the cursor's day in the pipeline's zone). :data:`NORMAL` is
``orders``' schema.

Each column takes a vectorized fast path (``pyarrow.compute``) for its common forms:
integer keys, text, plain decimal text (``40.00``, ``-5.5``, ``0``; a ``decimal(P,S)``
padded to S places), ``0``/``1``/``t``/``f``/``true``/``false`` and native booleans,
plain floats, ``YYYY-MM-DD`` and native dates, ISO-8601 timestamps with or without
``Z``/``±HH:MM`` and native timestamp columns. Every row the fast path does not vouch for
(a ``+`` sign, ``1e3``, a comma, a DST-gap wall clock, a NULL in a required column ...)
goes through the exact parser, one row at a time: :meth:`.types.ColumnType.parse` for
each column, or, for ``orders``, :func:`.rows.validate` as ever. Same result, same error
naming the table, the column, the row's key and the value. The fast path only ever
accepts what the exact parser accepts and produces the same stored value, day and
instant; the tests compare both on every form, for ``orders`` and for a table of every
type.

``orders`` keeps the rules it had before tables were declared (:func:`orders_rules`):
its messages name ``order 105``, and its ``status`` may not be blank ("the status is
missing"), where a declared text column takes any text, blank included, as it is.
"""

from __future__ import annotations

import decimal
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.compute as pc

from .rows import InvalidRowError, validate
from .spec import ORDERS, TableSpec
from .times import EPOCH, UTC, day_of, day_start
from .types import _FALSE, _TRUE, PLAIN_DECIMAL_TEXT, ColumnType, TypeValueError

INSTANT = pa.timestamp("us", tz="UTC")
# The Arrow type of each column type's stored form (ColumnType.stored).
ARROW_TYPES = {
    "integer": pa.int64(),
    "text": pa.string(),
    "decimal": pa.string(),  # exact decimal text, as format_decimal writes it
    "float": pa.float64(),
    "boolean": pa.bool_(),
    "date": pa.string(),  # YYYY-MM-DD
    "timestamp": pa.string(),  # canonical UTC text
}


def normal_schema(spec: TableSpec = ORDERS) -> pa.Schema:
    """The NORMAL table of ``spec``: its declared columns in their stored form, in declared
    order, then ``instant`` (the cursor as an instant; a ``date`` cursor is midnight of
    its day in the pipeline's zone) and ``day`` (the cursor's day in that zone, as days
    since 1970-01-01). Every field is nullable (a nullable column's NULL stays NULL)."""
    return pa.schema([(c.name, ARROW_TYPES[c.type.kind]) for c in spec.columns]
                     + [("instant", INSTANT), ("day", pa.int32())])


NORMAL = normal_schema(ORDERS)  # order_id, status, amount, updated_at, instant, day
STORED = ORDERS.column_names  # the warehouse row of orders, in order

_KEY = r"^-?[0-9]+$"
# Plain positional decimals that format_decimal(parse_decimal(x)) writes back unchanged.
_AMOUNT = f"^{PLAIN_DECIMAL_TEXT}$"
_FLOAT = r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]{1,3})?$"
_DATE = r"[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_TIME = r"[T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
_BARE_DATE = f"^{_DATE}$"
_NAIVE = f"^{_DATE}{_TIME}$"
_AWARE = f"^{_DATE}{_TIME}(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
_EARLIEST = pa.scalar(datetime(1000, 1, 1, tzinfo=timezone.utc), INSTANT)
_FIRST_DAY = pa.scalar(-354285, pa.date32())  # 1000-01-01: four-digit years only
_LAST_DAY = pa.scalar(2932896, pa.date32())  # 9999-12-31
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


def orders_rules(spec: TableSpec) -> bool:
    """Whether ``spec`` is the chapter's ``orders`` table (its name, key, cursor and
    columns as :data:`.spec.ORDERS` declares them): its rows keep the rules and messages
    of :func:`.rows.validate` (``order 105: …``; a blank ``status`` is "missing"), which
    its warehouse, day files and tests were built on. Any other declaration takes the
    rules of its column types alone."""
    return spec is ORDERS or (
        spec.name == ORDERS.name and spec.primary_key == ORDERS.primary_key
        and spec.cursor == ORDERS.cursor and spec.columns == ORDERS.columns)


def normalize(raw: pa.RecordBatch | pa.Table, tz: tzinfo, spec: TableSpec = ORDERS
              ) -> pa.Table:
    """Validate and normalize every row of ``raw`` (``spec``'s declared columns, as the
    source scan returns them) into :func:`normal_schema`; raises :class:`InvalidRowError`
    naming the first invalid row.

    Rows keep their order within each of the two paths; callers sort afterwards.
    """
    schema = NORMAL if spec is ORDERS else normal_schema(spec)
    n = raw.num_rows
    zone = zone_name(tz)
    if n == 0:
        return schema.empty_table()
    try:
        fast = _fast(raw, zone, spec, schema) if zone is not None else None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        fast = None  # something the kernels refuse: let the exact parser name it
    if fast is None:
        return _exact(raw, tz, spec, schema)
    table, ok = fast
    if pc.all(ok).as_py():
        return table
    good = table.filter(ok)
    rest = _exact(raw.filter(pc.invert(ok)), tz, spec, schema)
    return pa.concat_tables([good, rest])


def _fast(raw, zone: str, spec: TableSpec, schema: pa.Schema) -> tuple[pa.Table, pa.Array]:
    """(the NORMAL table, ok): ``ok`` marks the rows the fast path vouches for; the
    values of the other rows are meaningless (the exact parser reads those rows)."""
    legacy = orders_rules(spec)
    out, ok, cursor = {}, None, None
    for column in spec.columns:
        values = raw.column(column.name)
        if pa.types.is_null(values.type):  # a reader's type for a batch of NULLs only
            values = pc.cast(values, pa.string())
        kind = column.type.kind
        if kind == "timestamp":
            instant, good = _fast_timestamp(values, zone)
            stored, extra = canonical_text(instant), instant
        elif kind == "date":
            stored, good, extra = _fast_date(values)
        elif kind == "text" and legacy and column.name == "status":
            # orders' own rule: a blank status is missing (rows.validate)
            stored, extra = _text(values, "status"), None
            good = pc.fill_null(pc.not_equal(pc.utf8_trim_whitespace(stored), ""), False)
        else:
            stored, good = _FAST[kind](values, column.type)
            extra = None
        if column.nullable and values.null_count:
            present = pc.is_valid(values)
            good = pc.or_(good, pc.invert(present))
            stored = pc.if_else(present, stored, pa.scalar(None, stored.type))
        if column.name == spec.cursor:
            cursor = extra
        out[column.name] = stored
        ok = good if ok is None else pc.and_(ok, good)
    if spec.column(spec.cursor).type.kind == "timestamp":
        out["instant"] = cursor
        out["day"] = _day_numbers(cursor, zone)  # rows outside the zone rules are not ok
    else:  # a date: the day itself, and its midnight in the zone
        instant, good = _localize(pc.cast(cursor, pa.timestamp("us")), zone)
        instant, good = _in_range(instant, good, zone)
        ok = pc.and_(ok, good)
        out["instant"] = instant
        out["day"] = pc.cast(cursor, pa.int32())
    return pa.table(out, schema=schema), ok


def _text(values, what: str):
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise pa.ArrowTypeError(f"{what} of type {values.type}")
    return pc.cast(values, pa.string())


def _fast_integer(values, kind: ColumnType) -> tuple[pa.Array, pa.Array]:
    return _keys(values)


def _fast_text(values, kind: ColumnType) -> tuple[pa.Array, pa.Array]:
    """Text is taken as it is: not trimmed, blank allowed (ColumnType text)."""
    text = _text(values, "text")
    return text, pc.is_valid(text)


def _fast_decimal(values, kind: ColumnType) -> tuple[pa.Array, pa.Array]:
    """Plain decimal text as it is; a ``decimal(P,S)`` within its precision, padded to S
    places (``1.1`` → ``1.10``) as ``format_decimal(quantize(...))`` writes it."""
    text = pc.utf8_trim_whitespace(_text(values, "decimal"))
    if kind.precision is None:
        return text, pc.fill_null(pc.match_substring_regex(text, _AMOUNT), False)
    scale = kind.scale
    # the exact parser quantizes in Decimal's context, which holds `prec` digits in all
    room = min(kind.precision - scale, decimal.getcontext().prec - scale)
    if scale >= decimal.getcontext().prec:
        return text, pa.array([False] * len(text), pa.bool_())
    whole = f"(0|[1-9][0-9]{{0,{room - 1}}})" if room >= 1 else "0"
    places = fr"(\.[0-9]{{1,{scale}}})?" if scale else ""
    ok = pc.fill_null(pc.match_substring_regex(text, f"^-?{whole}{places}$"), False)
    if not scale:
        return text, ok
    dot = pc.find_substring(text, ".")
    places_now = pc.if_else(pc.less(dot, 0), -1,
                            pc.subtract(pc.subtract(pc.binary_length(text), dot), 1))
    missing = pc.if_else(ok, pc.subtract(scale, places_now), 0)  # scale + 1: no point yet
    pads = pa.array(["0" * i for i in range(scale + 1)] + ["." + "0" * scale], pa.string())
    return pc.binary_join_element_wise(text, pc.take(pads, missing), ""), ok


def _fast_float(values, kind: ColumnType) -> tuple[pa.Array, pa.Array]:
    if pa.types.is_floating(values.type) or pa.types.is_integer(values.type):
        number = pc.cast(values, pa.float64())
    else:
        text = pc.utf8_trim_whitespace(_text(values, "float"))
        plain = pc.fill_null(pc.match_substring_regex(text, _FLOAT), False)
        number = pc.cast(pc.if_else(plain, text, "0"), pa.float64())
        number = pc.if_else(plain, number, pa.scalar(None, pa.float64()))
    return number, pc.fill_null(pc.is_finite(number), False)


def _fast_boolean(values, kind: ColumnType) -> tuple[pa.Array, pa.Array]:
    if pa.types.is_boolean(values.type):
        return values, pc.is_valid(values)
    if pa.types.is_integer(values.type):
        ok = pc.fill_null(pc.is_in(values, value_set=pa.array([0, 1], values.type)), False)
        return pc.not_equal(values, 0), ok
    word = pc.utf8_lower(pc.utf8_trim_whitespace(_text(values, "boolean")))
    true = pc.fill_null(pc.is_in(word, value_set=pa.array(sorted(_TRUE))), False)
    false = pc.fill_null(pc.is_in(word, value_set=pa.array(sorted(_FALSE))), False)
    return true, pc.or_(true, false)


_FAST = {"integer": _fast_integer, "text": _fast_text, "decimal": _fast_decimal,
         "float": _fast_float, "boolean": _fast_boolean}


def _fast_date(values) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(``YYYY-MM-DD`` text, ok, date32) for a date column, native or text."""
    if pa.types.is_date(values.type):
        day = pc.cast(values, pa.date32())
        ok = pc.fill_null(pc.and_(pc.greater_equal(day, _FIRST_DAY),
                                  pc.less_equal(day, _LAST_DAY)), False)
        day = pc.if_else(ok, day, _FIRST_DAY)
        return pc.cast(day, pa.string()), ok, day
    text = pc.utf8_trim_whitespace(_text(values, "date"))
    ok = pc.fill_null(pc.match_substring_regex(text, _BARE_DATE), False)
    # strptime rolls 2026-02-30 over to March: only a day that prints back as it was read
    # is one the calendar holds
    moment = pc.strptime(pc.if_else(ok, text, "2000-01-01"), format="%Y-%m-%d", unit="s",
                         error_is_null=True)
    day = pc.cast(pc.fill_null(moment, pa.scalar(0, pa.timestamp("s"))), pa.date32())
    ok = pc.and_(ok, pc.fill_null(pc.equal(pc.cast(day, pa.string()), text), False))
    return text, ok, day


def _fast_timestamp(values, zone: str) -> tuple[pa.Array, pa.Array]:
    """(instant, ok) for a timestamp column of any type the readers produce."""
    instant, ok = _instants(values, zone)
    return _in_range(instant, ok, zone)


def _in_range(instant, ok, zone: str) -> tuple[pa.Array, pa.Array]:
    """Instants the text casts write back as they read them (four-digit years), and, in a
    zone other than UTC, where Arrow's zone rules are Python's."""
    instant = pc.if_else(ok, instant, _EARLIEST)  # rows not ok are dropped; keep kernels quiet
    ok = pc.and_(ok, pc.greater_equal(instant, _EARLIEST))  # %Y pads to 4 digits only
    if zone != "UTC":
        ok = pc.and_(ok, _zone_rules_hold(instant))
    return instant, ok


def _keys(ids) -> tuple[pa.Array, pa.Array]:
    """(int64 keys, ok) for an integer column (``order_id``) of integers or integer text."""
    if pa.types.is_integer(ids.type):
        return pc.cast(pc.fill_null(ids, 0), pa.int64()), pc.is_valid(ids)
    if pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type):
        text = pc.utf8_trim_whitespace(ids)
        ok = pc.fill_null(pc.match_substring_regex(text, _KEY), False)
        return pc.cast(pc.if_else(ok, text, "0"), pa.int64()), ok
    raise pa.ArrowTypeError(f"an integer column of type {ids.type}")


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


def _exact(raw, tz: tzinfo, spec: TableSpec, schema: pa.Schema) -> pa.Table:
    """The exact parser, row by row: the same rules and messages as the row path had."""
    if orders_rules(spec):
        return _exact_orders(raw, tz)
    names = spec.column_names
    out = {name: [] for name in schema.names}
    cursor = spec.column(spec.cursor).type
    for values in zip(*(raw.column(name).to_pylist() for name in names), strict=True):
        row = parse_row(dict(zip(names, values, strict=True)), tz, spec)
        for name in names:
            out[name].append(spec.column(name).type.stored(row[name]))
        moment = row[spec.cursor]
        if cursor.kind == "date":
            out["instant"].append(day_start(moment, tz).astimezone(UTC))
            out["day"].append((moment - EPOCH).days)
        else:
            out["instant"].append(moment)
            out["day"].append((day_of(moment, tz) - EPOCH).days)
    return pa.table(out, schema=schema)


def _exact_orders(raw, tz: tzinfo) -> pa.Table:
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


def parse_row(values: dict, tz: tzinfo, spec: TableSpec) -> dict:
    """One source row (column name → value as the source holds it) read by the rules of
    ``spec``'s column types (:meth:`.types.ColumnType.parse`): column name → parsed value
    (None for a nullable column's NULL). The key columns are read first, so an error
    names the row by its key; then the others in declared order.

    Raises :class:`InvalidRowError` naming the table, the row's key (each column as
    stored; as the source holds it where it cannot be read), the column, the value and
    why.
    """
    key = {name: values[name] for name in spec.primary_key}
    out, failures = {}, []
    for name in spec.primary_key:
        try:
            out[name] = _parse(spec, name, values[name], tz)
        except TypeValueError as exc:
            failures.append((name, exc.reason))
            continue
        key[name] = spec.column(name).type.stored(out[name])
    if failures:
        name, reason = failures[0]
        raise InvalidRowError(key, name, values[name], reason, table=spec.name)
    for name in spec.column_names:
        if name not in out:
            try:
                out[name] = _parse(spec, name, values[name], tz)
            except TypeValueError as exc:
                raise InvalidRowError(key, name, values[name], exc.reason,
                                      table=spec.name) from None
    return out


def _parse(spec: TableSpec, name: str, value, tz: tzinfo):
    column = spec.column(name)
    if value is None:
        if column.nullable:
            return None
        raise TypeValueError("every row needs its key" if name in spec.primary_key
                             else "the value is missing and the column is not nullable")
    try:
        return column.type.parse(value, tz)
    except TypeValueError as exc:
        # the type names the value first; the row's message names it once, before
        raise TypeValueError(exc.reason.removeprefix(f"{value!r} ")) from None


def within(table: pa.Table, start: datetime | None, end: datetime | None) -> pa.Table:
    """Only the rows with ``start <= instant < end`` (either side open)."""
    mask = None
    if start is not None:
        mask = pc.greater_equal(table["instant"], pa.scalar(start.astimezone(UTC), INSTANT))
    if end is not None:
        upper = pc.less(table["instant"], pa.scalar(end.astimezone(UTC), INSTANT))
        mask = upper if mask is None else pc.and_(mask, upper)
    return table if mask is None else table.filter(mask)


def newest_per_key(table: pa.Table, spec: TableSpec = ORDERS) -> tuple[pa.Table, int]:
    """One row per primary key: the newest ``instant`` wins; returns (rows, copies dropped).

    Two copies with the same instant and different values cannot be ordered: the batch
    is refused, naming the key. Identical copies are one row. The result is sorted by
    the key's columns, in declared order (NORMAL values: integers by value, text by code
    point, dates and timestamps as their stored text, which sorts as they compare).
    """
    keys = spec.primary_key
    table = table.sort_by([(name, "ascending") for name in keys] + [("instant", "ascending")])
    n = table.num_rows
    if n < 2:
        return table, 0
    table = table.combine_chunks()

    def pairs(name):
        column = table[name].chunk(0)
        return column.slice(0, n - 1), column.slice(1)

    same_next = None
    for name in keys:
        same = pc.equal(*pairs(name))
        same_next = same if same_next is None else pc.and_(same_next, same)
    if not pc.any(same_next).as_py():
        return table, 0
    tied = pc.and_(same_next, pc.equal(*pairs("instant")))
    compared = [c for c in spec.columns if c.name not in keys and c.name != spec.cursor]
    differ = None
    for column in compared:
        before, after = pairs(column.name)
        apart = pc.not_equal(before, after)
        if column.nullable:  # NULL and NULL are the same; NULL and a value are not
            apart = pc.coalesce(apart, pc.xor(pc.is_null(before), pc.is_null(after)))
        differ = apart if differ is None else pc.or_(differ, apart)
    clash = tied if differ is None else pc.and_(tied, differ)
    if pc.any(clash).as_py():
        at = pc.index(clash, True).as_py()
        row = table.slice(at, 2).to_pylist()
        raise _tie(spec, row[0], row[1], compared)
    keep = pc.invert(pa.concat_arrays([same_next, pa.array([False])]))
    kept = table.filter(keep)
    return kept, n - kept.num_rows


def newest_per_order(table: pa.Table) -> tuple[pa.Table, int]:
    """:func:`newest_per_key` of ``orders``: one row per ``order_id``."""
    return newest_per_key(table, ORDERS)


def _tie(spec: TableSpec, first: dict, second: dict, compared) -> InvalidRowError:
    if orders_rules(spec):
        return InvalidRowError(
            first["order_id"], "updated_at", first["updated_at"],
            "the source holds two rows of this order with this updated_at and different "
            f"values ({first['status']} {first['amount']} and {second['status']} "
            f"{second['amount']}), so neither can win; keep one")
    apart = ", ".join(f"{c.name} {first[c.name]!r} and {second[c.name]!r}"
                      for c in compared if first[c.name] != second[c.name])
    return InvalidRowError(
        {name: first[name] for name in spec.primary_key}, spec.cursor, first[spec.cursor],
        f"the source holds two rows with this key and this {spec.cursor} and different "
        f"values ({apart}), so neither can win; keep one", table=spec.name)


def days_of(updated_at: list[str], tz: tzinfo) -> set[str]:
    """The days (in ``tz``) of canonical UTC texts, as the warehouse stores them."""
    if not updated_at:
        return set()
    instants = pc.cast(pa.array(updated_at, pa.string()), INSTANT)
    return {day_text(n) for n in pc.unique(day_numbers(instants, tz)).to_pylist()}
