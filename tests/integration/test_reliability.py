"""Reliability (issue 7): every fault speedbench promises to survive, injected for real.

Each test drives ``speedbench run`` as a subprocess, the way a user or CI does, against
the scripted fake server: in this process for HTTP-level faults (an external arm), or
launched *by speedbench* as a local server for process-lifecycle faults (its CLI takes
``--model/--host/--port`` like vLLM). The real-vLLM versions of the lifecycle faults
live in tests/e2e/test_reliability_vllm.py; docs/reliability.md maps faults to tests.

Orphans: every speedbench subprocess gets a unique ``SPEEDBENCH_TEST_TAG`` in its
environment, which every server it launches (and their workers) inherit. After each
run no live process may carry the tag, and the pids / process groups recorded in
provenance.json ``server_process`` must be gone.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import aiohttp
import psutil
import pytest
import yaml
from aiohttp import web

from speedbench.engine.base import LaunchSpec
from speedbench.secrets import REDACTED
from speedbench.engine.local import LocalServer, _group_alive
from speedbench.testing import FakeConfig
from speedbench.testing.hosting import FakeServer
from tests.helpers.cli_runs import (TAG_VAR, assert_no_orphans, fake_local, scenario, write_prompts, write_yaml)

# Stands in for `vllm serve` where a test needs a server that misbehaves at start.
# vLLM-only flags (--api-key, ...) are accepted and ignored, like the real server would
# accept them; --mode picks the fault.
FAKE_VLLM = '''\
import argparse, subprocess, sys, time
ap = argparse.ArgumentParser()
ap.add_argument("--mode", default="serve")
ap.add_argument("--host", default="127.0.0.1")
ap.add_argument("--port", default="0")
ap.add_argument("--model", default="fake-model")
a, _vllm_only = ap.parse_known_args()
if a.mode == "crash":
    print("api_server.py: error: unrecognized arguments: --no-such-flag", file=sys.stderr, flush=True)
    sys.exit(2)
if a.mode == "hang":
    subprocess.Popen(["sleep", "300"])  # a worker in the server's process group
    print("loading model weights ...", flush=True)
    time.sleep(300)
from speedbench.testing.fake_server import main
main(["--host", a.host, "--port", a.port, "--model", a.model, "--t-step", "0.002", "--output-tokens", "8"])
'''


# ---- helpers -------------------------------------------------------------------------


def sb_env(tag: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    # Wide console: rich wraps at 80 columns otherwise, splitting the messages we check.
    return {**os.environ, TAG_VAR: tag, "COLUMNS": "250", **(extra or {})}


def sb(args: list[str], *, tag: str, cwd: Path, env: dict[str, str] | None = None,
       timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "speedbench.cli", *args], capture_output=True, text=True,
                          env=sb_env(tag, env), cwd=cwd, timeout=timeout, check=False)


def out_of(res) -> str:
    return (res.stdout or "") + (res.stderr or "")


def the_run(out: Path) -> Path:
    runs = sorted(p for p in out.glob("*/*") if p.is_dir())
    assert len(runs) == 1, runs
    return runs[0]


def records(run: Path, name: str = "records.jsonl") -> list[dict]:
    p = run / name
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()] if p.exists() else []


def points(run: Path) -> dict[tuple[str, int, str], dict]:
    p = run / "points.json"
    data = json.loads(p.read_text()) if p.exists() else []
    return {(d["arm"], d["concurrency"], d["variant"]): d for d in data}


def point_of(rec: dict) -> tuple[str, int, str]:
    return rec["arm"], rec["concurrency"], rec["variant"]


class AuthProxy:
    """An endpoint that demands ``Authorization: Bearer KEY`` on /v1/* (as vLLM's --api-key
    does) and forwards to an upstream fake server; counts what it let through."""

    def __init__(self, upstream: str, key: str):
        self.upstream, self.key = upstream, key
        self.allowed = self.denied = 0
        self._loop = asyncio.new_event_loop()
        self.base_url = ""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/v1/") and request.headers.get("Authorization") != f"Bearer {self.key}":
            self.denied += 1
            return web.json_response({"error": {"message": "invalid API key"}}, status=401)
        self.allowed += request.path.startswith("/v1/")
        async with aiohttp.ClientSession() as s, s.request(
                request.method, self.upstream + request.path_qs, data=await request.read(),
                headers={"Content-Type": request.headers.get("Content-Type", "application/json")}) as up:
            resp = web.StreamResponse(status=up.status, headers={"Content-Type": up.headers.get("Content-Type", "")})
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp

    def __enter__(self) -> AuthProxy:  # noqa: PYI034
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        self._runner = runner
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()


# ---- 1. a server that never becomes ready -----------------------------------------------


def test_server_never_ready_other_arms_still_run(tmp_path, tag):
    """A server that exits at start (bad flag) and one that hangs past ready_timeout_s:
    both fail with the reason and the log tail, the external arm still runs, exit 1."""
    fake_vllm = tmp_path / "fake_vllm.py"
    fake_vllm.write_text(FAKE_VLLM)
    prompts = write_prompts(tmp_path / "p.jsonl", ["q0", "q1", "q2"])
    with FakeServer(FakeConfig(t_step_s=0.002, output_tokens=8)) as ext:
        sc = scenario("never_ready", prompts, server={"launcher": "local", "model": "fake-model", "model_arg": "flag",
                                                      "command": ["python", str(fake_vllm)], "ready_timeout_s": 5},
                      arms=[{"name": "crash", "args": {"mode": "crash"}},
                            {"name": "hang", "args": {"mode": "hang"}},
                            {"name": "ext", "base_url": ext.base_url}])
        res = sb(["run", str(write_yaml(tmp_path / "s.yaml", sc)), "-o", str(tmp_path / "out"), "--skip-doctor"],
                 tag=tag, cwd=tmp_path)
    text = out_of(res)
    assert res.returncode == 1, text
    assert "Traceback" not in text
    # the cause read from the log first, the server's own exit code after it
    assert "arm 'crash': vLLM refused its configuration: unrecognized arguments: --no-such-flag while starting" \
        in text and "exited with code 2)" in text
    assert "unrecognized arguments: --no-such-flag" in text  # the log tail, shown to the user
    assert "arm 'hang'" in text and "not ready after 5 s" in text and "loading model weights" in text
    assert "fix: raise server.ready_timeout_s" in text  # (the messages, not the wall time, show the waits)
    run = the_run(tmp_path / "out")
    pts = points(run)
    assert pts[("crash", 1, "")]["status"] == "failed" and pts[("hang", 1, "")]["status"] == "failed"
    assert pts[("ext", 1, "")]["status"] == "ok"
    assert sum(1 for r in records(run) if r["arm"] == "ext" and r["error"] is None) == 3
    rows = {r["arm"]: r for r in json.loads((run / "summary.json").read_text())["rows"]}
    assert rows["crash"]["status"] == "failed" and rows["hang"]["status"] == "failed"
    assert "loading model weights" in (run / "logs" / "hang.log").read_text()
    assert_no_orphans(tag, run)  # includes the hanging server's `sleep` worker


# ---- 2. a server that dies mid-run (fake; the real-vLLM kill is in tests/e2e) -----------------


def test_server_dies_mid_run(tmp_path, tag):
    """The fake exits when request #10 arrives (#0 is the readiness probe): c=1 is done,
    c=2 dies part-way. The death is detected at once, finished work is kept, the point
    is failed, and the rest of the queue is not burnt as 'connection refused' records."""
    prompts = write_prompts(tmp_path / "p.jsonl", [f"question {i}" for i in range(6)])
    sc = scenario("dies", prompts, server=fake_local(**{"t-step": 0.01, "output-tokens": 8, "die-after": 9}),
                  arms=[{"name": "a"}], concurrency=[1, 2])
    res = sb(["run", str(write_yaml(tmp_path / "s.yaml", sc)), "-o", str(tmp_path / "out"), "--skip-doctor"],
             tag=tag, cwd=tmp_path)
    text = out_of(res)
    assert res.returncode == 1, text
    assert "Traceback" not in text  # "at once": the queue is not burnt (below), whatever the wall time
    run = the_run(tmp_path / "out")
    pts = points(run)
    assert pts[("a", 1, "")]["status"] == "ok"  # finished before the crash: kept as it was
    assert pts[("a", 2, "")]["status"] == "failed"
    assert pts[("a", 2, "")]["failure"].startswith("server died during concurrency 2")
    assert "exited with code 3" in pts[("a", 2, "")]["failure"]
    recs = records(run)
    assert sum(1 for r in recs if r["concurrency"] == 1 and r["error"] is None) == 6
    c2 = [r for r in recs if r["concurrency"] == 2]
    assert any(r["error"] is None for r in c2)  # finished before the crash: kept
    assert {r["error"] for r in c2 if r["error"]} == {"server_died"}
    assert len(c2) < 6, "requests after the death were recorded instead of stopping"
    rows = {(r["arm"], r["concurrency"]): r for r in json.loads((run / "summary.json").read_text())["rows"]}
    assert rows[("a", 2)]["status"] == "failed" and rows[("a", 1)]["status"] == "ok"
    assert_no_orphans(tag, run)
    # The folder resumes: the failed point runs again on a fresh server (started for c=2
    # alone, it stays under its die-after count), and the finished c=1 is not rerun. (The
    # real-vLLM engine-death tests rely on this one for the resume after a death.)
    c1_before = [r for r in recs if r["concurrency"] == 1]
    res = sb(["run", "--resume", str(run), "--skip-doctor"], tag=tag, cwd=tmp_path)
    assert res.returncode == 0, out_of(res)
    assert points(run)[("a", 2, "")]["status"] == "ok"
    assert [r for r in records(run) if r["concurrency"] == 1] == c1_before
    rows = {(r["arm"], r["concurrency"]): r for r in json.loads((run / "summary.json").read_text())["rows"]}
    assert rows[("a", 2)]["status"] == "ok"
    assert_no_orphans(tag, run)


# ---- 3-5. HTTP 500, stalled stream, malformed SSE, truncated streams ----------------------

FAULT_PROMPTS = [
    "plain question 0",
    "[[fake:fault=http_500]] question 1",
    "plain question 2",
    "[[fake:fault=stall,at=2,stall_s=10]] question 3",
    "plain question 4",
    "[[fake:fault=malformed,at=1]] question 5",
    "[[fake:fault=truncate,at=2]] question 6",
    "[[fake:fault=disconnect,at=2]] question 7",
    "[[fake:fault=error_event,at=1]] question 8",
    "plain question 9",
]


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory):
    """One run over a workload whose prompts ask the fake for one fault each."""
    tmp = tmp_path_factory.mktemp("faults")
    tag = uuid.uuid4().hex
    prompts = write_prompts(tmp / "p.jsonl", FAULT_PROMPTS)
    with FakeServer(FakeConfig(t_step_s=0.002, output_tokens=8)) as srv:
        sc = scenario("faults", prompts, server={"launcher": "external"},
                      arms=[{"name": "ext", "base_url": srv.base_url}], workload={"idle_timeout_s": 3})
        res = sb(["run", str(write_yaml(tmp / "s.yaml", sc)), "-o", str(tmp / "out"), "--skip-doctor"],
                 tag=tag, cwd=tmp)
    run = the_run(tmp / "out")
    by_index = {r["prompt_index"]: r for r in records(run)}
    return {"res": res, "run": run, "tmp": tmp, "tag": tag, "recs": by_index}


def _rec_for(fr, text: str) -> dict:
    """By prompt id: the workload order is a seeded shuffle of the file's rows."""
    rid = f"row{FAULT_PROMPTS.index(text)}"
    return next(r for r in fr["recs"].values() if r["prompt_id"] == rid)


def test_http_500_counted_no_crash_and_gate_fails(fault_run):
    res, run = fault_run["res"], fault_run["run"]
    assert res.returncode == 0, out_of(res)  # request errors do not fail the run; gates decide
    assert "Traceback" not in out_of(res)
    r = _rec_for(fault_run, FAULT_PROMPTS[1])
    assert r["error"] == "http_status" and r["error_detail"].startswith("HTTP 500")
    assert len(fault_run["recs"]) == len(FAULT_PROMPTS)  # every prompt answered, none lost
    row = json.loads((run / "summary.json").read_text())["rows"][0]
    assert row["status"] == "partial" and row["n_requests"] == 10 and row["n_errors"] == 6
    assert row["error_rate"] == pytest.approx(0.6)
    gates = write_yaml(fault_run["tmp"] / "gates.yaml", [{"metric": "error_rate", "max": 0.0}])
    gate = sb(["gate", str(run), "--gates", str(gates)], tag=fault_run["tag"], cwd=fault_run["tmp"])
    assert gate.returncode == 1, out_of(gate)
    assert "FAIL" in gate.stdout and "error_rate" in gate.stdout
    loose = write_yaml(fault_run["tmp"] / "loose.yaml", [{"metric": "error_rate", "max": 1.0}])
    assert sb(["gate", str(run), "--gates", str(loose)], tag=fault_run["tag"], cwd=fault_run["tmp"]).returncode == 0


def test_stalled_stream_is_idle_timeout_and_run_continues(fault_run):
    r = _rec_for(fault_run, FAULT_PROMPTS[3])
    assert r["error"] == "idle_timeout"
    # gave up after idle_timeout_s (3) of silence; the error itself shows it was before the
    # 10 s stall ended (a resumed stream would have completed). 3 s, not 1: the fake runs in
    # a thread of this process, which a loaded host can stall for a second mid-stream
    silent = (r["t_end_ns"] - r["chunk_ns"][-1]) / 1e9
    assert silent > 2.9, f"gave up after {silent:.2f} s of silence; idle_timeout_s is 3"
    assert len(r["chunk_ns"]) == 2  # the tokens before the stall are kept
    later = [x for x in fault_run["recs"].values() if x["prompt_index"] > r["prompt_index"]]
    assert later and all(x["t_sent_ns"] > r["t_end_ns"] for x in later)  # c=1: they came after
    plain = [_rec_for(fault_run, t) for t in FAULT_PROMPTS if t.startswith("plain")]
    assert all(x["error"] is None for x in plain)


def test_malformed_and_truncated_streams_keep_raw_fragment(fault_run):
    mal = _rec_for(fault_run, FAULT_PROMPTS[5])
    assert mal["error"] == "malformed_sse" and '"content": "oops"' in mal["raw_fragment"]
    trunc = _rec_for(fault_run, FAULT_PROMPTS[6])
    assert trunc["error"] == "truncated" and trunc["raw_fragment"].startswith("data: {")
    assert len(trunc["chunk_ns"]) == 2
    cut = _rec_for(fault_run, FAULT_PROMPTS[7])  # the connection dropped mid-body
    assert cut["error"] == "truncated" and cut["raw_fragment"].startswith("data: {")
    event = _rec_for(fault_run, FAULT_PROMPTS[8])  # vLLM's in-stream error event
    assert event["error"] == "http_status" and "injected generation error" in event["raw_fragment"]
    assert_no_orphans(fault_run["tag"], fault_run["run"])


# ---- 6. scenario errors: exit 2, key path, no traceback ------------------------------------

YAML_CASES = {
    "syntax": ("name: x\narms: [\n  - name: a\n", ["YAML syntax error", "bad.yaml:3:3"]),
    "unknown_key": ("name: x\nserver: {model: m, modle: m}\narms: [{name: a}]\n",
                    ["bad.yaml:2: server.modle: unknown key 'modle'", "fix:"]),
    "wrong_type": ("name: x\nserver: {model: m}\narms: [{name: a}]\nconcurrency: [one]\nrepeats: many\n",
                   ["bad.yaml:4: concurrency[0]: Input should be a valid integer", "bad.yaml:5: repeats:"]),
    "missing_file": (None, ["scenario file not found", "bad.yaml"]),
    "missing_dataset": (("name: x\nserver: {model: m}\narms: [{name: a}]\n"
                         "workload: {source: speed_bench, path: /nonexistent/speed-bench}\n"),
                        ["workload.path: /nonexistent/speed-bench does not exist", "fix:"]),
}


@pytest.mark.parametrize("case", list(YAML_CASES))
def test_scenario_errors_exit_2_with_key_path(tmp_path, tag, case):
    text, expected = YAML_CASES[case]
    path = tmp_path / "bad.yaml"
    if text is not None:
        path.write_text(text)
    # No --skip-doctor: the user's path, where the doctor would otherwise run first.
    res = sb(["run", str(path), "-o", str(tmp_path / "out")], tag=tag, cwd=tmp_path, timeout=60)
    text_out = out_of(res)
    assert res.returncode == 2, text_out
    assert "Traceback" not in text_out
    for needle in expected:
        assert needle in text_out
    assert not (tmp_path / "out").exists(), "a run folder was created for an invalid scenario"
    assert_no_orphans(tag)


# ---- 7. placeholder dataset rows ---------------------------------------------------------


def test_placeholder_rows_refused_before_any_server(tmp_path, tag):
    data = tmp_path / "speed"
    data.mkdir()
    rows = [{"question_id": "q1", "category": "coding", "turns": ["Write a sort function."], "source": "ok"},
            {"question_id": "q2", "category": "coding", "source": "licensed-src",
             "turns": ["FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE (licensed-src)"]}]
    write_prompts(data / "qualitative.jsonl", rows)
    marker = tmp_path / "server-started"
    sc = {"name": "ph", "server": {"model": "m", "command": ["sh", "-c", f"touch {marker}; exec sleep 30"]},
          "arms": [{"name": "a"}], "workload": {"source": "speed_bench", "path": str(data), "warmup": 0}}
    res = sb(["run", str(write_yaml(tmp_path / "s.yaml", sc)), "-o", str(tmp_path / "out")], tag=tag, cwd=tmp_path)
    text = out_of(res)
    assert res.returncode == 2, text
    assert "1 of 2 selected rows" in text and "placeholders" in text and "licensed-src (1)" in text
    assert "fix:" in text and "Traceback" not in text
    assert not marker.exists(), "a server was started for placeholder data"
    assert not (tmp_path / "out").exists()
    assert_no_orphans(tag)


# ---- 8. port already in use ------------------------------------------------------------------


@pytest.fixture
def busy_port():
    """A port something listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.fixture
def bound_port():
    """A port bound but not listening: binding it fails, connecting is refused at once
    (a listener would accept the readiness probe into its backlog and stall it 5 s)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def test_fixed_port_in_use_is_a_clear_error(tmp_path, tag, busy_port):
    prompts = write_prompts(tmp_path / "p.jsonl", ["q0"])
    server = {**fake_local(), "port": busy_port}
    sc = scenario("port", prompts, server=server, arms=[{"name": "a"}])
    res = sb(["run", str(write_yaml(tmp_path / "s.yaml", sc)), "-o", str(tmp_path / "out"), "--skip-doctor"],
             tag=tag, cwd=tmp_path)
    text = out_of(res)
    assert res.returncode == 1, text
    assert f"port {busy_port} on 127.0.0.1 is already in use" in text
    assert "fix: stop whatever listens there, choose another server.port, or remove server.port" in text
    run = the_run(tmp_path / "out")
    assert points(run)[("a", 1, "")]["status"] == "failed"
    assert not (run / "logs" / "a.log").exists(), "the server was launched anyway"
    assert_no_orphans(tag, run)


def test_auto_port_taken_after_probe_is_retried(tmp_path, bound_port, monkeypatch):
    """The race the auto port cannot avoid: the probed port is taken before the server
    binds. The server's 'address already in use' exit is recognised and a new port tried."""
    from speedbench.engine import local

    real = local.free_port
    handed = []

    def racy_free_port(host: str = "127.0.0.1") -> int:
        port = bound_port if not handed else real(host)
        handed.append(port)
        return port

    monkeypatch.setattr(local, "free_port", racy_free_port)
    argv = [sys.executable, "-m", "speedbench.testing.fake_server", "--model", "fake-model"]
    srv = LocalServer(LaunchSpec("a", argv), tmp_path / "a.log", ready_timeout_s=30, grace_s=3)
    with srv:
        assert srv.wait_ready() == "fake-model"
        assert srv.port != bound_port and handed[0] == bound_port and len(handed) == 2
        pgid = srv.pgid
    assert "address already in use" in (tmp_path / "a.log").read_text()
    assert not _group_alive(pgid)
    kids = [c for c in psutil.Process().children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE]
    assert not kids


# ---- 9-10. SIGTERM mid-run (fake as a local server), then --resume ------------------------------

POINT_REQUESTS = 5  # 4 prompts, one of them two turns


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """2 arms x 2 concurrency levels; SIGTERM once one point is finished and another has
    started. Returns what the test needs to check the interruption and then resume."""
    tmp = tmp_path_factory.mktemp("interrupt")
    tag = uuid.uuid4().hex
    prompts = write_prompts(tmp / "p.jsonl",
                            ["q0", "q1", {"turns": ["q2 turn 0", "q2 turn 1"], "category": "coding"}, "q3"])
    # 100 ms a step: a point lasts seconds, so the SIGTERM lands inside the started point
    # however late a busy host delivers it
    sc = scenario("interrupt", prompts, server=fake_local(**{"t-step": 0.1, "output-tokens": 12}),
                  arms=[{"name": "a"}, {"name": "b"}], concurrency=[1, 2], workload={"max_tokens": 12})
    cmd = [sys.executable, "-m", "speedbench.cli", "run", str(write_yaml(tmp / "s.yaml", sc)), "-o", str(tmp / "out"),
           "--skip-doctor"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=sb_env(tag), cwd=tmp)
    deadline = time.monotonic() + 60
    run = None
    while time.monotonic() < deadline and proc.poll() is None:
        runs = list((tmp / "out").glob("*/*"))
        if runs:
            run = runs[0]
            done = {k for k, p in points(run).items() if p["status"] == "ok"}
            started = {point_of(r) for r in records(run)}
            if done and started - done:
                break
        time.sleep(0.01)
    assert proc.poll() is None and run is not None, "the run ended before it could be interrupted"
    before = (run / "records.jsonl").read_text()
    t_sig = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    # The records and points as the interruption left them: the resume test changes the
    # folder, and the tests run in a random order.
    return {"tmp": tmp, "tag": tag, "run": run, "rc": proc.returncode, "out": output,
            "stop_s": time.monotonic() - t_sig, "records_before": before, "points_before": points(run),
            "records_after_stop": records(run)}


