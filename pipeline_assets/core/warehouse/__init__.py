"""Writing the warehouse, inside the load's one transaction.

- :mod:`.staging`: rows into a temporary table, compared with the table, merged by key.
- :mod:`.stage_sql`: the stage's names and statements as SQL text, per dialect.
- :mod:`.watermark`: where incremental loads resume; it never moves back.
- :mod:`.declaration`: the declaration each batch was written with, and its fingerprint.
- :mod:`.evolve`: the warehouse table brought to its declaration (columns added,
  widened), or the change refused.
"""
