"""speedbench's copy of vLLM's CPU attention-kernel rule (engine/host_cpu.py) against
vLLM's own function, on this host, with AMX played both ways. vLLM does not log its
choice, so provenance re-derives it; this keeps the two from drifting apart."""

from __future__ import annotations

import importlib.util
import platform

import pytest

from speedbench.engine.host_cpu import attention_kernel

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed"),
]


@pytest.mark.parametrize("amx", [False, True], ids=["no-amx", "amx"])
def test_kernel_rule_matches_vllms_own(monkeypatch, amx):
    import torch
    from vllm.v1.attention.backends import cpu_attn

    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    facts = {"amx": amx, "arch": platform.machine()}
    checked = 0
    for name, dtype in (("bfloat16", torch.bfloat16), ("float16", torch.float16), ("float32", torch.float32)):
        for block in (16, 32, 128):
            for head in (32, 64, 80, 128):
                assert attention_kernel(name, block, head, facts) == cpu_attn._get_attn_isa(dtype, block, head), \
                    (name, block, head, amx)
                checked += 1
    assert checked == 36
