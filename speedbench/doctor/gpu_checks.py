"""GPUs against what the scenario needs: count (tensor × pipeline × data parallel), model,
and memory other processes already hold. (What a checkpoint's quantization needs of the
GPUs is the engine's rule: vLLM's is in engine/vllm/host_checks.py.)"""

from __future__ import annotations

from collections import Counter

from speedbench.doctor.base import Check, Context
from speedbench.engine.gpus import GPU

# Another job holding more than this share of a GPU's memory skews the measurement (and
# vLLM sizes its KV cache from gpu-memory-utilization of the *total*, so it may not start).
BUSY_FRACTION = 0.05


def _need(ctx: Context) -> dict[str, int]:
    return {arm.name: ctx.gpus_needed.get(arm.name, 1) for arm in ctx.arms}


def _describe(gpus: list[GPU]) -> str:
    kinds = Counter((g.name, g.compute_cap, g.memory_total_mib) for g in gpus)
    parts = [f"{n}x {name} (compute {cap}, {mib // 1024} GiB)" for (name, cap, mib), n in kinds.items()]
    return ", ".join(parts) + (f", driver {gpus[0].driver}" if gpus else "")


def check_gpus(ctx: Context) -> list[Check]:
    probe = ctx.facts.gpus
    if not ctx.needs_gpu:
        return [_not_needed(ctx)]
    need = _need(ctx)
    most = max(need.values(), default=1)
    needs = f"this scenario needs {most} GPU{'s' if most > 1 else ''} per server (tensor x pipeline x data parallel)"
    if probe.status == "failed":
        first = probe.message.splitlines()[0] if probe.message else "nvidia-smi failed"
        fix = ("the kernel module and the user-space driver differ (typically after a driver upgrade): reboot, "
               "or reload the nvidia kernel modules" if "mismatch" in probe.message.lower()
               else "run nvidia-smi by hand and fix the driver first")
        return [Check("gpus", "fail", f"nvidia-smi failed: {first}; {needs}", fix)]
    if not probe.gpus:
        return [Check("gpus", "fail", f"no GPU found ({probe.message or 'nvidia-smi lists none'}); {needs}",
                      "run on a GPU host with the NVIDIA driver; on a CPU-only machine use scenarios/cpu_tiny.yaml")]
    out = _listed_gpus(ctx, need)
    gpus = ctx.gpu_list
    if len(gpus) < most:
        out.append(Check("gpus", "fail", f"{len(gpus)} usable: {_describe(gpus)}; {needs}",
                         "run on a host with more GPUs, or lower tensor-parallel-size "
                         "(which changes what is measured)"))
        return out
    detail = f"{_describe(gpus)}; {needs}"
    if len(gpus) >= 2 * most and len(ctx.arms) > 1:
        detail += f"; room for {len(gpus) // most} servers at once, so arms could run concurrently on disjoint GPU sets"
    if len({g.name for g in gpus}) > 1:
        out.append(Check("gpus", "warn",
                         detail + "; mixed GPU models: arms placed on different models are not comparable",
                         "pin every arm to the same model with server.gpus / arm gpus"))
    else:
        out.append(Check("gpus", "ok", detail))
    return out


def _not_needed(ctx: Context) -> Check:
    """The row when no arm launches a server on this host's GPUs, saying why."""
    why = {"cpu": f"{ctx.engine.origin} runs on the CPU", "external": "external endpoints only",
           "unknown": "no vLLM installed to tell"}.get(ctx.engine.kind, "no arm is launched here")
    have = f"; {len(ctx.facts.gpus.gpus)} present" if ctx.facts.gpus.gpus else ""
    return Check("gpus", "ok" if ctx.engine.kind != "unknown" else "warn", f"not needed: {why}{have}")


def _listed_gpus(ctx: Context, need: dict[str, int]) -> list[Check]:
    """GPUs the scenario names: server.gpus indices nvidia-smi does not show, and arms that
    list fewer GPUs than their server needs."""
    out = []
    present = ctx.facts.gpus.gpus
    wanted = ctx.scenario.server.gpus
    if wanted is not None:
        absent = sorted(set(wanted) - {g.index for g in present})
        if absent:
            out.append(Check("gpus", "fail",
                             f"server.gpus lists {absent}, which nvidia-smi does not show (it shows "
                             f"{[g.index for g in present]})",
                             "fix server.gpus (indices as nvidia-smi numbers them)"))
    for arm in ctx.arms:
        if arm.gpus is not None and len(arm.gpus) < need[arm.name]:
            out.append(Check("gpus", "fail", f"arm lists GPUs {arm.gpus} but its server needs {need[arm.name]}",
                             "list as many GPUs as tensor x pipeline x data parallel", arm.name))
    return out


def check_gpu_memory(ctx: Context) -> list[Check]:
    gpus = ctx.gpu_list
    if not ctx.needs_gpu or not gpus:
        return []
    busy = []
    for g in gpus:
        used = g.memory_used_mib if g.memory_used_mib is not None else g.process_memory_mib
        if used > BUSY_FRACTION * g.memory_total_mib:
            pids = ", ".join(f"pid {p.pid}" for p in g.processes)
            busy.append(f"GPU {g.index}: {used / 1024:.1f} of {g.memory_total_mib / 1024:.0f} GiB in use"
                        + (f" ({pids})" if pids else ""))
    if busy:
        return [Check("gpu memory", "warn", "other processes hold memory: " + "; ".join(busy),
                      "stop them, or pin the scenario to free GPUs with server.gpus; a shared GPU skews every timing")]
    return [Check("gpu memory", "ok", f"no other process holds more than {BUSY_FRACTION:.0%} of any GPU's memory")]
