"""Fail-fast readiness against REAL vLLM (CPU build, tiny fixtures), where the behaviour
comes from vLLM: ``--api-key`` makes vLLM answer 401 on /v1 paths. speedbench gives its
client the key the scenario gave the server, so the run completes; a client key that
differs stops the wait as soon as vLLM answers (not at ready_timeout_s), with the fix.
The key is never written to the run folder nor printed. The fake-server versions are in
tests/integration/test_readiness.py.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from speedbench.fixtures.assemble import ensure_tiny

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed"),
]

REPO = Path(__file__).resolve().parents[2]
CPU_TINY = REPO / "scenarios" / "cpu_tiny.yaml"
TAG_VAR = "SPEEDBENCH_TEST_TAG"
KEY, WRONG = "sk-PLANTEDvllmkey86420", "sk-PLANTEDnotthekey13579"
SMALL = ["--arms", "baseline", "--set", "concurrency=[1]", "--set", "workload.num_prompts=4", "--set", "repeats=1",
         "--set", "aa_check=false", "--set", f"server.args.api-key={KEY}", "--skip-doctor"]


@pytest.fixture(scope="module", autouse=True)
def fixtures():
    ensure_tiny(REPO / ".fixtures" / "tiny")


def env_for(tag: str, **extra: str) -> dict[str, str]:
    return {**os.environ, TAG_VAR: tag, "COLUMNS": "250", **extra}


def the_run(out: Path) -> Path:
    runs = sorted(p for p in out.glob("*/*") if p.is_dir())
    assert len(runs) == 1, runs
    return runs[0]


def test_wrong_client_key_fails_at_vllms_first_answer(vllm_slot, tmp_path):
    """The client's key comes from server.api_key_env (it wins over the server's own key)."""
    tag = uuid.uuid4().hex
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "speedbench.cli", "run", str(CPU_TINY), "-o", str(out), *SMALL,
         "--set", "server.api_key_env=SPEEDBENCH_TEST_CLIENT_KEY", "--set", "server.ready_timeout_s=400"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
        env=env_for(tag, SPEEDBENCH_TEST_CLIENT_KEY=WRONG))
    t_up = None  # when vLLM's API server started answering
    deadline = time.monotonic() + 500
    while proc.poll() is None and time.monotonic() < deadline:
        logs = list(out.glob("*/*/logs/baseline.log"))
        if t_up is None and logs and "Application startup complete" in logs[0].read_text(errors="replace"):
            t_up = time.monotonic()
        time.sleep(0.2)
    t_end = time.monotonic()
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, output
    assert t_up is not None, "vLLM never logged 'Application startup complete'"
    print(f"wrong key: stopped {t_end - t_up:.1f} s after vLLM started answering")
    # the readiness wait ends at the first 401 (a poll every second); what follows is the
    # server's stop, which may take its whole shutdown grace (20 s) and the kill's 10 s on a
    # loaded host. The fault this exists for is waiting out ready_timeout_s (400 s).
    assert t_end - t_up < 10 + 20 + 10, f"{t_end - t_up:.1f} s after vLLM answered"
    assert "not ready after" not in output
    assert "401 Unauthorized" in output and "rejects the API key" in output and "fix:" in output
    assert KEY not in output and WRONG not in output
