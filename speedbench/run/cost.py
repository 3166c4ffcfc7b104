"""What a run costs, before it starts (``--dry-run``) and after (``summary.json`` →
``arms``): server starts, measuring time, wall time and GPU-hours per arm.

The estimate prices each server start and each point from the latest earlier run of the
same scenario under the results folder when there is one (its arms' measured start
seconds and its points' mean end-to-end latency), else from stated defaults for a large
model on GPUs. It is a plan, not a promise: it says which basis it used.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedbench.metrics.keys import E2E_S_MEAN
from speedbench.doctor.base import parallel_size
from speedbench.run.plan import ArmPlan, Plan

# Defaults when no earlier run is known: a large model's server start (weights, compile,
# warm-up) and a request's end-to-end time at 4096 output tokens and ~50 tok/s per user.
DEFAULT_START_S = 600.0
DEFAULT_PER_USER_TPS = 50.0
# SPEED-Bench's published sizes, for a dry-run that has not loaded the data: the
# qualitative config has 80 prompts per category, the throughput configs 512 per tier.
_PER_CATEGORY = {"qualitative": (80, 11)}
_PER_TIER = (512, 3)


def prompt_count(plan: Plan) -> tuple[int, str]:
    """The measured prompts per point, and whether it is known or SPEED-Bench's size."""
    wl = plan.scenario.workload
    if plan.n_prompts:
        return plan.n_prompts, ""
    if wl.source == "speed_bench":
        per, n_all = _PER_CATEGORY.get(wl.config, _PER_TIER)
        groups = len(wl.categories) if wl.config == "qualitative" else len(wl.entropy_tiers)
        return per * (groups or n_all), f" ({wl.config} has {per} prompts per group)"
    return 0, " (prompt count unknown until the data is loaded)"


@dataclass
class ArmCost:
    arm: str
    starts: int  # server launches (one per round)
    start_s: float  # seconds per launch
    measure_s: float  # every point of every round, warmup included
    gpus: int  # GPUs the arm's server holds (0 on a CPU host)
    basis: str  # where the figures come from

    @property
    def wall_s(self) -> float:
        return self.starts * self.start_s + self.measure_s

    @property
    def gpu_hours(self) -> float:
        return self.wall_s / 3600 * self.gpus


def arm_gpus(ap: ArmPlan) -> int:
    """GPUs an arm's server holds: its placed GPU set, else tensor x pipeline x data
    parallel sizes from its argv when it will run on GPUs, else 0."""
    if ap.launch.gpus is not None:
        return len(ap.launch.gpus)
    if not ap.launched or "cpu" in " ".join(ap.launch.argv).lower() or ap.launch.env.get("VLLM_CPU_KVCACHE_SPACE"):
        return 0
    tp, pp, dp = parallel_size(ap.launch.argv)
    return tp * pp * dp


def last_run(output_root: Path, scenario: str) -> dict[str, Any] | None:
    """The newest summary.json of this scenario under the results folder that has arms costs."""
    folder = output_root / scenario
    if not folder.is_dir():
        return None
    for summary in sorted(folder.glob("*/summary.json"), reverse=True):
        try:
            data = json.loads(summary.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if data.get("arms"):
            return data
    return None


def estimate(plan: Plan, output_root: Path | None = None) -> list[ArmCost]:
    sc = plan.scenario
    past = last_run(output_root, sc.name) if output_root is not None else None
    e2e: dict[tuple[str, int], float] = {}
    starts: dict[str, float] = {}
    if past:
        for r in past.get("rows") or []:
            if isinstance(r.get(E2E_S_MEAN), (int, float)):
                e2e[(r["arm"], int(r["concurrency"]))] = float(r[E2E_S_MEAN])
        for arm, a in (past.get("arms") or {}).items():
            if a.get("server_start_s"):
                starts[arm] = sum(a["server_start_s"]) / len(a["server_start_s"])
    default_e2e = sc.workload.max_tokens / DEFAULT_PER_USER_TPS
    n, _ = prompt_count(plan)
    out = []
    for ap in plan.arms:
        name = ap.arm.name
        measure = 0.0
        for key in plan.points(name):
            per_request = e2e.get((name, key.concurrency), default_e2e)
            # open loop: the arrivals set the pace; closed loop: waves of `concurrency` requests
            point = n / key.rate + per_request if key.rate else math.ceil(n / key.concurrency) * per_request
            measure += point + math.ceil(plan.n_warmup / key.concurrency) * per_request
        start = starts.get(name, DEFAULT_START_S) if ap.launched else 0.0
        known = name in starts and any(a == name for a, _ in e2e)
        basis = f"run {past.get('run_id')}" if past and known else "defaults"
        out.append(ArmCost(name, plan.rounds if ap.launched else 0, start, measure * plan.rounds,
                           arm_gpus(ap), basis))
    return out


def describe(costs: list[ArmCost], plan: Plan) -> list[str]:
    """Lines for the dry-run: the basis, per arm, then the total."""
    n, note = prompt_count(plan)
    lines = [f"  {n} prompts per point{note}; a request takes its measured mean end-to-end time from the "
             f"earlier run, else max_tokens / {DEFAULT_PER_USER_TPS:g} tok/s; a server start "
             f"{DEFAULT_START_S:g} s unless measured"]
    for c in costs:
        gpu = f", {c.gpu_hours:.2f} GPU-hours on {c.gpus} GPU{'s' * (c.gpus != 1)}" if c.gpus else ", no GPU"
        lines.append(f"  {c.arm}: about {c.wall_s / 60:.0f} min ({c.starts} x {c.start_s:.0f} s server start + "
                     f"{c.measure_s / 60:.1f} min measuring{gpu}; from {c.basis})")
    total = sum(c.wall_s for c in costs)
    gpu_h = sum(c.gpu_hours for c in costs)
    lines.append(f"  total: about {total / 60:.0f} min of arm time, {gpu_h:.2f} GPU-hours "
                 f"(arms on disjoint GPUs run together, so the wall time can be shorter)")
    return lines
