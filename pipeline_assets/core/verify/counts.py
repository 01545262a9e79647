"""Source vs warehouse on one day: :class:`DayCounts`, what both comparisons of
:mod:`.compare` fill in and :mod:`.report` words."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..table.spec import TableSpec


@dataclass
class DayCounts:
    """Source vs warehouse for one day (in the pipeline's time zone)."""

    day: str
    source_rows: int = 0
    source_checksum: int = 0
    source_paid: int = 0
    warehouse_rows: int = 0
    warehouse_checksum: int = 0
    warehouse_paid: int = 0
    not_loaded: int = 0  # rows on this day in the source, missing from the warehouse
    changed: int = 0  # rows whose stored values differ, on this day on either side
    only_in_warehouse: int = 0  # rows on this day in the warehouse, gone from the source
    load_days: set[str] = field(default_factory=set)  # source days a load must read
    rebuild_days: set[str] = field(default_factory=set)  # days whose daily files it changes
    deleted_ids: list = field(default_factory=list)  # the first few keys of those rows
    deleted_checksum: int = 0  # the checksum of those rows alone
    # warehouse rows per daily file after the first (whose count is warehouse_paid)
    warehouse_kept: dict[str, int] = field(default_factory=dict)
    # per column added to the declaration after rows were stored (core/warehouse/evolve.py): the
    # day's warehouse rows that hold NULL there while the source holds a value
    lacking: dict[str, int] = field(default_factory=dict)

    @property
    def only_deletions(self) -> bool:
        """Whether the orders the source lost are the whole difference of the day."""
        return bool(self.only_in_warehouse) and (self.source_rows, self.source_checksum) == (
            self.warehouse_rows - self.only_in_warehouse,
            (self.warehouse_checksum - self.deleted_checksum) % 2**64,
        )

    @property
    def agrees(self) -> bool:
        return not (self.not_loaded or self.changed or self.only_in_warehouse)

    def in_file(self, spec: TableSpec, index: int) -> int:
        """The day's warehouse rows of ``spec``'s daily file number ``index``."""
        if index == 0:
            return self.warehouse_paid
        return self.warehouse_kept.get(spec.daily_files[index].name, 0)

    def to_json(self, spec: TableSpec) -> dict:
        out = {
            "day": self.day,
            "agrees": self.agrees,
            "source_rows": self.source_rows,
            "source_checksum": f"{self.source_checksum:016x}",
            "warehouse_rows": self.warehouse_rows,
            "warehouse_checksum": f"{self.warehouse_checksum:016x}",
            "not_loaded": self.not_loaded,
            "changed": self.changed,
            "only_in_warehouse": self.only_in_warehouse,
            **({"lacking": dict(sorted(self.lacking.items()))} if self.lacking else {}),
        }
        if spec.legacy is not None:  # orders' JSON, as it always was: ids, one file set
            return {
                **out,
                spec.key_name("deleted_keys"): self.deleted_ids,
                spec.key_name("warehouse_files"): self.warehouse_paid,
            }
        keys = [k if isinstance(k, tuple) else (k,) for k in self.deleted_ids]
        return {
            **out,
            "deleted_keys": [dict(zip(spec.primary_key, k, strict=True)) for k in keys],
            "warehouse_files": {
                f.name: self.in_file(spec, i) for i, f in enumerate(spec.daily_files)
            },
        }
