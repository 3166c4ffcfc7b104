"""Acceptance: AL from per-request counters and from Prometheus deltas, the acceptance
histogram, per-position rates, and tokens counted but never delivered (overcount)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from speedbench.metrics.numbers import NAN, ratio
from speedbench.client.scrape import SpecCounters

AL_AGREE_TOLERANCE = 0.01  # relative


def al_from_counters(c: SpecCounters | None) -> float:
    """AL = 1 + accepted / drafts from Prometheus counter deltas."""
    return 1.0 + c.accepted / c.drafts if c is not None and c.drafts > 0 else NAN


def sum_histograms(hists: Iterable[list[int]]) -> list[int]:
    out: list[int] = []
    for h in hists:
        if len(h) > len(out):
            out += [0] * (len(h) - len(out))
        for j, v in enumerate(h):
            out[j] += int(v)
    return out


def per_position_rates(c: SpecCounters | None, hist: list[int]) -> tuple[list[float], list[float]]:
    """Joint rate[i] = accepted_at_pos[i] / drafts (P(at least i+1 accepted)); conditional
    rate[i] = accepted_at_pos[i] / accepted_at_pos[i-1] (i = 0: / drafts). From counter
    deltas when present, else from the summed histogram (accepted_at_pos[i] =
    sum(h[i+1:]); exact when every step drafts k tokens)."""
    if c is not None and c.drafts > 0 and c.per_position:
        drafts, at = c.drafts, list(c.per_position)
    elif hist and sum(hist) > 0:
        drafts, at = float(sum(hist)), [float(sum(hist[i + 1:])) for i in range(len(hist) - 1)]
    else:
        return [], []
    joint = [a / drafts for a in at]
    cond = [ratio(a, prev) for a, prev in zip(at, [drafts] + at[:-1])]
    return joint, cond


def acceptance(df: pd.DataFrame) -> dict[str, Any]:
    """Token-weighted AL = 1 + sum(accepted)/sum(steps); request-weighted AL = mean over
    requests of 1 + accepted/steps. Only requests that reported spec stats count."""
    s = df[df["has_spec"]] if len(df) else df
    if len(s) == 0:
        return {"al_tokens": NAN, "al_requests": NAN, "draft_acceptance_rate": NAN, "hist": []}
    steps, acc, drafts = s["spec_steps"].sum(), s["spec_accepted"].sum(), s["spec_draft_tokens"].sum()
    return {
        "al_tokens": 1.0 + acc / steps,
        "al_requests": float((1.0 + s["spec_accepted"] / s["spec_steps"]).mean()),
        "draft_acceptance_rate": acc / drafts if drafts else NAN,
        "hist": sum_histograms(s["spec_hist"]),
    }


def overcount_stats(ok: pd.DataFrame, k: Any) -> dict[str, Any]:
    """Share of spec requests whose counters imply more tokens than were delivered, and
    share where the excess exceeds k (one step's drafts, the most a single cut step
    can explain); ``al_delivered`` is the pooled AL with those tokens taken out. A
    negative difference is no error: decode steps that drafted nothing (n-gram lookup
    without a match) deliver a token but are no spec step, so they are ignored here."""
    s = ok[ok["has_spec"]] if len(ok) else ok
    if len(s) == 0:
        return {"spec_overcount_share": NAN, "spec_overcount_gt_k_share": NAN, "al_delivered": NAN}
    excess = np.maximum(s["spec_overcount"].to_numpy(), 0)
    kk = int(k) if isinstance(k, (int, float)) and k and k > 0 else 0
    steps = float(s["spec_steps"].sum())
    return {"spec_overcount_share": float((excess > 0).mean()),
            "spec_overcount_gt_k_share": float((excess > kk).mean()) if kk else NAN,
            "al_delivered": 1.0 + (float(s["spec_accepted"].sum()) - float(excess.sum())) / steps if steps else NAN}
