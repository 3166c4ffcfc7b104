"""How much does the speedbench client cost, next to vLLM's own benchmark client?

Measures, against benchmarks/sse_server.py running in its own process:

1. ingest rate: SSE chunks/s the client parses on one core (burst mode: the server
   writes whole pre-rendered responses, so the client is the bottleneck);
2. added latency at c=16 and c=256 (paced mode): client arrival stamp minus the
   server's send stamp carried in each chunk. Both are CLOCK_MONOTONIC
   (``perf_counter`` on Linux), one clock for every process on the machine, so the
   difference is the one-way delay: kernel loopback + wake-up + parsing up to the
   point where the client stamps the chunk.

vLLM's client runs two ways: ``vllm bench serve`` (via benchmarks/vllm_cli.py, its own
process; "vllm bench") and its request function inside this process ("vllm fn": same
interpreter, heap and event loop as ours, so only the client code differs). Its
per-chunk arrival times are rebuilt from start_time + ttft + cumulative itl. Usage::

    .venv/bin/python benchmarks/client_bench.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from speedbench.client.http import ClientConfig
from speedbench.records import PointKey, Prompt, RequestRecord
from speedbench.loadgen import PointJob, Target, run_async, run_pass

PY = sys.executable
CLIENT_CPU, SERVER_CPU = 0, 1


def _pin(cpu: int):
    cpus = os.sched_getaffinity(0)
    target = {cpu} if cpu in cpus else {min(cpus)}
    return lambda: os.sched_setaffinity(0, target)


def start_server(mode: str, interval_ms: float = 10.0) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [PY, str(ROOT / "benchmarks" / "sse_server.py"), "--mode", mode, "--interval-ms", str(interval_ms)],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    line = proc.stdout.readline()
    if not line.startswith("listening on"):
        proc.kill()
        raise SystemExit(f"benchmark server did not start: {line!r}")
    return proc, line.split()[-1]


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ---- speedbench's client (the real path: loadgen + client) -----------------------------


class _Builder:
    """The smallest RequestBuilder: a chat request for ``chunks`` tokens."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks

    def build(self, prompt: Prompt, turn: int, history: list) -> tuple[str, dict]:
        return "/v1/chat/completions", {"model": "bench", "messages": [{"role": "user", "content": prompt.turns[turn]}],
                                        "max_tokens": self.chunks}


def _ours(url: str, conc: int, n_requests: int, chunks: int) -> tuple[list[RequestRecord], float, float]:
    prompts = [Prompt(id=str(i), turns=(f"w{i}",)) for i in range(n_requests)]
    c0 = time.process_time()
    # the loop `speedbench run` uses (uvloop when installed)
    res = run_async(run_pass(Target(client=ClientConfig(url), builder=_Builder(chunks)),
                             PointJob(key=PointKey("bench", conc), prompts=prompts), 0))
    cpu = time.process_time() - c0
    bad = [r.error for r in res.records if r.error]
    if bad:
        raise SystemExit(f"speedbench client saw errors: {bad[:3]}")
    return res.records, res.wall_s, cpu


def ours_ingest(url: str, conc: int, n_requests: int, chunks: int) -> dict:
    recs, wall, cpu = _ours(url, conc, n_requests, chunks)
    n = sum(len(r.chunk_ns) for r in recs)
    return {"chunks": n, "chunks_per_s": n / wall, "chunks_per_cpu_s": n / cpu}


def ours_latency(url: str, conc: int, n_requests: int, chunks: int) -> np.ndarray:
    recs, _, _ = _ours(url, conc, n_requests, chunks)
    out = []
    for r in recs:
        sent = [int(x) for x in r.output_text.split()]
        assert len(sent) == len(r.chunk_ns), "one stamp per chunk"
        out.append((np.array(r.chunk_ns) - np.array(sent)) / 1e6)
    return np.concatenate(out)


# ---- vLLM's client --------------------------------------------------------------------


