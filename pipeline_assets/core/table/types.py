"""The column types a declaration may use.

A declared column has one of eight types: ``integer``, ``text``, ``decimal``,
``decimal(P,S)``, ``float``, ``boolean``, ``date``, ``timestamp``. :class:`ColumnType`
is one of them, named as a declaration names it; what is done with its values (read and
checked, stored, written to a day file, widened) is its kind's codec's
(:mod:`.codecs`), which it asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import tzinfo
from functools import cached_property

from ..errors import UnknownTypeError
from .codecs import CODECS, KINDS
from .codecs.base import Codec

_TYPE_RE = re.compile(r"\s*(\w+)\s*(?:\(\s*(\d+)\s*,\s*(\d+)\s*\))?\s*")


@dataclass(frozen=True)
class ColumnType:
    """One declared type: ``kind`` and, for ``decimal(P,S)``, its precision and scale."""

    kind: str
    precision: int | None = None
    scale: int | None = None

    @classmethod
    def named(cls, name: object) -> ColumnType:
        """``"decimal(10,2)"`` → ``ColumnType("decimal", 10, 2)``; an unknown name raises
        :class:`UnknownTypeError` listing the types there are."""
        match = _TYPE_RE.fullmatch(name) if isinstance(name, str) else None
        kind = match.group(1).lower() if match else None
        if kind not in KINDS or (match.group(2) is not None and kind != "decimal"):
            raise UnknownTypeError(
                name, f"not a type; use one of {', '.join(KINDS)} or decimal(P,S)"
            )
        if match.group(2) is None:
            return cls(kind)
        precision, scale = int(match.group(2)), int(match.group(3))
        if not 1 <= precision <= 1000 or scale > precision:
            raise UnknownTypeError(name, "a decimal(P,S) needs 1 <= P <= 1000 and 0 <= S <= P")
        return cls(kind, precision, scale)

    @property
    def name(self) -> str:
        if self.precision is not None:
            return f"decimal({self.precision},{self.scale})"
        return self.kind

    def __str__(self) -> str:
        return self.name

    @cached_property
    def codec(self) -> Codec:
        """What is done with a value of this type (:mod:`.codecs`)."""
        return CODECS[self.kind]

    @property
    def numeric(self) -> bool:
        """Whether a total may sum it."""
        return self.codec.numeric

    @property
    def key_type(self) -> bool:
        """Whether it may be part of a primary key (an exact, orderable value)."""
        return self.codec.key

    def parse(self, value: object, tz: tzinfo | None):
        """The value as the pipeline holds it, or :class:`TypeValueError`.

        integer → ``int``; text → ``str``; decimals → ``Decimal``; float → ``float``;
        boolean → ``bool``; date → ``date``; timestamp → an aware ``datetime`` in UTC.
        ``value`` is never None here (NULL is the declaration's business).
        """
        return self.codec.parse(self, value, tz)

    def stored(self, value):
        """The value as the warehouse keeps it: exact text for decimals and timestamps
        (canonical UTC, which sorts as it compares), ISO text for dates; the rest as is."""
        return None if value is None else self.codec.stored(self, value)

    def from_stored(self, value, tz: tzinfo):
        """The inverse of :meth:`stored`, for a value read back from the warehouse."""
        return None if value is None else self.codec.from_stored(self, value, tz)

    def to_json(self, value, tz: tzinfo):
        """The value as a day file writes it: integers and floats as numbers, decimals as
        exact text (``decimal(P,S)`` with S places), booleans as true/false, dates
        ``YYYY-MM-DD``, timestamps ISO-8601 in ``tz``, NULL as null."""
        return None if value is None else self.codec.to_json(self, value, tz)

    def sort_key(self, value):
        """How key values order: integers by value, text by code point (never a database's
        collation), instants as instants."""
        return value

    def widens_to(self, other: ColumnType) -> bool:
        """Whether every value of this type is a value of ``other``, unchanged (a stored
        column of this type may be declared ``other`` without rewriting it)."""
        return self == other or self.codec.widens_to(self, other)


INTEGER, TEXT, DECIMAL, FLOAT = (ColumnType(k) for k in ("integer", "text", "decimal", "float"))
BOOLEAN, DATE, TIMESTAMP = (ColumnType(k) for k in ("boolean", "date", "timestamp"))
