"""What a run costs, before it starts (``--dry-run``) and after (``summary.json`` →
``arms``): server starts, measuring time, wall time and GPU-hours per arm.

The estimate prices each point from the latest earlier run of the same scenario under
the results folder when there is one (its points' mean end-to-end latency), and each
server start from the starts measured in earlier run folders, finished or not: the same
arm of a run with the same target model first, else any start of that target, else a
stated default for a large model on GPUs. It is a plan, not a promise: it says which
basis it used. A plan without GPUs reports server-hours, never "0.00 GPU-hours".
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from speedbench.engine.base import Engine
from speedbench.metrics.registry import SummaryRow
from speedbench.run.plan import ArmPlan, Plan

# Defaults when no earlier run is known: a large model's server start (weights, compile,
# warm-up) and a request's end-to-end time at 4096 output tokens and ~50 tok/s per user.
DEFAULT_START_S = 600.0
DEFAULT_PER_USER_TPS = 50.0
# SPEED-Bench's published sizes, for a dry-run that has not loaded the data: the
# qualitative config has 80 prompts per category, the throughput configs 512 per tier.
_PER_CATEGORY = {"qualitative": (80, 11)}
_PER_TIER = (512, 3)


# What a run folder takes, measured on runs of the CPU fixtures and the fake server: a
# record line is about 0.7 KB plus ~40 B per output token (its chunk stamps and text),
# and records.parquet holds them again; vLLM's /metrics text is 30-150 KB per snapshot,
# two per round of a point; a server log is rarely over a MiB.
RECORD_BYTES, TOKEN_BYTES, SNAPSHOT_BYTES, LOG_BYTES = 700, 40, 150_000, 1 << 20


def estimate_output_bytes(n_requests: int, max_tokens: int, n_rounds: int, n_launches: int) -> int:
    """An upper-end estimate of a run folder's size, for the free-space check."""
    return (2 * n_requests * (RECORD_BYTES + TOKEN_BYTES * max_tokens) + 2 * SNAPSHOT_BYTES * n_rounds
            + LOG_BYTES * n_launches)


def output_bytes(plan: Plan) -> int | None:
    """What the doctor's free-space check compares with (None until the data is loaded)."""
    if not plan.n_prompts:
        return None
    return estimate_output_bytes(plan.n_requests(), plan.scenario.workload.max_tokens, plan.n_points * plan.rounds,
                                 plan.n_launches)



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


def arm_gpus(ap: ArmPlan, engine: Engine) -> int:
    """GPUs an arm's server holds: its placed GPU set, else what the engine reads from its
    launch (tensor x pipeline x data parallel for vLLM; 0 on the CPU), 0 for an endpoint."""
    if ap.launch.gpus is not None:
        return len(ap.launch.gpus)
    return engine.gpus_per_server(ap.launch.argv, ap.launch.env) if ap.launched else 0


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


@dataclass
class MeasuredStarts:
    """Server start seconds measured in earlier run folders of the same target model."""

    by_arm: dict[str, list[float]] = field(default_factory=dict)
    runs: dict[str, str] = field(default_factory=dict)  # arm -> the newest run id its starts come from
    any_run: str = ""  # the newest run id with any start of the target

    @property
    def every(self) -> list[float]:
        return [s for v in self.by_arm.values() for s in v]

    def start_s(self, arm: str) -> tuple[float, str]:
        """(seconds, basis) for one arm's server start."""
        if self.by_arm.get(arm):
            return statistics.fmean(self.by_arm[arm]), f"measured starts, run {self.runs[arm]}"
        if self.every:
            return statistics.median(self.every), f"measured starts of the same target, run {self.any_run}"
        return DEFAULT_START_S, "default start"


def _run_starts(folder: Path) -> list[tuple[str, float]]:
    """(arm, start seconds) recorded in one run folder: its arms*.json (each server
    lifetime; written as it ends, so an unfinished run has them too)."""
    out: list[tuple[str, float]] = []
    for f in sorted(folder.glob("arms*.json")):
        try:
            entries = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for a in entries if isinstance(entries, list) else []:
            if isinstance(a, dict) and isinstance(a.get("start_s"), (int, float)) and a["start_s"] > 0:
                out.append((str(a.get("arm")), float(a["start_s"])))
    return out or _summary_starts(folder)


