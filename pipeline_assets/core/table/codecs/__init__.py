"""One codec per column kind: the one place that says, for its kind, how a source value
is read and checked (one value or a whole Arrow column, and the source's SQL for it), how
the warehouse stores it (its SQL, stage and Arrow types), how it is read back, how a day
file writes and sorts it, how it is totalled, hashed and compared, and which stored kind
may become which. What is asked of a kind (a day? an instant? an integer key? any text?)
is an attribute of its codec.

:class:`~..types.ColumnType` (a declared type: its kind, and a ``decimal(P,S)``'s
precision and scale) asks :data:`CODECS` for its kind's codec; every method takes that
type first (``t``), for the precision and scale. A new kind is a new codec; a new thing
done with every value (a file format, a cursor kind) is a new method here, not a switch
over kinds in the modules that use it.

The rules that matter: exact numbers are never binary floats (``decimal`` keeps the
source's spelling, ``"7.000"``, as ``orders.amount`` always has; ``decimal(P,S)`` is
checked against its precision and scale and written with ``S`` places; a float reaching
a decimal column has lost exactness and is refused). ``float`` is finite. ``timestamp`` is
an instant (without an offset it is read in the pipeline's zone; a bare date is midnight
there); ``date`` a day with no zone. ``integer`` is 64-bit; ``boolean`` takes what
databases store for one (``0``/``1``, ``t``/``f``, ``true``/``false``).

- :mod:`.base`: :class:`~.base.Codec`, every facet and its default.
- :mod:`.plain`: the kinds kept as they are: integer, float, text.
- :mod:`.booleans`: ``boolean``.
- :mod:`.decimals`: ``decimal`` and ``decimal(P,S)``, and the one pattern of exact text.
- :mod:`.moments`: ``date`` and ``timestamp``; :mod:`.instants` reads whole columns of them.
"""

from __future__ import annotations

from .base import Codec
from .booleans import BooleanCodec
from .decimals import DecimalCodec
from .moments import DateCodec, TimestampCodec
from .plain import FloatCodec, IntegerCodec, TextCodec

_ALL = (IntegerCodec, TextCodec, DecimalCodec, FloatCodec, BooleanCodec, DateCodec, TimestampCodec)
CODECS: dict[str, Codec] = {codec.kind: codec for codec in (c() for c in _ALL)}
KINDS = tuple(CODECS)
