"""One batch, from the source into the warehouse: rules 1, 2, 3 and 5 meet here.

- :mod:`.batch`: :func:`~.batch.load_table`: the window, the scan, the stage, the
  comparison, the deletes of a range load, the merge, the watermark and the ledger, in
  one transaction.
- :mod:`.window`: what a batch reads, decided under the lock of the table's watermark
  row, the table brought to its declaration first.
- :mod:`.result`: what a batch did (:class:`~.result.LoadResult`) and what its scan saw.
- :mod:`.deletions`: what a range load may delete, within the guard.
"""
