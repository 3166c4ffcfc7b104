"""When a comparison's arms ran under materially different conditions: confounded.

Each round of each point records what the host was doing while it ran
(run/conditions.py, points.json's ``conditions``). A speedup divides one arm's per-user
TPS by the baseline's at the same point and round; when other work on the host took a
different share of it in the two (a neighbour job, a test suite, a CPU hog) while the
host's CPUs were all busy, or a
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

from speedbench.metrics.cells import num
from speedbench.records import PointKey

# The CPUs left to the engine and the client (the host's, less other work's) may differ by
# this ratio between two arms' rounds, when the host was saturated in either: on the 2-core
# host an A/A twin read 1.19x to 1.35x where they differed by 1.24x to 1.41x (docs/metrics.md)
LEFT_MAX_RATIO = 1.10
SATURATED = 0.90  # the host's busy share at which its processes wait for a CPU
STEAL_SHARE_MAX_DIFF = 0.05
SM_CLOCK_MAX_REL_DIFF = 0.10  # GPU SM clock, relative (throttling, a clock change between arms)
TEMPERATURE_MAX_DIFF_C = 15.0
POWER_MAX_REL_DIFF = 0.25

CHECKED_CPU = "the CPUs left to the engine and client by other work (/proc/stat less their own CPU time)"
CHECKED_STEAL = "CPU steal"
CHECKED_GPU = "GPU SM clock, power, temperature and other processes (nvidia-smi, sampled during each point)"
NO_GPU = "GPU SM clock, power, temperature: no GPU sampled (no nvidia-smi here, or an endpoint's GPUs)"


def _mean(pair: Any) -> float:
    vals = [float(x) for x in (pair if isinstance(pair, list) else [pair]) if isinstance(x, (int, float))]
    return sum(vals) / len(vals) if vals else math.nan


def left(c: Mapping[str, Any]) -> float:
    """The CPUs other work left to the engine and the client over the round (NaN: not measured)."""
    cpus = num(c.get("cpus"))
    return cpus - num(c.get("other_cores")) if cpus > 0 else math.nan


def saturated(c: Mapping[str, Any]) -> bool:
    """Whether the host's CPUs were all busy: only then does other work take CPU the engine wanted."""
    busy, cpus = num(c.get("host_busy_cores")), num(c.get("cpus"))
    return cpus > 0 and busy >= SATURATED * cpus


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
    la, lb = left(arm), left(base)
    if (math.isfinite(la) and math.isfinite(lb) and min(la, lb) > 0 and (saturated(arm) or saturated(base))
            and max(la, lb) / min(la, lb) > LEFT_MAX_RATIO):
        out.append(f"other work left {la:.2f} CPUs to the engine and client vs {lb:.2f} for the baseline")
    ta, tb = arm.get("steal_share"), base.get("steal_share")
    if isinstance(ta, (int, float)) and isinstance(tb, (int, float)) and abs(ta - tb) > STEAL_SHARE_MAX_DIFF:
        out.append(f"CPU steal {ta:.0%} vs {tb:.0%} for the baseline")
    return out + _gpu_diffs(base, arm)


def describe(c: Mapping[str, Any]) -> str:
    """One arm's conditions in a few words: '1.08 of 2 CPUs left by other work (host saturated), load
    3.6-3.8, engine 1.06 cores'."""
    parts = []
    if math.isfinite(left(c)):
        parts.append(f"{left(c):.2f} of {c.get('cpus')} CPUs left by other work"
                     + (" (host saturated)" if saturated(c) else ""))
    loads = [x for x in c.get("load_1m") or [] if isinstance(x, (int, float))]
    if loads:
        parts.append("load " + "-".join(f"{x:.1f}" for x in loads))
    if isinstance(c.get("engine_cores"), (int, float)):
        parts.append(f"engine {c['engine_cores']:.2f} cores")
    steal = c.get("steal_share")
    if isinstance(steal, (int, float)) and steal > 0:
        parts.append(f"steal {steal:.0%}")
    return ", ".join(parts) or "not measured"


