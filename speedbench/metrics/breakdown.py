"""Per category and per prompt: the rows a regression is traced back with."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from speedbench.metrics.acceptance import acceptance
from speedbench.metrics.numbers import NAN, mean, plain, ratio
from speedbench.metrics.speedup import speedup
from speedbench.metrics.table import request_table
from speedbench.records import RequestRecord

CATEGORY_KEYS = ("arm", "concurrency", "variant", "category", "n_ok", "per_user_tps_mean",
                 "speedup_mean", "speedup_ci_low", "speedup_ci_high", "speedup_pairs",
                 "al_tokens", "al_requests")
# One row per (arm, concurrency, variant, prompt_id): what a regression traces back to.
PROMPT_KEYS = ("arm", "concurrency", "variant", "prompt_id", "category", "n_ok", "per_user_tps",
               "baseline_per_user_tps", "speedup", "al_requests")


def _in_order(keys: Iterable[tuple], baseline_arm: str | None, arm_order: Sequence[str] | None) -> list[tuple]:
    """Keys (arm, concurrency, variant, ...) sorted: arms in the scenario's order (the
    baseline first when no order is given), then concurrency, variant and the rest.
    Never the order the records happen to come in: a gathered Slurm run concatenates
    its jobs' records in whatever order the jobs finished."""
    order = {a: i for i, a in enumerate(arm_order or ([baseline_arm] if baseline_arm else []))}
    return sorted(keys, key=lambda k: (order.get(k[0], len(order)), str(k[0]), k[1], str(k[2]), str(k[3])))


def category_rows(records: Iterable[RequestRecord], baseline_arm: str | None = None,
                  arm_order: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Per (arm, concurrency, variant, category) over ok measured requests: per-user TPS,
    the speedup against the baseline arm's requests of the same category at the same
    concurrency and variant (paired as :func:`speedup`, with its bootstrap CI), and AL
    pooled over steps (``al_tokens``) and as the mean over requests (``al_requests``)."""
    df = request_table([r for r in records if not r.warmup and r.error is None])
    groups = {(a, int(c), v, cat): g
              for (a, c, v, cat), g in df.groupby(["arm", "concurrency", "variant", "category"], sort=False)}
    out = []
    for arm, conc, variant, cat in _in_order(groups, baseline_arm, arm_order):
        g = groups[(arm, conc, variant, cat)]
        acc = acceptance(g)
        row = {"arm": arm, "concurrency": conc, "variant": variant, "category": cat, "n_ok": len(g),
               "per_user_tps_mean": mean(g["per_user_tps"]),
               "speedup_mean": NAN, "speedup_ci_low": NAN, "speedup_ci_high": NAN, "speedup_pairs": 0,
               "al_tokens": acc["al_tokens"], "al_requests": acc["al_requests"]}
        base = groups.get((baseline_arm, conc, variant, cat))
        if baseline_arm is not None and arm != baseline_arm and base is not None:
            sp = speedup(g, base)
            row.update({k: sp[k] for k in ("speedup_mean", "speedup_ci_low", "speedup_ci_high", "speedup_pairs")})
        out.append({k: plain(row[k]) for k in CATEGORY_KEYS})
    return out


def prompt_rows(records: Iterable[RequestRecord], baseline_arm: str | None = None,
                arm_order: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Per (arm, concurrency, variant, prompt_id) over ok measured requests (every turn
    and repeat of the prompt): mean per-user TPS, the baseline's mean for the same prompt
    at the same point, their ratio, and the mean over requests of the request AL."""
    df = request_table([r for r in records if not r.warmup and r.error is None])
    if len(df) == 0:
        return []
    df = df.assign(al_req=np.where(df["has_spec"], 1.0 + df["spec_accepted"] / df["spec_steps"].where(
        df["spec_steps"] > 0), NAN))
    keys = ["arm", "concurrency", "variant", "prompt_id"]
    agg = {}
    for (arm, conc, variant, pid), g in df.groupby(keys, sort=False):
        agg[(arm, int(conc), variant, pid)] = (str(g["category"].iloc[0]), len(g), mean(g["per_user_tps"]),
                                               mean(g["al_req"]))
    out = []
    for arm, conc, variant, pid in _in_order(agg, baseline_arm, arm_order):
        cat, n, tps, al = agg[(arm, conc, variant, pid)]
        base = agg.get((baseline_arm, conc, variant, pid)) if baseline_arm is not None and arm != baseline_arm else None
        b_tps = base[2] if base else NAN
        out.append({"arm": arm, "concurrency": conc, "variant": variant, "prompt_id": pid, "category": cat,
                    "n_ok": n, "per_user_tps": tps, "baseline_per_user_tps": b_tps, "speedup": ratio(tps, b_tps),
                    "al_requests": al})
    return [{k: plain(r[k]) for k in PROMPT_KEYS} for r in out]
