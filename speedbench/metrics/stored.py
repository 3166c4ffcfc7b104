"""summary.json's tables other than the summary rows, typed: each entry a frozen row read
by attribute, as :class:`~speedbench.metrics.registry.SummaryRow` is.

:class:`StoredRow` is what they share. ``from_dict`` takes an entry as a run folder stored
it: keys it does not declare are kept (``more``), and so is the stored order (``order``), so
that ``to_dict`` gives back the same entry, byte for byte, for an old folder's entry too.
A declared key the entry lacks reads as None; :meth:`StoredRow.has` tells the two apart
where an old folder's missing key means something. A key that holds a list of entries
(``nested``) or one object (``nested_one``) is typed on read too, and written back as
stored; a stored value of another shape reads as the field's default. Pure: no pandas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, ClassVar, TypeVar

Num = float | None  # a number; None where summary.json stored NaN as null
_SELF = TypeVar("_SELF", bound="StoredRow")
_BOOK = ("more", "order")  # StoredRow's own fields: not cells
_OTHER_SHAPE = object()  # a nested key's stored value of the wrong shape


@dataclass(frozen=True)
class StoredRow:
    """A typed entry of a summary.json table (see the module's docstring)."""

    more: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    nested: ClassVar[Mapping[str, type[StoredRow]]] = {}  # key -> its list's entry type
    nested_one: ClassVar[Mapping[str, type[StoredRow]]] = {}  # key -> its object's type

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
        d = {k: cells.get(k) for k in (self.order or cells)}
        for key in d.keys() & (self.nested.keys() | self.nested_one.keys()):
            value = d[key]
            if isinstance(value, tuple):
                d[key] = [e.to_dict() for e in value]
            elif isinstance(value, StoredRow):
                d[key] = value.to_dict()
        return d

    @classmethod
    def from_dict(cls: type[_SELF], d: Mapping[str, Any]) -> _SELF:
        known = set(cls.keys())
        typed = {k: cls._typed(k, v) for k, v in d.items() if k in known}
        return cls(**{k: v for k, v in typed.items() if v is not _OTHER_SHAPE},
                   more={k: v for k, v in d.items() if k not in known}, order=tuple(d))

    @classmethod
    def _typed(cls, key: str, value: Any) -> Any:
        """A stored cell; a nested key's typed, or _OTHER_SHAPE where it holds something
        else (the field's default stands then)."""
        if key in cls.nested:  # an entry that is not an object is left out
            return tuple(cls.nested[key].from_dict(e) for e in value if isinstance(e, Mapping)) \
                if isinstance(value, list) else _OTHER_SHAPE
        if key in cls.nested_one:
            return cls.nested_one[key].from_dict(value) if isinstance(value, Mapping) else _OTHER_SHAPE
        return value


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
    nested: ClassVar[Mapping[str, type[StoredRow]]] = {"predicted": Prediction}
