"""Reliability (issue 7) against REAL vLLM (CPU build, tiny fixtures): Ctrl-C while vLLM
serves, which a fake cannot stand in for. ``speedbench run scenarios/cpu_tiny.yaml`` runs
as a subprocess, exactly as a user runs it; it needs one full start (~50 s). A bad flag
and a wrong model path fail inside vLLM's own start-up, before any server exists:
tests/integration/test_vllm_refusals.py.

Orphans: the speedbench subprocess carries a unique ``SPEEDBENCH_TEST_TAG`` in its
environment, which vLLM and every worker it forks inherit; afterwards no live process
may carry it, and the pid / process group in provenance.json must be gone.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import time

import pytest

from speedbench.engine.local import _group_alive
from speedbench.fixtures.assemble import ensure_tiny
from tests.helpers.vllm_runs import CPU_TINY, REPO, assert_no_orphans, cmd, env_for, n_records, points, server_process

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed"),
]


@pytest.fixture(scope="module", autouse=True)
def fixtures():
    ensure_tiny(REPO / ".fixtures" / "tiny")


# ---- 2. killed mid-run: tests/e2e/test_engine_death_vllm.py (the worker gets SIGKILL / SIGILL) ----


# ---- 9. Ctrl-C ------------------------------------------------------------------------------


def test_ctrl_c_stops_vllm_saves_and_hints_resume(vllm_slot, tmp_path, tag):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        cmd("run", str(CPU_TINY), "-o", str(out), "--skip-doctor", "--arms", "baseline",
            "--set", "concurrency=[1,4]", "--set", "workload.max_tokens=200", "--set", "workload.num_prompts=16",
            "--set", "workload.warmup=0"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env_for(tag),
        # A foreground process in a terminal has SIGINT at its default. When the tests
        # themselves run in the background of a non-interactive shell, SIGINT arrives
        # ignored (POSIX) and Python would inherit that, so restore the terminal's case.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 500
        run = None
        while time.monotonic() < deadline and proc.poll() is None:
            runs = list(out.glob("*/*"))
            run = runs[0] if runs else None
            if run and n_records(run) >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None and run is not None, "the run ended before Ctrl-C"
        sp = server_process(run, "baseline")
        t_int = time.monotonic()
        # A terminal's Ctrl-C reaches speedbench's process group only; vLLM runs in its
        # own session, so speedbench must stop it.
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
        stop_s = time.monotonic() - t_int
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(f"SIGINT -> exit 130 after {stop_s:.1f} s")
    assert proc.returncode == 130, output
    assert stop_s < 45, f"{stop_s:.1f} s from SIGINT to exit"
    assert f"speedbench run --resume {run}" in output
    assert "Traceback" not in output
    assert (run / "summary.json").exists()
    pts = points(run)
    assert pts[("baseline", 1, "")]["status"] == "interrupted"
    assert ("baseline", 4, "") not in pts
    assert n_records(run) >= 2
    errors = {json.loads(x)["error"] for x in (run / "records.jsonl").read_text().splitlines()}
    assert errors <= {None, "cancelled"}, errors  # vLLM's abort on our SIGTERM is not a server error
    assert sp and not _group_alive(sp["pgid"])
    assert_no_orphans(tag, run)