def _summary_starts(folder: Path) -> list[tuple[str, float]]:
    """The same starts as the summary's ``arms`` block keeps them (server_start_s per arm)."""
    try:
        arms = json.loads((folder / "summary.json").read_text(encoding="utf-8")).get("arms") or {}
    except (OSError, ValueError, AttributeError):
        return []
    return [(str(arm), float(x)) for arm, a in (arms.items() if isinstance(arms, dict) else [])
            if isinstance(a, dict) for x in a.get("server_start_s") or [] if isinstance(x, (int, float)) and x > 0]


def _target(folder: Path) -> str | None:
    """The target model a run folder's saved scenario served (None when unreadable)."""
    try:
        data = yaml.safe_load((folder / "scenario.resolved.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    server = data.get("server") if isinstance(data, dict) else None
    return str(server.get("model")) if isinstance(server, dict) and server.get("model") else None


def measured_starts(output_root: Path, plan: Plan) -> MeasuredStarts:
    """Every measured start of the plan's target under the results folder, newest run
    first (run ids begin with their UTC time). The scenario may differ: a start is the
    target's load and warm-up, which the workload does not change."""
    out, target = MeasuredStarts(), plan.scenario.server.model
    if not output_root.is_dir():
        return out
    folders = sorted((p for p in output_root.glob("*/*") if p.is_dir()), key=lambda p: p.name, reverse=True)
    for folder in folders:
        starts = _run_starts(folder)
        if not starts or (_target(folder) != target and folder.parent.name != plan.scenario.name):
            continue
        out.any_run = out.any_run or folder.name
        for arm, sec in starts:
            if arm not in out.runs:
                out.runs[arm] = folder.name
            if out.runs[arm] == folder.name:  # the newest run that measured this arm
                out.by_arm.setdefault(arm, []).append(sec)
    return out


def estimate(plan: Plan, output_root: Path | None = None) -> list[ArmCost]:
    sc = plan.scenario
    past = last_run(output_root, sc.name) if output_root is not None else None
    measured = measured_starts(output_root, plan) if output_root is not None else MeasuredStarts()
    e2e: dict[tuple[str, int], float] = {}
    if past:
        for row in map(SummaryRow.from_dict, past.get("rows") or []):
            if isinstance(row.e2e_s_mean, (int, float)):
                e2e[(row.arm, int(row.concurrency))] = float(row.e2e_s_mean)
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
        start, start_basis = measured.start_s(name) if ap.launched else (0.0, "")
        basis = _basis(past, any(a == name for a, _ in e2e), start_basis)
        out.append(ArmCost(name, plan.rounds if ap.launched else 0, start, measure * plan.rounds,
                           arm_gpus(ap, plan.engine), basis))
    return out


def _basis(past: dict[str, Any] | None, requests_known: bool, start_basis: str) -> str:
    """Where an arm's figures come from, in words ("run X" when one earlier run gave both)."""
    run_id = str((past or {}).get("run_id") or "")
    if requests_known and start_basis.endswith(f"measured starts, run {run_id}"):
        return f"run {run_id}"
    requests = f"requests from run {run_id}" if requests_known else "default request times"
    if start_basis.startswith("default") and not requests_known:
        return "defaults"
    return f"{requests}; {start_basis}" if start_basis else requests


def describe(costs: list[ArmCost], plan: Plan) -> list[str]:
    """Lines for the dry-run: the basis, per arm, then the total."""
    n, note = prompt_count(plan)
    lines = [f"  {n} prompts per point{note}; a request takes its measured mean end-to-end time from the "
             f"earlier run, else max_tokens / {DEFAULT_PER_USER_TPS:g} tok/s; a server start "
             f"{DEFAULT_START_S:g} s unless measured"]
    for c in costs:
        gpu = (f", {c.gpu_hours:.2f} GPU-hours on {c.gpus} GPU{'s' * (c.gpus != 1)}" if c.gpus
               else f", {c.wall_s / 3600:.2f} server-hours, no GPU")
        lines.append(f"  {c.arm}: about {c.wall_s / 60:.0f} min ({c.starts} x {c.start_s:.0f} s server start + "
                     f"{c.measure_s / 60:.1f} min measuring{gpu}; from {c.basis})")
    total = sum(c.wall_s for c in costs)
    if any(c.gpus for c in costs):
        lines.append(f"  total: about {total / 60:.0f} min of arm time, {sum(c.gpu_hours for c in costs):.2f} "
                     "GPU-hours (arms on disjoint GPUs run together, so the wall time can be shorter)")
    else:  # a CPU plan: GPU-hours would read 0.00, which prices nothing
        lines.append(f"  total: about {total / 60:.0f} min of arm time, {total / 3600:.2f} server-hours (no GPU)")
    return lines
