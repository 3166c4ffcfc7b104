"""speedbench's copy of vLLM's CPU attention-kernel rule (engine/vllm/host_cpu.py) against
vLLM's own function, on this host, with AMX played both ways. vLLM does not log its
choice, so provenance re-derives it; this keeps the two from drifting apart.

vLLM's choices are read in a child Python: importing vLLM imports torch and triton,
whose bindings print "nanobind: leaked ..." lines when the importing process exits, and
the test process's last lines should be pytest's."""

from __future__ import annotations

import importlib.util
import json
import platform
import subprocess
import sys

import pytest

from speedbench.engine.vllm.host_cpu import attention_kernel

# No server starts here, only an import of vLLM in a child, so this runs in the integration
# tier beside the others rather than on the real-vLLM tier's one-at-a-time path.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed")

DTYPES, BLOCKS, HEADS = ("bfloat16", "float16", "float32"), (16, 32, 128), (32, 64, 80, 128)
VLLMS_CHOICES = f"""
import json, torch
from vllm.v1.attention.backends import cpu_attn
out = {{}}
for amx in (False, True):
    torch.cpu._is_amx_tile_supported = lambda amx=amx: amx
    for name in {DTYPES!r}:
        for block in {BLOCKS!r}:
            for head in {HEADS!r}:
                out[f"{{amx}} {{name}} {{block}} {{head}}"] = cpu_attn._get_attn_isa(getattr(torch, name), block, head)
print("CHOICES " + json.dumps(out), flush=True)
"""


@pytest.fixture(scope="module")
def vllms_choices() -> dict[str, str]:
    proc = subprocess.run([sys.executable, "-c", VLLMS_CHOICES], capture_output=True, text=True, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("CHOICES ")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line.removeprefix("CHOICES "))


@pytest.mark.parametrize("amx", [False, True], ids=["no-amx", "amx"])
def test_kernel_rule_matches_vllms_own(vllms_choices, amx):
    facts = {"amx": amx, "arch": platform.machine()}
    checked = 0
    for name in DTYPES:
        for block in BLOCKS:
            for head in HEADS:
                assert attention_kernel(name, block, head, facts) == vllms_choices[f"{amx} {name} {block} {head}"], \
                    (name, block, head, amx)
                checked += 1
    assert checked == 36
