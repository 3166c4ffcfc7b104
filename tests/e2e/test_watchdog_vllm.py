"""No server outlives speedbench, even when speedbench is SIGKILLed (issue 15), on the
real CPU vLLM: SIGKILL runs no teardown, so only the per-server watchdog
(speedbench/engine/watchdog.py) can stop vLLM's API process and its engine workers."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from speedbench.engine.local import _group_alive
from speedbench.fixtures.assemble import ensure_tiny

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed"),
]

REPO = Path(__file__).resolve().parents[2]
CPU_TINY = REPO / "scenarios" / "cpu_tiny.yaml"
TAG_VAR = "SPEEDBENCH_TEST_TAG"


def tagged(tag: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(TAG_VAR) == tag and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out


def test_sigkill_of_speedbench_takes_vllm_and_its_workers_down(vllm_slot, tmp_path):
    ensure_tiny(REPO / ".fixtures" / "tiny")
    tag = uuid.uuid4().hex
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "speedbench.cli", "run", str(CPU_TINY), "-o", str(out), "--skip-doctor",
         "--arms", "baseline", "--set", "concurrency=[1]", "--set", "workload.max_tokens=200",
         "--set", "workload.num_prompts=16", "--set", "workload.warmup=0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO, env={**os.environ, TAG_VAR: tag})
    sp = None
    try:
        deadline = time.monotonic() + 500
        while time.monotonic() < deadline and proc.poll() is None:
            runs = list(out.glob("*/*/records.jsonl"))
            if runs and runs[0].read_text().count("\n") >= 1:
                prov = json.loads((runs[0].parent / "provenance.json").read_text())
                sp = prov["baseline"]["server_process"]
                break
            time.sleep(0.2)
        assert proc.poll() is None and sp, "vLLM never served a request"
        workers = [p.pid for p in tagged(tag) if os.getpgid(p.pid) == sp["pgid"]]
        assert len(workers) >= 2, "expected vLLM's API process and at least one engine worker"
        t_kill = time.monotonic()
        proc.send_signal(signal.SIGKILL)  # the OOM killer's way: no handler, no teardown
        proc.wait()
        while _group_alive(sp["pgid"]) and time.monotonic() - t_kill < 60:
            time.sleep(0.2)
        gone_s = time.monotonic() - t_kill
        print(f"vLLM group {sp['pgid']} ({len(workers)} processes) gone {gone_s:.1f} s after SIGKILL of speedbench")
        assert not _group_alive(sp["pgid"]), f"vLLM's process group {sp['pgid']} outlived speedbench by 60 s"
        deadline = time.monotonic() + 10
        while tagged(tag) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [(p.pid, " ".join(p.cmdline())[:100]) for p in tagged(tag)]
        assert not left, f"processes left: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if sp and _group_alive(sp["pgid"]):
            os.killpg(sp["pgid"], signal.SIGKILL)  # never leave vLLM running for the next test
