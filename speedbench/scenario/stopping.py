"""When a point may stop early (``stop:``) and where its baseline may come from
(``baseline_from:``): configuration only. The logic of stopping is speedbench/stopping/;
reuse is speedbench/run/reuse.py (docs/metrics.md,
"Sequential stopping" and "Reused baselines")."""

from __future__ import annotations

from pydantic import Field, model_validator

from speedbench.scenario.base import Strict


class StopSpec(Strict):
    """Sequential stopping: prompts go out in seeded batches that end at fixed looks
    (``min_prompts · 2^j``, capped at ``max_prompts``); a speculative arm's point stops at
    the first look where its interval, at the Bonferroni level ``1 - alpha / looks``, is
    narrow enough. The baseline arm runs every look, so each speculative arm can pair
    with it at whatever look it stops."""

    # Relative half-width of the speedup interval ((high - low) / 2 / speedup) to stop at.
    speedup_ci_halfwidth: float | None = Field(None, gt=0, lt=1)
    # The same for AL pooled over steps (screening: arms that need no baseline).
    al_ci_halfwidth: float | None = Field(None, gt=0, lt=1)
    # A percentile bootstrap of fewer pairs is too narrow to trust, whatever the level.
    min_prompts: int = Field(16, ge=8)
    max_prompts: int | None = Field(None, ge=8)  # None: every prompt of the workload
    alpha: float = Field(0.05, gt=0, lt=0.5)  # the whole schedule's error rate, spent over the looks
    seed: int = 0  # the order prompts go out in, the same in every arm

    @model_validator(mode="after")
    def _check(self) -> "StopSpec":
        if self.speedup_ci_halfwidth is None and self.al_ci_halfwidth is None:
            raise ValueError("stop needs 'speedup_ci_halfwidth' or 'al_ci_halfwidth' (a relative half-width, "
                             "e.g. 0.02)")
        if self.max_prompts is not None and self.max_prompts < self.min_prompts:
            raise ValueError(f"stop.max_prompts ({self.max_prompts}) is below min_prompts ({self.min_prompts})")
        return self


class BaselineFromSpec(Strict):
    """Take the baseline arm from an earlier matching run instead of measuring it again.

    ``results`` is a results folder (``results/``, a scenario's folder or one run folder);
    the newest finished run whose baseline matches (vLLM version, target, hardware, server
    arguments, workload and load shape) and is at most ``max_age_days`` old is used, after
    a canary of ``canary_prompts`` prompts (at least the concurrency) at each concurrency
    agrees with it within the noise floor."""

    results: str
    max_age_days: float = Field(7.0, gt=0)
    canary_prompts: int = Field(4, ge=2)
    # The canary's allowed relative difference when the earlier run has no A/A noise floor.
    tolerance: float = Field(0.05, gt=0, lt=1)
