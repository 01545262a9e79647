"""A declared table: the one object every layer takes instead of naming a column.

- :mod:`.spec`: :class:`~.spec.TableSpec` and its parts (columns, daily files, totals,
  the Dagster names by the one rule, the words its messages use), plain frozen dataclasses.
- :mod:`.declare`: :func:`~.declare.declare`, a spec from a ``defs.yaml``'s attributes,
  refusing what cannot run, naming the attribute and the value.
- :mod:`.parts`: a declaration's columns, key, change stamp and daily files read and
  checked, and the names an asset may take.
- :mod:`.types`: the column types, as a declaration names them.
- :mod:`.codecs`: one codec per kind, every rule of its values (read, check, store and
  its SQL and Arrow types, read back, write to a day file, total, widen).
- :mod:`.working`: the names of the pipeline's own working columns, apart from any
  declared one.
- :mod:`.orders`: the chapter's ``orders`` as attributes, and what it kept from the
  release before declarations (its words, row rules and names), as data.
- :mod:`.money`: exact amounts, as ``decimal`` columns read and write them.

:data:`ORDERS` is ``orders`` declared: the code location serves it beside the tables a
project declares.
"""

from .declare import declare as _declare
from .orders import ORDERS_ATTRIBUTES

ORDERS = _declare(ORDERS_ATTRIBUTES)