def test_sigterm_tears_down_saves_and_hints_resume(interrupted):
    it = interrupted
    print(f"SIGTERM -> exit {it['rc']} after {it['stop_s']:.1f} s")
    assert it["rc"] == 130, it["out"]
    # prompt, not instant: teardown renders the report; a wait for the point's requests
    # (1.2 s each) or a server's full grace would show as much more
    assert it["stop_s"] < 60, f"{it['stop_s']:.1f} s from SIGTERM to exit"
    assert "Traceback" not in it["out"]
    assert f"speedbench run --resume {it['run']}" in it["out"]
    run = it["run"]
    assert (run / "summary.json").exists() and (run / "report.md").exists()
    pts = it["points_before"]
    assert "interrupted" in {p["status"] for p in pts.values()}
    assert all(p["status"] in ("ok", "interrupted") for p in pts.values())
    assert len(pts) < 4  # it really stopped: arm b / the last point never ran to the end
    cut = {r["error"] for r in it["records_after_stop"] if pts[point_of(r)]["status"] == "interrupted"}
    assert cut <= {None, "cancelled"}, cut  # stopped by us: not mistaken for a server crash
    assert_no_orphans(it["tag"], run)


def test_resume_skips_finished_reruns_unfinished_no_duplicates_no_loss(interrupted):
    it = interrupted
    run = it["run"]
    finished = {k for k, p in it["points_before"].items() if p["status"] == "ok"}
    assert finished, "nothing finished before the interruption"
    kept_lines = [ln for ln in it["records_before"].splitlines() if point_of(json.loads(ln)) in finished]
    assert len(kept_lines) == POINT_REQUESTS * len(finished)
    res = sb(["run", "--resume", str(run), "--skip-doctor"], tag=it["tag"], cwd=it["tmp"])
    text = out_of(res)
    assert res.returncode == 0, text
    assert f"{len(finished)} finished points are kept" in text
    after = points(run)
    assert set(after) == {(a, c, "") for a in ("a", "b") for c in (1, 2)}
    assert all(p["status"] == "ok" for p in after.values())
    for k in finished:  # not rerun: same completion stamp as before the resume
        assert after[k]["finished_utc"] == it["points_before"][k]["finished_utc"]
    if all((("a", c, "") in finished) for c in (1, 2)):
        assert "a: starting server" not in text
    lines = (run / "records.jsonl").read_text().splitlines()
    recs = [json.loads(ln) for ln in lines]
    keys = [(r["arm"], r["concurrency"], r["variant"], r["repeat"], r["prompt_index"], r["turn"]) for r in recs]
    assert len(keys) == len(set(keys)), "duplicate records after resume"
    for k in after:
        assert sum(1 for r in recs if point_of(r) == k) == POINT_REQUESTS, k
    assert all(r["error"] is None for r in recs)
    missing = [ln for ln in kept_lines if ln not in set(lines)]
    assert not missing, f"{len(missing)} records of finished points changed or vanished"
    superseded = records(run, "records.superseded.jsonl")
    assert superseded and all(point_of(r) not in finished for r in superseded)
    assert_no_orphans(it["tag"], run)


