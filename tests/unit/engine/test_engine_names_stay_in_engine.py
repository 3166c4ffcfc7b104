"""vLLM's names live in engine/ only: its Prometheus metric names (``vllm:``), its request
field (``return_token_ids``), its parallelism and measurement flags and its CPU build's
variables appear nowhere in speedbench outside engine/ and the fake server that copies
vLLM (testing/). Everything else reaches them through the run's Engine (engine/base.py),
so a second engine is one new folder."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "speedbench"
ALLOWED = (PACKAGE / "engine", PACKAGE / "testing")
NAMES = ("vllm:", "return_token_ids", "--tensor-parallel-size", "--per-request-", "--served-model-name",
         "VLLM_CPU_", "V31_FLAGS", "prompt_token_ids", "return_tokens_as_token_ids", "token_id:")


def test_no_vllm_wire_name_outside_engine_and_the_fake():
    found = [f"{f.relative_to(ROOT)}:{i}: {line.strip()}"
             for f in sorted(PACKAGE.rglob("*.py")) if not any(f.is_relative_to(a) for a in ALLOWED)
             for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
             if any(name in line for name in NAMES)]
    assert not found, "vLLM wire names outside engine/ and testing/:\n" + "\n".join(found)