def _checked(rounds: list[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    conds = [p["conditions"] for p in rounds if isinstance(p.get("conditions"), dict)]
    if not conds:
        return [], ["run conditions: not recorded (a run folder from before they were)"]
    checked = []
    if any(math.isfinite(left(c)) for c in conds):
        checked.append(CHECKED_CPU)
    if any("steal_share" in c for c in conds):
        checked.append(CHECKED_STEAL)
    checked.append(CHECKED_GPU) if any(c.get("gpus") for c in conds) else None
    missing = sorted({m for c in conds for m in c.get("not_checked") or []})
    return checked, missing + ([] if any(c.get("gpus") for c in conds) else [NO_GPU])


def _wmean(conds: list[Mapping[str, Any]], key: str) -> float | None:
    """The wall-time-weighted mean of one figure over rounds (None: no round measured it)."""
    vals = [(num(c.get(key)), num(c.get("wall_s")) if num(c.get("wall_s")) > 0 else 1.0) for c in conds]
    vals = [(v, w) for v, w in vals if math.isfinite(v)]
    return sum(v * w for v, w in vals) / sum(w for _, w in vals) if vals else None


def pool(conds: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One point's conditions over its rounds, as its speedup pools them: CPU figures
    weighted by each round's wall time, the load's lowest start and highest end, each GPU's
    readings together."""
    starts = [num((c.get("load_1m") or [None])[0]) for c in conds]
    ends = [num((c.get("load_1m") or [None, None])[-1]) for c in conds]
    out: dict[str, Any] = {"cpus": conds[0].get("cpus"), "rounds": len(conds),
                           "load_1m": [min((x for x in starts if math.isfinite(x)), default=None),
                                       max((x for x in ends if math.isfinite(x)), default=None)]}
    for key in ("other_cores", "host_busy_cores", "engine_cores", "client_cores", "steal_share"):
        out[key] = _wmean(conds, key)
    gpus: dict[Any, dict[str, list[Any]]] = {}
    for c in conds:
        for g in c.get("gpus") or []:
            slot = gpus.setdefault(g.get("index"), {})
            for k in ("sm_clock_mhz", "power_w", "temperature_c"):
                v = g.get(k)
                slot.setdefault(k, []).extend(v if isinstance(v, list) else [v])
    out["gpus"] = [{"index": i, **v} for i, v in gpus.items()]
    others = [c["gpu_other_processes"] for c in conds if isinstance(c.get("gpu_other_processes"), int)]
    out["gpu_other_processes"] = max(others) if others else None
    return out


def conditions_block(rounds: Mapping[tuple[PointKey, int], Mapping[str, Any]], baseline: str | None) -> dict[str, Any]:
    """summary.json's ``conditions``: what was checked and what could not be, and one entry
    per compared point (an arm against the baseline), confounded or not. Each side's rounds
    are pooled first, as the point's speedup pools them: with rounds in ABBA order a load
    that came and went falls on both arms and into the interval, while a load that stayed
    on one arm's rounds is a difference the interval cannot see."""
    marks = list(rounds.values())
    checked, missing = _checked(marks)
    sides: dict[tuple[str, int, str, Any], list[Mapping[str, Any]]] = {}
    for p in marks:
        # the rounds the speedup pools: a failed or interrupted round's records are not in it
        if isinstance(p.get("conditions"), dict) and p.get("status") in ("ok", "partial"):
            key = (str(p.get("arm")), int(p.get("concurrency") or 0), str(p.get("variant") or ""),
                   p.get("request_rate"))
            sides.setdefault(key, []).append(p["conditions"])
    points = []
    for (arm, c, v, rate), conds in sorted(sides.items(), key=lambda kv: str(kv[0])):
        base = sides.get((str(baseline), c, v, rate))
        if arm == baseline:
            continue
        if not base:  # a reused baseline from before conditions were kept, or its rounds failed
            missing.append(f"{arm} c={c}{f' [{v}]' if v else ''}: the baseline's conditions were not recorded")
            continue
        a, b = pool(conds), pool(base)
        why = differences(a, b)
        points.append({"arm": arm, "concurrency": c, "variant": v, "confounded": bool(why), "why": why,
                       "rounds": len(conds), "arm_conditions": describe(a), "baseline_conditions": describe(b)})
    return {"checked": checked, "not_checked": missing, "points": points}