# ---- 12. secrets never reach the run folder ----------------------------------------------------

PLANTED = {
    "HF_TOKEN": "hf_PLANTEDsecret123456",  # in the environment, inherited by the server
    "MY_ENDPOINT_KEY": "sk-PLANTEDendpoint7654321",  # server.api_key_env
}
IN_SCENARIO = "hf_PLANTEDinscenario24680"  # a token written into server.env
ON_COMMAND_LINE = "sk-PLANTEDflag13579"  # --set server.args.api-key=...


def test_secrets_never_written(tmp_path, tag):
    fake_vllm = tmp_path / "fake_vllm.py"
    fake_vllm.write_text(FAKE_VLLM)
    prompts = write_prompts(tmp_path / "p.jsonl", ["q0", "q1"])
    with FakeServer(FakeConfig(t_step_s=0.002, output_tokens=8)) as upstream, \
            AuthProxy(upstream.base_url, PLANTED["MY_ENDPOINT_KEY"]) as guarded:
        server = {"launcher": "local", "model": "fake-model", "model_arg": "flag",
                  "command": ["python", str(fake_vllm)], "api_key_env": "MY_ENDPOINT_KEY",
                  "env": {"HUGGING_FACE_HUB_TOKEN": IN_SCENARIO, "VLLM_CPU_KVCACHE_SPACE": "1"}}
        sc = scenario("secrets", prompts, server=server,
                      arms=[{"name": "local"}, {"name": "guarded", "base_url": guarded.base_url}])
        res = sb(["run", str(write_yaml(tmp_path / "s.yaml", sc)), "-o", str(tmp_path / "out"), "--skip-doctor",
                  "--set", f"server.args.api-key={ON_COMMAND_LINE}"], tag=tag, cwd=tmp_path, env=PLANTED)
        allowed, denied = guarded.allowed, guarded.denied
    text = out_of(res)
    assert res.returncode == 0, text
    assert allowed > 0 and denied == 0, "the endpoint key was not sent"  # so it was really in use
    run = the_run(tmp_path / "out")
    secrets = [*PLANTED.values(), IN_SCENARIO, ON_COMMAND_LINE]
    files = [p for p in run.rglob("*") if p.is_file()]
    assert any(p.parent.name == "logs" for p in files) and len(files) > 8
    leaks = [(str(p.relative_to(run)), s) for p in files for s in secrets if s.encode() in p.read_bytes()]
    assert not leaks, f"secrets written to the run folder: {leaks}"
    assert not [s for s in secrets if s in text], "a secret was printed"
    prov = json.loads((run / "provenance.json").read_text())["local"]
    assert prov["env"]["HUGGING_FACE_HUB_TOKEN"] == REDACTED and prov["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert prov["argv"][prov["argv"].index("--api-key") + 1] == REDACTED
    saved = yaml.safe_load((run / "scenario.resolved.yaml").read_text())
    assert saved["server"]["env"]["HUGGING_FACE_HUB_TOKEN"] == REDACTED
    assert saved["server"]["api_key_env"] == "MY_ENDPOINT_KEY"  # the name is kept, never the value
    assert_no_orphans(tag, run)
