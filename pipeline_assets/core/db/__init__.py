"""The databases: engines and what went wrong with one, names as SQL, the warehouse's
tables.

- :mod:`.engines`: an engine per URL and role (a SQLite source never created), the Arrow
  drivers, one sentence for a database that cannot be used (:func:`~.engines.guard`).
- :mod:`.quoting`: a name quoted for a dialect, in the form each way of sending SQL takes.
- :mod:`.schema`: a declared table's warehouse table (``orders``' as it always was).
- :mod:`.state`: the pipeline's own tables (watermarks, their history, the batch ledger,
  declarations, columns to fill, ``daily_revenue``) and :func:`~.state.ensure_schema`.
- :mod:`.sqlite_reader`: a SQLite warehouse read by the Arrow driver in a process of its
  own.
"""
