"""Rows as Arrow batches: the one representation the load, the check, ``verify`` and the
day files read rows in.

- :mod:`.normalize`: a scanned batch validated and normalized into a table's stored form,
  with each row's instant and day (the working columns).
- :mod:`.fast`: each column type's vectorized reader; :mod:`.checks`: the exact parser of
  the rows it does not vouch for, and one row per key.
- :mod:`.digest`: the fingerprints of stored rows: the batch digest, row hashes, per-day
  sums.
- :mod:`.keys`: a primary key of one column or several: membership, what is left, the
  keys of a source read in their stored form.

``orders`` runs through exactly this path: what it kept from before declarations (a
blank status is missing, its messages) is data on its spec (``spec.legacy``).
"""
