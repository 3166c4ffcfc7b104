"""Which event loop and JSON parser should the client use? Side by side, interleaved.

Runs speedbench's real client path (loadgen.run_pass -> client.stream_request) four
ways against benchmarks/sse_server.py: {asyncio, uvloop} x {json, msgspec}. Prints the
added latency at c=256 (paced server, 20 chunks/s per stream) and the ingest rate at
c=16 (burst server) for each. Usage::

    .venv/bin/python benchmarks/client_variants.py [--trials 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

import numpy as np
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
import client_bench as cb  # noqa: E402 -- the benchmark's servers and measurements

import speedbench.client.http as client  # noqa: E402

_raw = json.JSONDecoder().raw_decode


def _json_loads(data: bytes):
    s = data.decode()
    obj, end = _raw(s)
    if end != len(s):
        raise ValueError("trailing data")
    return obj


def _asyncio_run(coro):
    return asyncio.run(coro)


def _uvloop_run(coro):
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as r:
        return r.run(coro)


VARIANTS = {
    "asyncio + json": (_asyncio_run, _json_loads),
    "asyncio + msgspec": (_asyncio_run, client._loads),
    "uvloop + json": (_uvloop_run, _json_loads),
    "uvloop + msgspec": (_uvloop_run, client._loads),  # what `speedbench run` uses
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    a = ap.parse_args()
    if "msgspec" not in sys.modules:
        print("note: msgspec is not installed; the msgspec rows use json")
    res = {v: {"p50": [], "p99": [], "ingest": [], "ingest_cpu": []} for v in VARIANTS}
    paced, paced_url = cb.start_server("paced", 50.0)
    burst, burst_url = cb.start_server("burst", 0.0)
    try:
        for _ in range(a.trials):  # interleaved: slow spells of a shared machine hit every variant
            for name, (run, loads) in VARIANTS.items():
                cb.run_async, client._loads = run, loads
                lat = cb.ours_latency(paced_url, 256, 512, 60)
                res[name]["p50"].append(float(np.percentile(lat, 50)))
                res[name]["p99"].append(float(np.percentile(lat, 99)))
                ing = cb.ours_ingest(burst_url, 16, 32, 2000)
                res[name]["ingest"].append(ing["chunks_per_s"])
                res[name]["ingest_cpu"].append(ing["chunks_per_cpu_s"])
    finally:
        cb.stop(paced)
        cb.stop(burst)
    print(f"1-min load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"{a.trials} trial(s), medians")
    print(f"{'variant':20} {'c=256 p50 ms':>13} {'c=256 p99 ms':>13} {'ingest c=16 /s':>15} {'per CPU-s':>10}")
    for name, d in res.items():
        print(f"{name:20} {np.median(d['p50']):13.3f} {np.median(d['p99']):13.2f} {np.median(d['ingest']):15,.0f} "
              f"{np.median(d['ingest_cpu']):10,.0f}")


if __name__ == "__main__":
    main()
