"""When sequential stopping looks, at what level, and in which order prompts go out: plain
arithmetic and one seeded permutation, light enough for the dry-run (no pandas)."""

from __future__ import annotations

import numpy as np


def look_schedule(n_available: int, min_prompts: int, max_prompts: int | None) -> list[int]:
    """Prompt counts at which the interval is looked at: ``min_prompts · 2^j`` below the
    cap, then the cap (``max_prompts``, or every prompt when fewer are available)."""
    cap = min(n_available, max_prompts) if max_prompts is not None else n_available
    if cap <= 0:
        return []
    looks = []
    n = min_prompts
    while n < cap:
        looks.append(n)
        n *= 2
    return [*looks, cap]


def look_level(alpha: float, n_looks: int) -> float:
    """Confidence level of each look: the schedule's alpha split evenly (Bonferroni)."""
    return 1.0 - alpha / max(1, n_looks)


def prompt_order(n: int, seed: int) -> list[int]:
    """The order prompts go out in under sequential stopping: a seeded permutation, the
    same in every arm, so every look's prefix is a random sample of the workload (the
    workload's own order may group categories) and both arms share it."""
    return [int(i) for i in np.random.default_rng(seed).permutation(n)]
