"""When a comparison's arms ran under materially different conditions: confounded.

Each round of each point records what the host was doing while it ran
(run/conditions.py, points.json's ``conditions``). A speedup divides one arm's per-user
TPS by the baseline's at the same point and round; when other work on the host took a
different share of it in the two (a neighbour job, a test suite, a CPU hog), or a
hypervisor stole a different share, or a GPU ran at another clock, the ratio measures
the host as much as the draft. Such a comparison is **confounded**: the report names it
beside the figure with both arms' conditions, and ``gate`` counts it as missing data.

The thresholds come from runs on the 2-core development host with a CPU hog started
between the arms (docs/metrics.md, "Conditions"). Pure: reads points.json's entries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from speedbench.records import PointKey

# other work's share of the host's CPUs may differ by this much between two arms' rounds
OTHER_SHARE_MAX_DIFF = 0.15
STEAL_SHARE_MAX_DIFF = 0.05
SM_CLOCK_MAX_REL_DIFF = 0.10  # GPU SM clock, relative (throttling, a clock change between arms)
TEMPERATURE_MAX_DIFF_C = 15.0
POWER_MAX_REL_DIFF = 0.25

CHECKED_CPU = "other work's share of the host's CPUs (/proc/stat less the engine's and client's own CPU)"
CHECKED_STEAL = "CPU steal"
CHECKED_GPU = "GPU SM clock, power, temperature and other processes (nvidia-smi)"
NO_GPU = "GPU SM clock, power, temperature: no nvidia-smi on this host"


def _mean(pair: Any) -> float:
    vals = [float(x) for x in (pair if isinstance(pair, list) else [pair]) if isinstance(x, (int, float))]
    return sum(vals) / len(vals) if vals else math.nan


def other_share(c: Mapping[str, Any]) -> float:
    """Other work's share of the host's CPUs over the round (NaN: not measured)."""
    other, cpus = c.get("other_cores"), c.get("cpus")
    return float(other) / float(cpus) if isinstance(other, (int, float)) and cpus else math.nan


def _gpu_diffs(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    out = []
    for ga in a.get("gpus") or []:
        gb = next((g for g in b.get("gpus") or [] if g.get("index") == ga.get("index")), None)
        if gb is None:
            continue
        i = ga.get("index")
        ca, cb = _mean(ga.get("sm_clock_mhz")), _mean(gb.get("sm_clock_mhz"))
        if ca > 0 and cb > 0 and abs(ca - cb) / max(ca, cb) > SM_CLOCK_MAX_REL_DIFF:
            out.append(f"GPU {i} SM clock {cb:.0f} vs {ca:.0f} MHz")
        pa, pb = _mean(ga.get("power_w")), _mean(gb.get("power_w"))
        if pa > 0 and pb > 0 and abs(pa - pb) / max(pa, pb) > POWER_MAX_REL_DIFF:
            out.append(f"GPU {i} power {pb:.0f} vs {pa:.0f} W")
        ta, tb = _mean(ga.get("temperature_c")), _mean(gb.get("temperature_c"))
        if abs(ta - tb) > TEMPERATURE_MAX_DIFF_C:
            out.append(f"GPU {i} temperature {tb:.0f} vs {ta:.0f} C")
    oa, ob = a.get("gpu_other_processes"), b.get("gpu_other_processes")
    if isinstance(oa, int) and isinstance(ob, int) and oa != ob:
        out.append(f"other GPU processes {ob} vs {oa}")
    return out


def differences(arm: Mapping[str, Any], base: Mapping[str, Any]) -> list[str]:
    """Why two rounds' conditions differ materially ([] when they do not, or when neither
    side measured a figure). The arm's figure comes first, then the baseline's."""
    out = []
    sa, sb = other_share(arm), other_share(base)
    if math.isfinite(sa) and math.isfinite(sb) and abs(sa - sb) > OTHER_SHARE_MAX_DIFF:
        out.append(f"other work took {sa:.0%} of the CPUs vs {sb:.0%} for the baseline")
    ta, tb = arm.get("steal_share"), base.get("steal_share")
    if isinstance(ta, (int, float)) and isinstance(tb, (int, float)) and abs(ta - tb) > STEAL_SHARE_MAX_DIFF:
        out.append(f"CPU steal {ta:.0%} vs {tb:.0%} for the baseline")
    return out + _gpu_diffs(base, arm)


def describe(c: Mapping[str, Any]) -> str:
    """One arm's conditions in a few words: 'other work 48% of 2 CPUs, load 3.1-5.2, engine 0.9 cores'."""
    parts = []
    share = other_share(c)
    if math.isfinite(share):
        parts.append(f"other work {share:.0%} of {c.get('cpus')} CPUs")
    loads = [x for x in c.get("load_1m") or [] if isinstance(x, (int, float))]
    if loads:
        parts.append("load " + "-".join(f"{x:.1f}" for x in loads))
    if isinstance(c.get("engine_cores"), (int, float)):
        parts.append(f"engine {c['engine_cores']:.2f} cores")
    steal = c.get("steal_share")
    if isinstance(steal, (int, float)) and steal > 0:
        parts.append(f"steal {steal:.0%}")
    return ", ".join(parts) or "not measured"


