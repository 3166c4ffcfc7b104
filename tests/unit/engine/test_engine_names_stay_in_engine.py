"""vLLM's names live in engine/ only: its Prometheus metric names (``vllm:``), its request
fields (``return_token_ids``, ``ignore_eos``, ``add_special_tokens``,
``continuous_usage_stats``), its parallelism and measurement flags and its CPU build's
variables appear nowhere in speedbench outside engine/ and the fake server that copies
vLLM (testing/). Everything else reaches them through the run's Engine (engine/base.py),
so a second engine is one new folder."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "speedbench"
ALLOWED = (PACKAGE / "engine", PACKAGE / "testing")
NAMES = ("vllm:", "return_token_ids", "--tensor-parallel-size", "--per-request-", "--served-model-name",
         "VLLM_CPU_", "V31_FLAGS", "prompt_token_ids", "return_tokens_as_token_ids", "token_id:",
         "continuous_usage_stats")
# Request fields whose names have other, engine-neutral uses: the scenario's own
# ``workload.ignore_eos`` key, a tokenizer's ``add_special_tokens=`` argument. On the wire
# they are a body's keys, so a quoted name is what is looked for.
WIRE_KEYS = re.compile(r"""["'](ignore_eos|add_special_tokens)["']""")
# The scenario's key, named once as a string where it is declared (the dry-run shows it).
KEY_HOME = PACKAGE / "scenario" / "model.py"


def test_no_vllm_wire_name_outside_engine_and_the_fake():
    found = [f"{f.relative_to(ROOT)}:{i}: {line.strip()}"
             for f in sorted(PACKAGE.rglob("*.py")) if not any(f.is_relative_to(a) for a in ALLOWED)
             for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
             if any(name in line for name in NAMES) or (WIRE_KEYS.search(line) and f != KEY_HOME)]
    assert not found, "vLLM wire names outside engine/ and testing/:\n" + "\n".join(found)


def test_the_wire_keys_are_told_from_their_other_uses():
    assert WIRE_KEYS.search('body["ignore_eos"] = True') and WIRE_KEYS.search("{'add_special_tokens': False}")
    assert not WIRE_KEYS.search("ignore_eos: bool = False")  # the scenario's key (scenario/model.py)
    assert not WIRE_KEYS.search("tok.encode(text, add_special_tokens=False)")  # a tokenizer argument
