"""The summary side of sequential stopping, recomputed from the records and points.json:
summary.json's ``stopping`` block (one entry per stopped round) and the widening of a
stopped point's speedup intervals to the look level (docs/metrics.md, "Sequential
stopping")."""

from __future__ import annotations

import math
from typing import Any

from speedbench.analysis.cells import num
from speedbench.metrics.table import request_table
from speedbench.stopping.looks import look_level, point_looks, round_rows


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


def widen_rows(rows: list[dict[str, Any]], stopping: list[dict[str, Any]]) -> None:
    """A stopped point's 95% interval over its pairs ignores the looks; widen it (in
    place) to cover the look-level interval of each of its stopped rounds, and say so."""
    by_point: dict[tuple, list[dict[str, Any]]] = {}
    for s in stopping:
        by_point.setdefault((s["arm"], s["concurrency"], s["variant"]), []).append(s)
    for r in rows:
        entries = by_point.get((r["arm"], r["concurrency"], r["variant"] or ""), [])
        widened = [_widen(r, entries, "speedup", "ci"), _widen(r, entries, "speedup_engine", "engine_ci")]
        if not any(widened):
            continue
        e = entries[0]
        if r.get("speedup_pairs") == r.get("n_ok"):
            # every request of the stopped arm is paired: the baseline's extra prompts are
            # the looks it ran beyond this arm's stop, not prompts this arm lost
            r["speedup_mean_all"] = math.nan
            r["warnings"] = [w for w in r.get("warnings", []) if "completed different prompts" not in w]
        r["warnings"] = [*r.get("warnings", []),
                         f"sequential stopping: {e['reason']} after {e['prompts']} prompts (look {e['look']} of "
                         f"{e['n_looks']}); the speedup intervals are taken at the look level {e['level']:.4f} "
                         f"(Bonferroni over the looks), wider than a plain 95% interval"]


def _widen(row: dict[str, Any], entries: list[dict[str, Any]], prefix: str, entry_prefix: str) -> bool:
    """Widen ``<prefix>_ci_low/high`` of one row to the look-level intervals; False without any."""
    lows = [s[f"{entry_prefix}_low"] for s in entries if math.isfinite(num(s.get(f"{entry_prefix}_low")))]
    highs = [s[f"{entry_prefix}_high"] for s in entries if math.isfinite(num(s.get(f"{entry_prefix}_high")))]
    if not lows or not highs:
        return False
    lo, hi = row.get(f"{prefix}_ci_low"), row.get(f"{prefix}_ci_high")
    row[f"{prefix}_ci_low"] = min([*lows, *([lo] if math.isfinite(num(lo)) else [])])
    row[f"{prefix}_ci_high"] = max([*highs, *([hi] if math.isfinite(num(hi)) else [])])
    return True