def _round_key(p: Mapping[str, Any]) -> tuple[int, str, Any, int]:
    return int(p.get("concurrency") or 0), str(p.get("variant") or ""), p.get("request_rate"), int(p.get("repeat") or 0)


def _checked(rounds: list[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    conds = [p["conditions"] for p in rounds if isinstance(p.get("conditions"), dict)]
    if not conds:
        return [], ["run conditions: not recorded (a run folder from before they were)"]
    checked = []
    if any(math.isfinite(other_share(c)) for c in conds):
        checked.append(CHECKED_CPU)
    if any("steal_share" in c for c in conds):
        checked.append(CHECKED_STEAL)
    checked.append(CHECKED_GPU) if any(c.get("gpus") for c in conds) else None
    missing = sorted({m for c in conds for m in c.get("not_checked") or []})
    return checked, missing + ([] if any(c.get("gpus") for c in conds) else [NO_GPU])


def conditions_block(rounds: Mapping[tuple[PointKey, int], Mapping[str, Any]], baseline: str | None) -> dict[str, Any]:
    """summary.json's ``conditions``: what was checked and what could not be, and one entry
    per compared point (an arm against the baseline, round by round), confounded or not."""
    marks = list(rounds.values())
    checked, missing = _checked(marks)
    base = {_round_key(p): p.get("conditions") for p in marks if p.get("arm") == baseline}
    points: dict[tuple[str, int, str], dict[str, Any]] = {}
    for p in sorted(marks, key=lambda p: (str(p.get("arm")), _round_key(p))):
        arm, c = str(p.get("arm")), p.get("conditions")
        b = base.get(_round_key(p))
        if arm == baseline or not isinstance(c, dict) or not isinstance(b, dict):
            continue
        key = (arm, int(p.get("concurrency") or 0), str(p.get("variant") or ""))
        e = points.setdefault(key, {"arm": key[0], "concurrency": key[1], "variant": key[2], "confounded": False,
                                    "why": [], "rounds": []})
        why = differences(c, b)
        e["rounds"].append({"repeat": int(p.get("repeat") or 0), "arm": describe(c), "baseline": describe(b),
                            "why": why})
        if why:
            e["confounded"] = True
            e["why"] += [f"round {int(p.get('repeat') or 0) + 1}: {w}" for w in why]
    return {"checked": checked, "not_checked": missing, "points": list(points.values())}


def confounded(block: Mapping[str, Any] | None, arm: str, concurrency: int, variant: str = "") -> str | None:
    """Why a point's comparison is confounded, or None (not confounded, or not compared)."""
    for e in (block or {}).get("points") or []:
        where = (e.get("arm"), int(e.get("concurrency") or 0), str(e.get("variant") or ""))
        if where == (arm, concurrency, variant) and e.get("confounded"):
            first: dict[str, Any] = next((r for r in e.get("rounds") or [] if r.get("why")), {})
            return "; ".join(e.get("why") or []) + (f" (arm: {first.get('arm')}; baseline: {first.get('baseline')})"
                                                     if first else "")
    return None
