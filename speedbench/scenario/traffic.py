"""How a scenario sends requests (closed-loop concurrency or open-loop request rates)
and the SLOs goodput is measured against."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from speedbench.records import rate_label
from speedbench.scenario.base import Strict

__all__ = ["LoadSpec", "PromoteSpec", "SloSpec", "load_points", "rate_label"]


class LoadSpec(Strict):
    """How requests are sent. ``concurrency`` (default): SPEED-Bench's closed loop over the
    scenario's ``concurrency`` levels. ``rate``: open loop, one point per request rate, with
    arrival times drawn once from ``seed`` so every arm sees the same schedule
    (speedbench/loadgen/arrivals.py)."""

    mode: Literal["concurrency", "rate", "screen"] = "concurrency"
    rates: list[float] = Field(default_factory=list)  # requests per second
    # Gamma shape of the gaps between arrivals: 1 = Poisson; < 1 burstier; > 1 more even.
    burstiness: float = Field(1.0, gt=0)
    seed: int = 0
    # Most requests in flight at once in rate mode (vLLM's --max-concurrency); the points'
    # concurrency field holds it.
    max_concurrency: int = Field(1000, ge=1)
    # Screening (docs/metrics.md, "Calibration and screening"): each speculative arm's server
    # once, at this one concurrency, over all prompts, and no baseline server. AL at T=0
    # does not depend on the batch, so a high level measures it fastest.
    screen_concurrency: int = Field(64, ge=1)

    @model_validator(mode="after")
    def _check(self) -> "LoadSpec":
        if self.mode == "rate":
            if not self.rates:
                raise ValueError("load mode 'rate' needs 'rates' (requests per second), e.g. rates: [1, 2, 4]")
            bad = [r for r in self.rates if not (isinstance(r, (int, float)) and 0 < r < float("inf"))]
            if bad:
                raise ValueError(f"rates must be positive and finite (requests per second), got {bad}")
            if len(set(self.rates)) != len(self.rates):
                raise ValueError(f"rates must be distinct, got {self.rates}")
        elif self.rates:
            raise ValueError("'rates' needs load mode 'rate' (the default mode 'concurrency' uses `concurrency:`)")
        return self


class PromoteSpec(Strict):
    """Which screened checkpoints get a full speed run: those whose AL is at least
    ``min_al`` and beats arm (or matrix checkpoint) ``beats``, then the ``best`` N of them."""

    best: int | None = Field(None, ge=1)
    beats: str | None = None
    min_al: float | None = Field(None, ge=1)
    by: Literal["al_tokens", "al_requests"] = "al_tokens"

    @model_validator(mode="after")
    def _some_rule(self) -> "PromoteSpec":
        if self.best is None and self.beats is None and self.min_al is None:
            raise ValueError("promote needs 'best', 'beats' or 'min_al'")
        return self


class SloSpec(Strict):
    """Service-level objectives for goodput (ms): a request is good when it meets every one given."""

    ttft_ms: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    e2el_ms: float | None = Field(None, gt=0)

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2el_ms))


def load_points(load: LoadSpec, concurrency: list[int], variant: str) -> list[tuple[int, str, float | None]]:
    """(concurrency, point variant label, rate) of each point on one workload variant,
    in run order. Closed loop: each concurrency level, the variant as is, rate None.
    Rate mode: each rate, at ``load.max_concurrency``, labelled by :func:`rate_label`."""
    if load.mode == "rate":
        return [(load.max_concurrency, rate_label(r, variant), float(r)) for r in load.rates]
    if load.mode == "screen":
        return [(load.screen_concurrency, variant, None)]
    return [(c, variant, None) for c in concurrency]
