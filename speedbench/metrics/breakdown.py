"""Per category and per prompt: the rows a regression is traced back with.

Both come from one builder, :func:`breakdown_rows`, with the grouping as its dimension:
the point's ok measured requests grouped by ``category`` or by ``prompt_id``, each group
measured against the baseline arm's same group at the same concurrency and variant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from speedbench.metrics.acceptance import acceptance
from speedbench.metrics.numbers import NAN, mean, plain, ratio
from speedbench.metrics.speedup import speedup
from speedbench.metrics.stored import CATEGORY_KEYS, PROMPT_KEYS, PromptRow
from speedbench.metrics.table import Requests
from speedbench.records import RequestRecord

# both clocks: a category's headline is read from its point's headline clock (metrics/headline.py)
_SPEEDUP = ("speedup_mean", "speedup_ci_low", "speedup_ci_high", "speedup_pairs",
            "speedup_engine_mean", "speedup_engine_ci_low", "speedup_engine_ci_high")


def _in_order(keys: Iterable[tuple], baseline_arm: str | None, arm_order: Sequence[str] | None) -> list[tuple]:
    """Keys (arm, concurrency, variant, ...) sorted: arms in the scenario's order (the
    baseline first when no order is given), then concurrency, variant and the rest.
    Never the order the records happen to come in: a gathered Slurm run concatenates
    its jobs' records in whatever order the jobs finished."""
    order = {a: i for i, a in enumerate(arm_order or ([baseline_arm] if baseline_arm else []))}
    return sorted(keys, key=lambda k: (order.get(k[0], len(order)), str(k[0]), k[1], str(k[2]), str(k[3])))


def breakdown_rows(records: Iterable[RequestRecord], by: str, baseline_arm: str | None = None,
                   arm_order: Sequence[str] | None = None, *,
                   levels: Mapping[tuple[str, int, str], float] | None = None,
                   intervals: bool = True) -> list[dict[str, Any]]:
    """Per (arm, concurrency, variant, ``by``) over ok measured requests: mean per-user TPS,
    the baseline's for the same group, AL pooled over steps and as the mean over requests,
    and the paired speedup against the baseline's group with its bootstrap interval
    (:func:`speedup`). ``by``: ``"category"`` or ``"prompt_id"``.

    ``levels``: the confidence level of a stopped point's intervals, by (arm, concurrency,
    variant). The run looked at that point several times before it stopped, so every
    interval taken from its requests is at the look level, as its row's is
    (``stopping.looks.look_level``); other points' are 95%. ``intervals=False`` leaves the
    bootstrap out (a prompt's few requests: the ratio of means is all its row keeps).
    ``records``: a ``Requests`` (metrics/table.py) shares its request table."""
    df = Requests.of(records).where(lambda t: ~t["warmup"] & t["ok"])
    if len(df) == 0:
        return []
    groups = {(a, int(c), v, x): g for (a, c, v, x), g in df.groupby(["arm", "concurrency", "variant", by], sort=False)}
    out = []
    for key in _in_order(groups, baseline_arm, arm_order):
        arm, conc, variant, _ = key
        base = groups.get((baseline_arm, *key[1:])) if baseline_arm not in (None, arm) else None
        level = (levels or {}).get((arm, conc, variant), 0.95)
        out.append({"arm": arm, "concurrency": conc, "variant": variant, by: key[3],
                    **_figures(groups[key], base, level if intervals else None)})
    return out


def _figures(g: pd.DataFrame, base: pd.DataFrame | None, level: float | None) -> dict[str, Any]:
    acc = acceptance(g)
    tps, b_tps = mean(g["per_user_tps"]), mean(base["per_user_tps"]) if base is not None else NAN
    out = {"category": str(g["category"].iloc[0]), "n_ok": len(g), "per_user_tps": tps,
           "baseline_per_user_tps": b_tps, "speedup": ratio(tps, b_tps),
           "al_tokens": acc["al_tokens"], "al_requests": acc["al_requests"],
           **{k: NAN for k in _SPEEDUP}, "speedup_pairs": 0}
    if base is not None and level is not None:
        sp = speedup(g, base, level=level)
        out.update({k: sp[k] for k in _SPEEDUP})
    return out


def category_rows(records: Iterable[RequestRecord], baseline_arm: str | None = None,
                  arm_order: Sequence[str] | None = None, *,
                  levels: Mapping[tuple[str, int, str], float] | None = None) -> list[dict[str, Any]]:
    """summary.json's ``categories``: :func:`breakdown_rows` by category."""
    rows = breakdown_rows(records, "category", baseline_arm, arm_order, levels=levels)
    return [{k: plain(r["per_user_tps"] if k == "per_user_tps_mean" else r[k]) for k in CATEGORY_KEYS}
            for r in rows]


def prompt_rows(records: Iterable[RequestRecord], baseline_arm: str | None = None,
                arm_order: Sequence[str] | None = None) -> list[PromptRow]:
    """The report's per-prompt table: :func:`breakdown_rows` by prompt, every turn and
    repeat of the prompt together; its speedup is the ratio of the two arms' mean TPS."""
    rows = breakdown_rows(records, "prompt_id", baseline_arm, arm_order, intervals=False)
    return [PromptRow(**{k: plain(r[k]) for k in PROMPT_KEYS}) for r in rows]
