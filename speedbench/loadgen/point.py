"""One pass over a workload at one concurrency level (or arrival schedule), warmup first.

Besides the request loops (speedbench/loadgen/loops.py), a loop-lag probe runs during
measurement: it sleeps 10 ms and records the overshoot; a lagging loop delays every
timestamp, so reports show it.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

from speedbench.client.http import make_session
from speedbench.loadgen.job import PointJob, Target
from speedbench.loadgen.loops import Pass, Phase, closed_loop, open_loop
from speedbench.records import RequestRecord, wall_s

_PROBE_PERIOD_S = 0.010


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    """``asyncio.run`` on uvloop when it is installed (it comes with vLLM). A faster loop
    is less client time per received chunk, so less added latency at high concurrency:
    measured side by side in benchmarks/README.md."""
    try:
        import uvloop  # optional: a bare install without vLLM may lack it
    except ImportError:
        return asyncio.run(coro)
    if sys.version_info < (3, 11):  # no asyncio.Runner yet
        loop = uvloop.new_event_loop()
        try:
            return loop.run_until_complete(coro)
        finally:
            loop.close()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


@dataclass
class PointResult:
    records: list[RequestRecord]  # measured records in completion order (warmup excluded)
    wall_s: float  # first send -> last end over measured records (0 when none)
    loop_lag_ms: dict[str, float]  # {"p50", "p99", "max"} of the event-loop lag probe
    aborted: str | None = None  # why the point stopped early (server died), else None
    warmup_records: list[RequestRecord] = field(default_factory=list)  # for debugging only


async def run_pass(
    target: Target,
    job: PointJob,
    repeat: int,
    before_measure: Callable[[], Awaitable[Any]] | None = None,
) -> PointResult:
    """One pass of ``job``, numbered ``repeat``: its warmup first when this is the job's
    first pass (``repeat == job.first_repeat``), then measurement, closed loop or at
    ``job.arrivals`` (warmup stays closed-loop).

    ``before_measure()`` (async) runs between warmup and measurement, e.g. to scrape
    Prometheus counters so that their deltas exclude warmup traffic; a non-empty string
    it returns aborts the pass with that reason (the scrape found the server dead).
    Cancelling the task (Ctrl-C) records in-flight requests as "cancelled", hands them to
    ``target.on_record`` and re-raises.
    """
    warmup = list(job.warmup) if repeat == job.first_repeat else []
    session = make_session(target.client, job.key.concurrency)
    lag: list[int] = []
    helpers: list[asyncio.Task] = []
    try:
        if warmup:
            wphase = Phase(key=job.key, repeat=repeat, warmup=True, on_record=None)
            await closed_loop(Pass(session, target, wphase), warmup)
            if wphase.aborted:
                return PointResult(records=[], wall_s=0.0, loop_lag_ms=_lag_stats(lag), aborted=wphase.aborted,
                                   warmup_records=wphase.records)
            warm_records = wphase.records
        else:
            warm_records = []
        if before_measure is not None:
            stop = await before_measure()
            if isinstance(stop, str) and stop:
                return PointResult(records=[], wall_s=0.0, loop_lag_ms=_lag_stats(lag), aborted=stop,
                                   warmup_records=warm_records)
        # Move every object alive now (imported libraries, earlier records) out of the
        # cyclic collector's reach: with torch/transformers loaded a full collection
        # walks ~400k objects and froze the loop for ~400 ms mid-point in our client
        # benchmark. O(1), no collection triggered, safe with arms in several threads;
        # reference counting still frees these objects as usual.
        gc.freeze()
        helpers.append(asyncio.create_task(_lag_probe(lag)))
        phase = Phase(key=job.key, repeat=repeat, warmup=False, on_record=target.on_record)
        if job.arrivals is None:
            await closed_loop(Pass(session, target, phase), job.prompts)
        else:
            await open_loop(Pass(session, target, phase), job.prompts, job.arrivals)
        return PointResult(records=phase.records, wall_s=wall_s(phase.records), loop_lag_ms=_lag_stats(lag),
                           aborted=phase.aborted, warmup_records=warm_records)
    finally:
        for t in helpers:
            t.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        await session.close()


async def _lag_probe(samples: list[int]) -> None:
    period_ns = int(_PROBE_PERIOD_S * 1e9)
    while True:
        t0 = perf_counter_ns()
        await asyncio.sleep(_PROBE_PERIOD_S)
        samples.append(max(0, perf_counter_ns() - t0 - period_ns))


def _lag_stats(samples: list[int]) -> dict[str, float]:
    if not samples:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    s = sorted(samples)

    def pct(q: float) -> float:
        # nearest-rank: the probe gives hundreds of samples, interpolation adds nothing
        return s[min(len(s) - 1, int(q * len(s)))] / 1e6

    return {"p50": pct(0.50), "p99": pct(0.99), "max": s[-1] / 1e6}

