"""SummaryRow: one summary row as a typed object over the registry's keys.

Its keys are the registry's (``row_keys(percentiles)``, in that order); reading a key the
registry does not declare is a KeyError, not a silent "–". ``to_dict`` is the row as
summary.json stores it; ``from_dict`` reads one back (an old run folder's row may lack
keys added since: those read as absent).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from speedbench.metrics.registry import BY_KEY, LATENCY_METRICS
from speedbench.records import PointKey


def is_row_key(key: str) -> bool:
    """A declared row key: a ROW_METRICS key, or a latency family's mean/std/percentile."""
    return key in BY_KEY or any(key.startswith(m + "_") for m in LATENCY_METRICS)


@dataclass(frozen=True)
class SummaryRow(Mapping[str, Any]):
    cells: Mapping[str, Any]  # key -> value, in row_keys order

    def __post_init__(self) -> None:
        unknown = [k for k in self.cells if not is_row_key(k)]
        if unknown:
            raise KeyError(f"not summary-row keys (metrics/registry.py declares none of them): {unknown}")

    def __getitem__(self, key: str) -> Any:
        if not is_row_key(key):
            raise KeyError(f"{key!r} is not a summary-row key")
        return self.cells[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.cells)

    def __len__(self) -> int:
        return len(self.cells)

    @property
    def key(self) -> PointKey:
        return PointKey(self.cells["arm"], int(self.cells["concurrency"]), self.cells["variant"])

    def to_dict(self) -> dict[str, Any]:
        return dict(self.cells)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SummaryRow:
        return cls(dict(d))
