"""No module outside speedbench/metrics and speedbench/report spells a summary-row key as
a string literal: they read rows through the names in speedbench/metrics/keys.py, so a
misspelt key fails at import (and in mypy) instead of rendering as an empty cell.

Which keys are covered: every registered metric key (ROW_METRICS outside the "identity"
section: counts, throughput, latency summaries, every speedup and interval key such as
``speedup_ci_low``, acceptance) and every latency-family key (``ttft_ms_p99``, ...).
Not covered, because the same word is also another file's field or an ordinary word:

- the identity keys (``arm``, ``concurrency``, ``variant``, ``template``, ``speculative``,
  ``method``, ``num_speculative_tokens``, ``eagle_version``): the scenario's, points.json's,
  provenance's and the records' own fields carry the same names;
- ``status``, ``failure``, ``warnings``: point states, job states and doctor checks use them;
- ``request_rate``, ``burstiness``, ``loop_lag_ms_max``: fields of points.json and of the
  scenario's load, which the row copies;
- ``acceptance_histogram``, ``draft_acceptance_rate``: fields of vLLM's per-request
  spec-decode payload (engine/vllm/payload.py, the fake server), which the row copies.

One place may spell covered keys: a pydantic ``Literal`` type only takes literals
(ALLOWED below says where, and why).
"""

from __future__ import annotations

import ast
from pathlib import Path

from speedbench.metrics import keys
from speedbench.metrics.registry import LATENCY_METRICS, ROW_METRICS, ROW_KEYS, latency_keys

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "speedbench"
OWNERS = ("metrics", "report")  # the packages that define and render rows
SHARED = {"status", "failure", "warnings", "request_rate", "burstiness", "loop_lag_ms_max", "acceptance_histogram",
          "draft_acceptance_rate"}
# (module, key): PromoteSpec.by names the row column a promotion ranks by, as a Literal type
ALLOWED = {("speedbench/scenario/traffic.py", "al_tokens"), ("speedbench/scenario/traffic.py", "al_requests")}


def covered(key: str) -> bool:
    if key in {m.key for m in ROW_METRICS if m.section != "identity"} - SHARED:
        return True
    for m in LATENCY_METRICS:  # <family>_mean, _std, _p<P> for any percentile P (p99_9 included)
        tail = key[len(m) + 1:] if key.startswith(m + "_") else ""
        if tail in ("mean", "std") or (tail.startswith("p") and tail[1:].replace("_", "").isdigit()):
            return True
    return False


def test_no_module_outside_metrics_and_report_spells_a_row_key():
    found = []
    for f in sorted(PACKAGE.rglob("*.py")):
        rel = f.relative_to(ROOT)
        if rel.parts[1] in OWNERS:
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and covered(node.value)
                    and (rel.as_posix(), node.value) not in ALLOWED):
                found.append(f"{rel}:{node.lineno} {node.value!r}")
    assert not found, "row keys spelt as strings (use speedbench.metrics.keys):\n" + "\n".join(found)


def test_the_check_covers_every_interval_and_latency_key():
    for key in ("speedup_ci_low", "speedup_engine_ci_high", "speedup_predicted_ci_low", "al_tokens", "n_ok",
                *latency_keys((50.0, 99.9))):
        assert covered(key), key
    assert not covered("arm") and not covered("status") and not covered("ttft_ms")


def test_each_name_is_its_registered_key_in_capitals():
    names = {n: v for n, v in vars(keys).items() if n.isupper()}
    assert names
    for name, key in names.items():
        assert key == name.lower() and key in ROW_KEYS, name
