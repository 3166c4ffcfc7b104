"""One pass over a workload at one concurrency level (or arrival schedule), warmup first.

Besides the request loops (speedbench/loadgen/loops.py), a loop-lag probe runs during
measurement (speedbench/loadgen/lag.py): it sleeps 10 ms and records the overshoot; a
lagging loop delays every timestamp, so each record carries the lag of its own window
and reports show the point's worst.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from speedbench.client.http import make_session
from speedbench.loadgen.job import PointJob, Target
from speedbench.loadgen.lag import LagProbe
from speedbench.loadgen.loops import Pass, Phase, closed_loop, open_loop
from speedbench.records import RequestRecord, wall_s


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


async def _warm_up(session: Any, target: Target, job: PointJob, repeat: int,
                   before_measure: Callable[[], Awaitable[Any]] | None) -> tuple[list[RequestRecord], str | None]:
    """The pass's warmup (the job's first pass only), then ``before_measure``: the warmup's
    records, and why the pass must stop there (the server died), or None."""
    warm_records: list[RequestRecord] = []
    if repeat == job.first_repeat and job.warmup:
        wphase = Phase(key=job.key, repeat=repeat, warmup=True, on_record=None)
        await closed_loop(Pass(session, target, wphase), list(job.warmup))
        if wphase.aborted:
            return wphase.records, wphase.aborted
        warm_records = wphase.records
    if before_measure is not None:
        stop = await before_measure()
        if isinstance(stop, str) and stop:
            return warm_records, stop
    return warm_records, None


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
    session = make_session(target.client, job.key.concurrency)
    lag = LagProbe()
    helpers: list[asyncio.Task] = []
    try:
        warm_records, stop = await _warm_up(session, target, job, repeat, before_measure)
        if stop:
            return PointResult(records=[], wall_s=0.0, loop_lag_ms=lag.stats_ms(), aborted=stop,
                               warmup_records=warm_records)
        phase = await _measure(session, target, job, repeat, lag, helpers)
        return PointResult(records=phase.records, wall_s=wall_s(phase.records), loop_lag_ms=lag.stats_ms(),
                           aborted=phase.aborted, warmup_records=warm_records)
    finally:
        for t in helpers:
            t.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        await session.close()


async def _measure(session: Any, target: Target, job: PointJob, repeat: int, lag: LagProbe,
                   helpers: list[asyncio.Task]) -> Phase:
    """The pass's measured requests, closed loop or at ``job.arrivals``, with the loop-lag
    probe running beside them (added to ``helpers``, which the caller cancels)."""
    # Move every object alive now (imported libraries, earlier records) out of the
    # cyclic collector's reach: with torch/transformers loaded a full collection
    # walks ~400k objects and froze the loop for ~400 ms mid-point in our client
    # benchmark. O(1), no collection triggered, safe with arms in several threads;
    # reference counting still frees these objects as usual.
    gc.freeze()
    helpers.append(asyncio.create_task(lag.run()))
    phase = Phase(key=job.key, repeat=repeat, warmup=False, on_record=target.on_record, lag=lag)
    if job.arrivals is None:
        await closed_loop(Pass(session, target, phase), job.prompts)
    else:
        await open_loop(Pass(session, target, phase), job.prompts, job.arrivals)
    return phase
