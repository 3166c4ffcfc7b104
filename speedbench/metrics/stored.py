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
from dataclasses import dataclass, field, fields, replace
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


@dataclass(frozen=True)
class NoiseFloorEntry(StoredRow):
    """summary.json's ``noise_floor``: the A/A arm's speedup over the baseline at one point,
    on both clocks, its intervals simultaneous over the A/A points (metrics/noise_floor.py)."""

    concurrency: int | None = None
    variant: str | None = None
    speedup: Num = None
    ci_low: Num = None
    ci_high: Num = None
    speedup_engine: Num = None
    engine_ci_low: Num = None
    engine_ci_high: Num = None
    level: Num = None
    contains_one: bool | None = None


@dataclass(frozen=True)
class StopEntry(StoredRow):
    """summary.json's ``stopping``: one stopped round of a point, why and after how many
    prompts, and what its last look found at the look level (stopping/summary.py)."""

    arm: str | None = None
    concurrency: int | None = None
    variant: str | None = None
    repeat: int | None = None
    reason: str | None = None
    prompts: int | None = None
    look: int | None = None
    n_looks: int | None = None
    level: Num = None
    speedup: Num = None
    ci_low: Num = None
    ci_high: Num = None
    speedup_engine: Num = None
    engine_ci_low: Num = None
    engine_ci_high: Num = None
    al: Num = None
    al_ci_low: Num = None
    al_ci_high: Num = None
    lag_bound: Num = None


@dataclass(frozen=True)
class Prediction(StoredRow):
    """One level of a screening entry's ``predicted``: the speedup its calibration predicts."""

    concurrency: int | None = None
    speedup: Num = None
    ci_low: Num = None
    ci_high: Num = None


@dataclass(frozen=True)
class ScreenEntry(StoredRow):
    """summary.json's ``screening``: one screened (arm, variant), its acceptance figures and
    the speedups its calibration predicts at the scenario's levels (calibration/screen.py)."""

    arm: str | None = None
    concurrency: int | None = None
    variant: str | None = None
    n_ok: int | None = None
    al_tokens: Num = None
    al_requests: Num = None
    al_prometheus: Num = None
    draft_acceptance_rate: Num = None
    per_position_joint: list[float] | None = None
    per_position_conditional: list[float] | None = None
    predicted: tuple[Prediction, ...] = ()
    calibration: str | None = None
    promoted: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        if "predicted" in d:
            d["predicted"] = [p.to_dict() for p in self.predicted]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScreenEntry:
        """An entry as stored; a ``predicted`` that is not a list reads as none."""
        entry = super().from_dict(d)
        stored = d.get("predicted")
        preds = tuple(Prediction.from_dict(p) for p in stored if isinstance(p, Mapping)) \
            if isinstance(stored, list) else ()
        return replace(entry, predicted=preds)
