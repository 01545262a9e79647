"""A declared table: the one object every layer takes instead of naming a column.

- :mod:`.spec`: :class:`~.spec.TableSpec` and its parts (columns, daily files, totals,
  the Dagster names by the one rule), plain frozen dataclasses.
- :mod:`.declare`: :func:`~.declare.declare`, a spec from a ``defs.yaml``'s attributes,
  refusing what cannot run, naming the attribute and the value.
- :mod:`.types`: the column types and every rule of each (read, store, write, widen).
- :mod:`.working`: the names of the pipeline's own working columns, apart from any
  declared one.
- :mod:`.orders`: the chapter's ``orders``, declared.
- :mod:`.money`: exact amounts as ``orders`` has always read and written them.
"""
