"""Same outputs, or no speedup: each point's outputs against its reference, prompt by prompt.

At temperature 0 speculative decoding promises the target's own tokens. Each point of an
arm is compared with the baseline's point at the same concurrency and workload (the same
round where there is one); the baseline's own points with its lowest concurrency (the floor
of batch shape: the same model, other batches); the A/A twin is an arm like the others (the
floor of the same computation twice). A divergence is read at its first differing token;
the check pass (run/output_check.py) asked the target for its top tokens at that prefix, and
the margin rule below tells numerics from loss (docs/metrics.md, "Outputs").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

# A divergence whose baseline token beats the arm's token, under the target at the same
# prefix, by less than this many nats is a near-tie: numerics (batch shape, the k+1-token
# verify pass) flip such ties. Chosen from the floors measured on real vLLM (docs/metrics.md).
NEAR_TIE_NATS = 0.5
TOP = 20  # top tokens asked for at a divergence (vLLM's default max_logprobs)
CHECKS_PER_POINT = 32  # divergences the check pass reads per point, first prompts first

IDENTICAL, NUMERICS, LOSSY, NOT_CHECKED = "identical", "lossless within numerics", "lossy", "not checked"
Outputs = Mapping[tuple[int, int], np.ndarray]


@dataclass(frozen=True)
class Divergence:
    prompt_index: int
    turn: int
    position: int  # tokens in common before it
    ref_token: int  # -1: the reference's output ended here
    arm_token: int  # -1: the arm's output ended here


@dataclass(frozen=True)
class Comparison:
    pairs: int  # requests present in both
    identical: int
    divergences: tuple[Divergence, ...]

    @property
    def identical_fraction(self) -> float | None:
        return self.identical / self.pairs if self.pairs else None


def first_divergence(a: np.ndarray, b: np.ndarray) -> int | None:
    """Tokens in common before the first difference; None when the two are the same."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    if diff.size:
        return int(diff[0])
    return None if len(a) == len(b) else n


def compare(arm: Outputs, ref: Outputs) -> Comparison:
    """Every request in both, in prompt order. A later turn of a conversation is compared
    only while its earlier turns were identical: after a divergence its prompt differs."""
    pairs = same = 0
    divs: list[Divergence] = []
    gone: set[int] = set()
    for idx, turn in sorted(set(arm) & set(ref)):
        if idx in gone:
            continue
        a, b = arm[(idx, turn)], ref[(idx, turn)]
        pairs += 1
        pos = first_divergence(a, b)
        if pos is None:
            same += 1
            continue
        gone.add(idx)
        divs.append(Divergence(idx, turn, pos, int(b[pos]) if pos < len(b) else -1,
                               int(a[pos]) if pos < len(a) else -1))
    return Comparison(pairs, same, tuple(divs))


def margin(top: Mapping[int, float], ref_token: int, arm_token: int) -> tuple[float | None, bool]:
    """(the target's logprob of the reference's token minus the arm's, exact) at the prefix
    the two shared. A token outside the top list is at most its lowest entry, so the margin
    is then a bound: returned with False. None when neither token is listed."""
    floor = min(top.values()) if top else None
    ref_lp, arm_lp = top.get(ref_token), top.get(arm_token)
    if ref_lp is not None and arm_lp is not None:
        return ref_lp - arm_lp, True
    if floor is None or (ref_lp is None and arm_lp is None):
        return None, False
    if arm_lp is None:  # the arm's token below the list: at least this far below
        return ref_lp - floor, False  # type: ignore[operator]
    return floor - arm_lp, False  # the reference's token below the list: at most this


def is_loss(m: float | None, exact: bool) -> bool | None:
    """Whether a divergence with margin ``m`` is a loss; None when the margin says nothing.
    An inexact margin is a lower bound when the arm's token was unlisted (a loss when it
    reaches the threshold) and an upper bound when the reference's was (never a loss)."""
    if m is None:
        return None
    if exact:
        return m >= NEAR_TIE_NATS
    return m >= NEAR_TIE_NATS if m > 0 else False


class Check(Protocol):
    """A divergence's check as the verdict reads it (metrics/stored_outputs.py's CheckAnswer):
    its margin and whether that is exact, or why the check failed."""

    @property
    def margin(self) -> float | None: ...
    @property
    def exact(self) -> bool | None: ...
    @property
    def error(self) -> str | None: ...


def verdict(cmp: Comparison | None, checks: Sequence[Check], why_not: str = "") -> tuple[str, str]:
    """(verdict, its reason) for one point from its comparison and its divergences' checks
    (a margin and whether it is exact, or an error where the check failed)."""
    if cmp is None or cmp.pairs == 0:
        return NOT_CHECKED, why_not or "no outputs to compare"
    if not cmp.divergences:
        return IDENTICAL, f"{cmp.pairs} of {cmp.pairs} identical"
    called = [(c, is_loss(c.margin, bool(c.exact))) for c in checks if c.error is None]
    losses = [c for c, loss in called if loss]
    ties = [c for c, loss in called if loss is False]
    n = len(cmp.divergences)
    if losses:
        worst = max(c.margin for c in losses if c.margin is not None)  # a loss has a margin
        return LOSSY, (f"{len(losses)} of {n} divergences with the arm's token at least "
                       f"{NEAR_TIE_NATS:g} nats below the target's (worst {worst:.2f})")
    if ties and len(ties) >= min(n, CHECKS_PER_POINT):
        shown = f"{len(ties)} of {n} divergences checked" if len(ties) < n else f"{n} divergences"
        return NUMERICS, f"{shown}, all near-ties (under {NEAR_TIE_NATS:g} nats)"
    errors = sorted({str(c.error) for c in checks if c.error is not None})
    why = errors[0] if errors else (why_not or "the check pass did not run")
    return NOT_CHECKED, f"{n} divergences not checked: {why}"