def make_tokenizer(folder: Path) -> str:
    """A tiny word-level tokenizer: ``vllm bench serve`` needs one to build prompts."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i + 3 for i in range(2000)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(folder)
    return str(folder)


def vllm_run(url: str, conc: int, n_requests: int, chunks: int, tokenizer: str, out: Path, pin: bool = False) -> dict:
    name = f"vllm_c{conc}_{chunks}.json"
    argv = [
        PY, str(ROOT / "benchmarks" / "vllm_cli.py"), "bench", "serve", "--backend", "openai-chat",
        "--base-url", url, "--endpoint", "/v1/chat/completions", "--model", "bench", "--tokenizer", tokenizer,
        "--dataset-name", "random", "--input-len", "8", "--output-len", str(chunks), "--num-prompts", str(n_requests),
        "--max-concurrency", str(conc), "--disable-tqdm", "--save-result", "--save-detailed",
        "--result-dir", str(out), "--result-filename", name,
    ]
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING", "TOKENIZERS_PARALLELISM": "false"}
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900, check=False,
                       preexec_fn=_pin(CLIENT_CPU) if pin else None)
    if p.returncode != 0:
        raise SystemExit(f"vllm bench serve failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads((out / name).read_text())


def vllm_fn(url: str, conc: int, n_requests: int, chunks: int) -> tuple[dict, float, float]:
    """vLLM's request function (the code `vllm bench serve` runs per request) inside this
    process, with the session settings of vllm/benchmarks/serve.py: same interpreter,
    same heap, same event loop implementation as our client, so only the client code
    differs. Returns the same fields as its detailed results, wall time and CPU time."""
    import aiohttp
    import vllm_cli  # noqa: F401 -- the version shim, before vLLM is imported
    from vllm.benchmarks.lib.endpoint_request_func import (
        RequestFuncInput,
        async_request_openai_chat_completions,
    )

    async def go() -> tuple[list, float, float]:
        conn = aiohttp.TCPConnector(limit=conc, limit_per_host=conc, ttl_dns_cache=300, use_dns_cache=True,
                                    keepalive_timeout=60, enable_cleanup_closed=True, force_close=False)
        outs: list = []
        left = list(range(n_requests))
        async with aiohttp.ClientSession(connector=conn, trust_env=True,
                                         timeout=aiohttp.ClientTimeout(total=6 * 3600)) as session:
            async def worker() -> None:
                while left:
                    i = left.pop()
                    inp = RequestFuncInput(prompt=f"w{i}", api_url=url + "/v1/chat/completions", prompt_len=1,
                                           output_len=chunks, model="bench")
                    outs.append(await async_request_openai_chat_completions(inp, session))

            t0, c0 = time.perf_counter(), time.process_time()
            await asyncio.gather(*[worker() for _ in range(conc)])
            return outs, time.perf_counter() - t0, time.process_time() - c0

    outs, wall, cpu = asyncio.run(go())
    res = {"start_times": [o.start_time for o in outs], "ttfts": [o.ttft for o in outs], "itls": [o.itl for o in outs],
           "generated_texts": [o.generated_text if o.success else "" for o in outs], "duration": wall}
    return res, wall, cpu


def vllm_ingest(res: dict) -> dict:
    n = sum(len(itl) + 1 for itl, t in zip(res["itls"], res["generated_texts"]) if t)
    return {"chunks": n, "chunks_per_s": n / res["duration"], "chunks_per_cpu_s": float("nan")}


def vllm_latency(res: dict) -> np.ndarray:
    out = []
    for st, ttft, itl, text in zip(res["start_times"], res["ttfts"], res["itls"], res["generated_texts"]):
        sent = [int(x) for x in text.split()]
        arrival = (st + ttft + np.concatenate([[0.0], np.cumsum(itl)])) * 1e9
        if len(sent) != len(arrival):
            continue  # a request whose chunks vLLM merged cannot be lined up; skipped
        out.append((arrival - np.array(sent)) / 1e6)
    return np.concatenate(out)


# ---- driver ---------------------------------------------------------------------------


def _lat_stats(v: np.ndarray) -> dict:
    return {"n": len(v), "p50_ms": float(np.percentile(v, 50)), "p99_ms": float(np.percentile(v, 99)),
            "max_ms": float(v.max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one small trial of each case (a smoke test)")
    ap.add_argument("--trials", type=int, default=3, help="trials per case; figures are medians over trials")
    ap.add_argument("--json", default=None, help="also write every trial's figures here")
    ap.add_argument("--no-vllm", action="store_true", help="measure speedbench's client only")
    ap.add_argument("--pin", action="store_true", help="pin both clients to CPU 0 (only on an otherwise idle machine)")
    ap.add_argument("--nice", type=int, default=0,
                    help="niceness increment for this process and its children (both clients and the server); "
                         "negative values (root only) lift the benchmark above other load on a shared machine")
    ap.add_argument("--cases", default="", help="comma-separated case names to run (default: all)")
    a = ap.parse_args()
    if a.nice:
        os.nice(a.nice)
    trials = 1 if a.quick else a.trials
    scale = 4 if a.quick else 1
    if a.pin:
        os.sched_setaffinity(0, {CLIENT_CPU} if CLIENT_CPU in os.sched_getaffinity(0) else {min(os.sched_getaffinity(0))})
    tmp = Path(tempfile.mkdtemp(prefix="client_bench_"))
    tokenizer = None if a.no_vllm else make_tokenizer(tmp / "tok")
    # (name, server mode, interval ms, concurrency, requests, chunks per request)
    cases = [
        ("ingest_c1", "burst", 0.0, 1, 8 // scale, 20000 // scale),
        ("ingest_c16", "burst", 0.0, 16, 32, 2000 // scale),
        # c=16 at 100 tok/s per user; c=256 at 20 tok/s per user (5k chunks/s in all,
        # the order of a busy real server)
        ("latency_c16", "paced", 10.0, 16, 32, 100 // scale),
        ("latency_c256", "paced", 50.0, 256, 512, 60 // scale),
    ]
    if a.cases:
        cases = [c for c in cases if c[0] in a.cases.split(",")]
    trial_rows: dict[str, dict[str, list[dict]]] = {"speedbench": {}, "vllm bench": {}, "vllm fn": {}}

    def add(who: str, case: str, row: dict) -> None:
        trial_rows[who].setdefault(case, []).append(row)

    for name, mode, interval, conc, n_req, chunks in cases:
        proc, url = start_server(mode, interval)
        try:
            for _ in range(trials):  # interleaved, so slow spells of a shared machine hit every client
                if mode == "burst":
                    add("speedbench", name, ours_ingest(url, conc, n_req, chunks))
                    if tokenizer:
                        add("vllm bench", name, vllm_ingest(vllm_run(url, conc, n_req, chunks, tokenizer, tmp, a.pin)))
                        res, _, cpu = vllm_fn(url, conc, n_req, chunks)
                        row = vllm_ingest(res)
                        add("vllm fn", name, {**row, "chunks_per_cpu_s": row["chunks"] / cpu})
                else:
                    add("speedbench", name, _lat_stats(ours_latency(url, conc, n_req, chunks)))
                    if tokenizer:
                        add("vllm bench", name, _lat_stats(vllm_latency(vllm_run(url, conc, n_req, chunks, tokenizer, tmp, a.pin))))
                        add("vllm fn", name, _lat_stats(vllm_latency(vllm_fn(url, conc, n_req, chunks)[0])))
        finally:
            stop(proc)
    results = {who: {case: {k: float(np.median([t[k] for t in ts])) for k in ts[0]} for case, ts in per.items()}
               for who, per in trial_rows.items()}
    print(f"1-min load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; niceness {os.nice(0)}; "
          f"{trials} trial(s) per case, medians shown")
    _print(results)
    if a.json:
        Path(a.json).write_text(json.dumps({"medians": results, "trials": trial_rows}, indent=2))


def _print(results: dict) -> None:
    ours, cli, fn = results["speedbench"], results["vllm bench"], results["vllm fn"]
    nan = float("nan")
    print(f"{'metric':44} {'speedbench':>11} {'vllm bench':>11} {'vllm fn':>11} {'sb/bench':>9} {'sb/fn':>7}")
    for key, v in ours.items():
        metrics = ("chunks_per_s", "chunks_per_cpu_s") if key.startswith("ingest") else ("p50_ms", "p99_ms", "max_ms")
        for m in metrics:
            label = f"{key} {m} (higher is better)" if key.startswith("ingest") else f"{key} added {m} (lower is better)"
            b = cli.get(key, {}).get(m, nan)
            f = fn.get(key, {}).get(m, nan)
            rb, rf = (v[m] / x if x and not math.isnan(x) else nan for x in (b, f))
            print(f"{label:44} {v[m]:11.4g} {b:11.4g} {f:11.4g} {rb:9.3f} {rf:7.3f}")


if __name__ == "__main__":
    main()
