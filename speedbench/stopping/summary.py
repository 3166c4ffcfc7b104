"""The summary side of sequential stopping, recomputed from the records and points.json:
summary.json's ``stopping`` block (one entry per stopped round). The widening of a stopped
point's speedup intervals to the look level happens when its row is built
(metrics/formulas.py; docs/metrics.md, "Sequential stopping")."""

from __future__ import annotations

from typing import Any

from speedbench.metrics.table import request_table
from speedbench.stopping.looks import point_looks, round_rows
from speedbench.stopping.schedule import look_level


def stopping_rows(records: list, points: dict, baseline: str | None, alpha: float) -> list[dict[str, Any]]:
    """One entry per stopped round of a point (points.json entries carrying
    ``stop_reason``): why and after how many prompts it stopped, and the speedup (and AL)
    with its interval at the look level, recomputed from the records."""
    table = request_table(records)
    out = []
    for (key, rnd), p in sorted(points.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        if not p.get("stop_reason"):
            continue
        n_looks = int(p.get("stop_looks") or 1)
        level = look_level(alpha, n_looks)
        base = round_rows(table, key._replace(arm=baseline), rnd) if baseline not in (None, key.arm) else None
        looks = point_looks(round_rows(table, key, rnd), base, level)
        sp, eng, al = looks["speedup"], looks["speedup_engine"], looks["al"]
        out.append({"arm": key.arm, "concurrency": key.concurrency, "variant": key.variant, "repeat": rnd,
                    "reason": p["stop_reason"], "prompts": p.get("stop_prompts"), "look": p.get("stop_look"),
                    "n_looks": n_looks, "level": level, "speedup": sp.estimate, "ci_low": sp.ci_low,
                    "ci_high": sp.ci_high, "speedup_engine": eng.estimate, "engine_ci_low": eng.ci_low,
                    "engine_ci_high": eng.ci_high, "al": al.estimate, "al_ci_low": al.ci_low, "al_ci_high": al.ci_high,
                    "lag_bound": sp.lag_bound})
    return out
