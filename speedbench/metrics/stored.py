"""summary.json's tables other than the summary rows, typed: each entry a frozen row read
by attribute, as :class:`~speedbench.metrics.registry.SummaryRow` is.

:class:`StoredRow` is what they share. ``from_dict`` takes an entry as a run folder stored
it: keys it does not declare are kept (``more``), and so is the stored order (``order``), so
that ``to_dict`` gives back the same entry, byte for byte, for an old folder's entry too.
A declared key the entry lacks reads as None; :meth:`StoredRow.has` tells the two apart
where an old folder's missing key means something. Pure: no pandas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, TypeVar

Num = float | None  # a number; None where summary.json stored NaN as null
_SELF = TypeVar("_SELF", bound="StoredRow")
_BOOK = ("more", "order")  # StoredRow's own fields: not cells


@dataclass(frozen=True)
class StoredRow:
    """A typed entry of a summary.json table (see the module's docstring)."""

    more: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    @cache
    def keys(cls) -> tuple[str, ...]:
        """The declared keys, in the order a new entry is written."""
        return tuple(f.name for f in fields(cls) if f.name not in _BOOK)

    def has(self, key: str) -> bool:
        """Whether the entry holds ``key`` (an entry built here holds every declared key)."""
        return key in self.order if self.order else key in self.keys()

    def cell(self, key: str) -> Any:
        """A cell by its stored key, for a key known only as data (a column list)."""
        return getattr(self, key) if key in self.keys() else self.more.get(key)

    def to_dict(self) -> dict[str, Any]:
        """The entry as summary.json stores it (its own keys in its own order)."""
        cells = {k: getattr(self, k) for k in self.keys()} | dict(self.more)
        return {k: cells.get(k) for k in (self.order or cells)}

    @classmethod
    def from_dict(cls: type[_SELF], d: Mapping[str, Any]) -> _SELF:
        known = set(cls.keys())
        return cls(**{k: d[k] for k in known if k in d},
                   more={k: v for k, v in d.items() if k not in known}, order=tuple(d))


@dataclass(frozen=True)
class CategoryRow(StoredRow):
    """summary.json's ``categories``: one per (arm, concurrency, variant, category), and its
    headline keys, derived on read from its point's headline clock (results.Run.categories)."""

    arm: str | None = None
    concurrency: int | None = None
    variant: str | None = None
    category: str | None = None
    n_ok: int | None = None
    per_user_tps_mean: Num = None
    speedup_mean: Num = None
    speedup_ci_low: Num = None
    speedup_ci_high: Num = None
    speedup_pairs: int | None = None
    speedup_engine_mean: Num = None
    speedup_engine_ci_low: Num = None
    speedup_engine_ci_high: Num = None
    al_tokens: Num = None
    al_requests: Num = None
    # derived on read, never stored (metrics/headline.py's category_headline)
    speedup_headline_clock: str | None = None
    speedup_headline_mean: Num = None
    speedup_headline_ci_low: Num = None
    speedup_headline_ci_high: Num = None


# the stored keys of a category row (the headline keys are derived on read)
CATEGORY_KEYS = CategoryRow.keys()[:15]


@dataclass(frozen=True)
class PromptRow(StoredRow):
    """The report's per-prompt table: one per (arm, concurrency, variant, prompt_id). Built
    from the records on every read (never stored), so it always holds every key."""

    arm: str = ""
    concurrency: int = 0
    variant: str = ""
    prompt_id: str = ""
    category: str = ""
    n_ok: int = 0
    per_user_tps: Num = None
    baseline_per_user_tps: Num = None
    speedup: Num = None
    al_requests: Num = None


PROMPT_KEYS = PromptRow.keys()
