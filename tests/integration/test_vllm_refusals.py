"""vLLM refusing to start, for real (CPU build): a bad flag and a wrong model path fail
inside vLLM's own start-up, before a model loads or a server answers, so these run in the
integration tier beside the real-vLLM tier's one server (they hold no vLLM lock). The
run's other arm, an endpoint on the fake server, still runs; the cause is read from
vLLM's log and leads the message; nothing is left running. Ctrl-C while vLLM serves is
tests/e2e/test_reliability_vllm.py.
"""

from __future__ import annotations

import importlib.util
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from speedbench.fixtures.assemble import ensure_tiny
from speedbench.testing import FakeConfig
from speedbench.testing.hosting import FakeServer
from tests.helpers.vllm_runs import CPU_TINY, REPO, assert_no_orphans, cmd, env_for, points, the_run

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed")


@pytest.fixture(scope="module", autouse=True)
def fixtures():
    ensure_tiny(REPO / ".fixtures" / "tiny")


def with_external_arm(tmp_path: Path, base_url: str) -> Path:
    """cpu_tiny with its baseline arm plus an arm on an already-running (fake) endpoint."""
    data = yaml.safe_load(CPU_TINY.read_text())
    data["arms"] = [a for a in data["arms"] if a["name"] == "baseline"] + [{"name": "ext", "base_url": base_url}]
    data["concurrency"] = [1]
    data["workload"].update(num_prompts=3, warmup=0)
    data["gates"] = []
    path = tmp_path / "cpu_tiny_ext.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def fails_at_start(tmp_path: Path, tag: str, *sets: str) -> tuple[subprocess.CompletedProcess, float, Path]:
    with FakeServer(FakeConfig(t_step_s=0.002, output_tokens=8)) as ext:
        scen = with_external_arm(tmp_path, ext.base_url)
        t0 = time.monotonic()
        args = [a for s in sets for a in ("--set", s)]
        res = subprocess.run(cmd("run", str(scen), "-o", str(tmp_path / "out"), "--skip-doctor", *args),
                             capture_output=True, text=True, cwd=REPO, env=env_for(tag), timeout=600,
                             check=False)
        elapsed = time.monotonic() - t0
    return res, elapsed, the_run(tmp_path / "out")


# ---- 1. never ready -----------------------------------------------------------------------


def test_bad_flag_fails_fast_with_log_tail_other_arm_runs(tmp_path, tag):
    res, elapsed, run = fails_at_start(tmp_path, tag, "server.args.no-such-flag=true")
    text = res.stdout + res.stderr
    print(f"bad flag: run ended after {elapsed:.1f} s (ready_timeout_s 400)")
    assert res.returncode == 1, text
    assert "Traceback" not in res.stdout  # vLLM's own traceback may be in the log tail, not ours
    # the cause, read from vLLM's log, leads the message
    assert "arm 'baseline': vLLM refused its configuration: unrecognized arguments: --no-such-flag while starting" \
        in text, text
    assert "--no-such-flag" in text  # from vLLM's log tail
    assert "--- last 30 lines of" in text
    assert elapsed < 400, f"{elapsed:.0f} s: not within ready_timeout_s"
    pts = points(run)
    assert pts[("baseline", 1, "")]["status"] == "failed"
    assert pts[("ext", 1, "")]["status"] == "ok"
    assert_no_orphans(tag, run)


def test_wrong_model_path_fails_with_log_tail(tmp_path, tag):
    res, elapsed, run = fails_at_start(tmp_path, tag, "server.model=/nonexistent/tiny-target",
                                       "server.ready_timeout_s=240")
    text = res.stdout + res.stderr
    print(f"wrong model path: run ended after {elapsed:.1f} s (ready_timeout_s 240)")
    assert res.returncode == 1, text
    assert "arm 'baseline': " in text and "while starting" in text
    assert "/nonexistent/tiny-target" in text  # vLLM names the path in its log tail
    assert elapsed < 240, f"{elapsed:.0f} s"
    assert points(run)[("ext", 1, "")]["status"] == "ok"
    assert_no_orphans(tag, run)
