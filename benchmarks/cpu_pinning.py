"""Where the time goes on a small CPU host, and whether pinning helps: start the tiny
target on vLLM's CPU build under each pinning mode (a fresh server per start), replay 16
coding prompts at c=1/4/16, and print per point the client's and the engine's per-user
TPS, the bursts (every token in one read), and the CPU seconds each process used (API
server, engine core, client) against the wall time.

    .venv/bin/python benchmarks/cpu_pinning.py                          # 3 modes x 2 starts (~4 min)
    .venv/bin/python benchmarks/cpu_pinning.py --modes engine0 --starts 3 --max-tokens 256

Modes: none (no pinning); engine0 (VLLM_CPU_OMP_THREADS_BIND=0, what cpu_tiny.yaml uses);
engine0_api1 (and the API server under taskset -c 1); engine0_api1_client1 (and this
client on core 1). Needs the fixtures (`speedbench fixtures tiny .fixtures/tiny`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

from speedbench.client.http import ClientConfig, make_session, stream_request
from speedbench.records import RequestRecord

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / ".fixtures" / "tiny"
PROMPTS = [json.loads(line)["turns"][0] for line in (ROOT / "speedbench/data/coding_sample.jsonl").open()]


def _port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _cpu(procs: list[psutil.Process]) -> dict[str, float]:
    """CPU seconds (user + system) per role: the API server, the engine core (and its
    workers), this client."""
    out = {"api": 0.0, "engine": 0.0, "client": 0.0}
    for p in procs:
        try:
            t = p.cpu_times()
            name = p.name()
        except psutil.Error:
            continue
        role = "client" if p.pid == os.getpid() else ("engine" if "VLLM" in name or "Engine" in name else "api")
        out[role] += t.user + t.system
    return out


async def _point(cfg: ClientConfig, model: str, c: int, prompts: list[str], max_tokens: int) -> list[RequestRecord]:
    session = make_session(cfg, c)
    queue = list(enumerate(prompts))
    out: list[RequestRecord] = []

    async def worker() -> None:
        while queue:
            i, text = queue.pop(0)
            rec = RequestRecord(arm="x", concurrency=c, prompt_index=i, prompt_id=str(i))
            body = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
                    "temperature": 0}
            await stream_request(session, cfg, "/v1/chat/completions", body, rec)
            out.append(rec)

    await asyncio.gather(*[worker() for _ in range(c)])
    await session.close()
    return out


def one_start(mode: str, max_tokens: int) -> dict:
    port = _port()
    model = str(FIXTURES / "target")
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--dtype", "float16",
            "--enforce-eager", "--max-model-len", "1024", "--max-num-seqs", "16", "--enable-per-request-metrics",
            "--host", "127.0.0.1", "--port", str(port)]
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1")
    if mode != "none":
        env["VLLM_CPU_OMP_THREADS_BIND"] = "0"
    if mode in ("engine0_api1", "engine0_api1_client1"):
        argv = ["taskset", "-c", "1", *argv]
    before_affinity = os.sched_getaffinity(0)
    if mode == "engine0_api1_client1":
        os.sched_setaffinity(0, {1})
    log = open(f"/tmp/cpu_pinning-{mode}.log", "w")
    t0 = time.monotonic()
    server = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if server.poll() is not None:
                    raise SystemExit(f"server died; see /tmp/cpu_pinning-{mode}.log")
                time.sleep(0.5)
        out: dict = {"mode": mode, "start_s": round(time.monotonic() - t0, 1)}
        cfg = ClientConfig(base_url=f"http://127.0.0.1:{port}")
        asyncio.run(_point(cfg, model, 2, PROMPTS[:2], max_tokens))  # warmup
        procs = [psutil.Process(server.pid), *psutil.Process(server.pid).children(recursive=True),
                 psutil.Process(os.getpid())]
        for c in (1, 4, 16):
            cpu0, w0 = _cpu(procs), time.monotonic()
            recs = asyncio.run(_point(cfg, model, c, PROMPTS[2:18], max_tokens))
            wall, cpu1 = time.monotonic() - w0, _cpu(procs)
            client, engine, bursts = [], [], 0
            for r in recs:
                n, reads = r.n_output, len(set(r.chunk_ns))
                if reads <= 1:
                    bursts += 1
                elif r.chunk_ns[-1] > r.chunk_ns[0]:
                    client.append((n - 1) / ((r.chunk_ns[-1] - r.chunk_ns[0]) / 1e9))
                if r.engine and r.engine.generation_ms:
                    engine.append((n - 1) / (r.engine.generation_ms / 1e3))
            mean = lambda xs: round(sum(xs) / len(xs), 1) if xs else None  # noqa: E731
            out[f"c{c}"] = {"client_tps": mean(client), "engine_tps": mean(engine), "bursts": bursts,
                            "wall_s": round(wall, 2),
                            "cpu_s": {k: round(cpu1[k] - cpu0[k], 2) for k in cpu1}}
        return out
    finally:
        os.sched_setaffinity(0, before_affinity)
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", default="none,engine0,engine0_api1_client1")
    ap.add_argument("--starts", type=int, default=2, help="fresh servers per mode")
    ap.add_argument("--max-tokens", type=int, default=64)
    a = ap.parse_args()
    for _ in range(a.starts):
        for mode in a.modes.split(","):
            print(json.dumps(one_start(mode, a.max_tokens)), flush=True)


if __name__ == "__main__":
    main()
