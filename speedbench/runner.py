"""One benchmark point: closed-loop concurrency (or open-loop arrivals) over a workload,
with warmup first.

:func:`measure` is a whole point as a run executes it: warmup, a settled Prometheus
scrape, every measured repeat, a settled scrape again. :func:`run_point` is one pass.

Closed loop: ``concurrency`` worker coroutines pull prompts from one queue in workload
order, so exactly N requests are in flight while prompts remain (fewer only at the
tail). A multi-turn prompt holds its worker (its concurrency slot) for all its turns,
feeding the model's answers back as history, as SPEED-Bench does. A turn that fails
ends its conversation: later turns would need the missing answer.

Besides the workers, two helper tasks run during measurement: a loop-lag probe
(sleeps 10 ms and records the overshoot; a lagging loop delays every timestamp, so
reports show it) and, when ``server_alive`` is given, a watchdog that polls it every
0.5 s and aborts the point when the server process has died.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any, Protocol

import aiohttp

from speedbench.client import ClientConfig, make_session, stream_request
from speedbench.errors import ServerError
from speedbench.records import Prompt, RequestRecord
from speedbench.scrape import scrape as scrape_metrics

_WATCH_PERIOD_S = 0.5
_PROBE_PERIOD_S = 0.010
# Prometheus counters are updated by the API server as outputs stream back; poll until
# two scrapes agree so the "after" snapshot includes the last requests' steps.
_SCRAPE_SETTLE_S = 0.3
_SCRAPE_SETTLE_TRIES = 10

ServerAlive = Callable[[], Any]  # -> None while the server lives, else why not (may be async)


def run_async(coro: Awaitable[Any]) -> Any:
    """``asyncio.run`` on uvloop when it is installed (it comes with vLLM). A faster loop
    is less client time per received chunk, so less added latency at high concurrency:
    measured side by side in benchmarks/README.md."""
    try:
        import uvloop  # optional: a bare install without vLLM may lack it
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


class Builder(Protocol):
    def build(self, prompt: Prompt, turn: int, history: list[tuple[str, str]]) -> tuple[str, dict]: ...


@dataclass
class PointResult:
    records: list[RequestRecord]  # measured records in completion order (warmup excluded)
    wall_s: float  # first send -> last end over measured records (0 when none)
    loop_lag_ms: dict[str, float]  # {"p50", "p99", "max"} of the event-loop lag probe
    aborted: str | None = None  # why the point stopped early (server died), else None
    warmup_records: list[RequestRecord] = field(default_factory=list)  # for debugging only


@dataclass
class _Phase:
    """Shared state of one phase (warmup or measurement)."""

    arm: str
    concurrency: int
    variant: str
    repeat: int
    warmup: bool
    on_record: Callable[[RequestRecord], Any] | None
    records: list[RequestRecord] = field(default_factory=list)
    aborted: str | None = None


async def run_point(
    cfg: ClientConfig,
    builder: Builder,
    prompts: list[Prompt],
    *,
    arm: str,
    concurrency: int,
    variant: str = "",
    repeat: int = 0,
    warmup: Iterable[Prompt] = (),
    on_record: Callable[[RequestRecord], Any] | None = None,
    server_alive: Callable[[], Any] | None = None,
    before_measure: Callable[[], Awaitable[Any]] | None = None,
    arrivals: list[float] | None = None,
) -> PointResult:
    """Run warmup then measurement at one concurrency level.

    ``on_record(rec)`` is called (synchronously) as each measured record completes,
    including records of requests cut short by an abort or a cancellation; warmup
    records never reach it. ``server_alive()`` (sync or async) returns None while the
    server lives and a message once it died. ``before_measure()`` (async) runs between
    warmup and measurement, e.g. to scrape Prometheus counters so that their deltas
    exclude warmup traffic; a non-empty string it returns aborts the point with that
    reason (the scrape found the server dead). ``arrivals`` (seconds from the start, one
    per prompt; see speedbench/arrivals.py) switches measurement to the open loop: each
    prompt is sent at its arrival time, with at most ``concurrency`` in flight; warmup
    stays closed-loop. Cancelling the task (Ctrl-C) records in-flight requests
    as "cancelled", hands them to ``on_record`` and re-raises.
    """
    warmup = list(warmup)
    session = make_session(cfg, concurrency)
    lag: list[int] = []
    helpers: list[asyncio.Task] = []
    try:
        if warmup:
            wphase = _Phase(arm, concurrency, variant, repeat, True, None)
            await _run_phase(session, cfg, builder, warmup, wphase, server_alive)
            if wphase.aborted:
                return PointResult([], 0.0, _lag_stats(lag), wphase.aborted, wphase.records)
            warm_records = wphase.records
        else:
            warm_records = []
        if before_measure is not None:
            stop = await before_measure()
            if isinstance(stop, str) and stop:
                return PointResult([], 0.0, _lag_stats(lag), stop, warm_records)
        # Move every object alive now (imported libraries, earlier records) out of the
        # cyclic collector's reach: with torch/transformers loaded a full collection
        # walks ~400k objects and froze the loop for ~400 ms mid-point in our client
        # benchmark. O(1), no collection triggered, safe with arms in several threads;
        # reference counting still frees these objects as usual.
        gc.freeze()
        helpers.append(asyncio.create_task(_lag_probe(lag)))
        phase = _Phase(arm, concurrency, variant, repeat, False, on_record)
        if arrivals is None:
            await _run_phase(session, cfg, builder, prompts, phase, server_alive)
        else:
            await _open_loop(session, cfg, builder, prompts, phase, server_alive, arrivals)
        return PointResult(phase.records, _wall_s(phase.records), _lag_stats(lag), phase.aborted, warm_records)
    finally:
        for t in helpers:
            t.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        await session.close()


@dataclass
class Measurement:
    """A whole point: each measured repeat that ran, and Prometheus text around them."""

    repeats: list[PointResult]
    before: str = ""  # "" when the point stopped before the scrape
    after: str = ""  # "" when the point was aborted

    @property
    def aborted(self) -> str | None:
        return next((r.aborted for r in self.repeats if r.aborted), None)

    @property
    def wall_s(self) -> float:
        return sum(r.wall_s for r in self.repeats)

    @property
    def loop_lag_ms_max(self) -> float:
        return max((r.loop_lag_ms.get("max", 0.0) for r in self.repeats), default=0.0)

    @property
    def n_errors(self) -> int:
        return sum(1 for r in self.repeats for rec in r.records if rec.error)


async def measure(
    cfg: ClientConfig,
    builder: Builder,
    prompts: list[Prompt],
    *,
    arm: str,
    concurrency: int,
    variant: str = "",
    repeats: int = 1,
    warmup: Iterable[Prompt] = (),
    on_record: Callable[[RequestRecord], Any] | None = None,
    server_alive: ServerAlive | None = None,
    scrape: Callable[[str], Awaitable[str]] = scrape_metrics,
    arrivals: list[float] | None = None,
) -> Measurement:
    """Warmup -> settled scrape -> ``repeats`` measured passes -> settled scrape.
    ``arrivals``: rate mode, the same schedule in every repeat (see :func:`run_point`).

    The warmup runs once, before the first repeat, on the same connections. A scrape
    that fails because the server died aborts the point with the death as the reason;
    any other failed scrape raises :class:`ServerError`. ``scrape(base_url)`` returns the
    ``/metrics`` text (injectable for tests).
    """
    m = Measurement([])

    async def before() -> str | None:
        m.before, died = await _scrape_or_dead(scrape, cfg.base_url, server_alive)
        return died

    for r in range(repeats):
        res = await run_point(cfg, builder, prompts, arm=arm, concurrency=concurrency, variant=variant, repeat=r,
                              warmup=warmup if r == 0 else (), on_record=on_record, server_alive=server_alive,
                              before_measure=before if r == 0 else None, arrivals=arrivals)
        # The watchdog polls every 0.5 s; once a server is gone the remaining requests
        # fail in milliseconds, so a pass can end before it looks.
        res.aborted = res.aborted or await _ask(server_alive)
        m.repeats.append(res)
        if res.aborted:
            return m
    m.after, m.repeats[-1].aborted = await _scrape_or_dead(scrape, cfg.base_url, server_alive)
    return m


async def _ask(server_alive: ServerAlive | None) -> str | None:
    if server_alive is None:
        return None
    msg = server_alive()
    if inspect.isawaitable(msg):
        msg = await msg
    return str(msg) if msg else None


async def _scrape_or_dead(scrape: Callable[[str], Awaitable[str]], base_url: str,
                          server_alive: ServerAlive | None) -> tuple[str, str | None]:
    """(settled /metrics text, None), or ("", why) when the server died: a dead server
    fails the scrape, and the death is what to report, not the failed GET."""
    try:
        return await _settled_scrape(scrape, base_url), None
    except ServerError:
        died = await _ask(server_alive)
        if not died:
            raise
        return "", died


async def _settled_scrape(scrape: Callable[[str], Awaitable[str]], base_url: str) -> str:
    text = await scrape(base_url)
    for _ in range(_SCRAPE_SETTLE_TRIES):
        await asyncio.sleep(_SCRAPE_SETTLE_S)
        again = await scrape(base_url)
        if _spec_part(again) == _spec_part(text):
            return again
        text = again
    return text


def _spec_part(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("vllm:spec_decode") or ln.startswith("vllm:generation_tokens")]


async def _run_phase(
    session: aiohttp.ClientSession,
    cfg: ClientConfig,
    builder: Builder,
    prompts: list[Prompt],
    phase: _Phase,
    server_alive: Callable[[], Any] | None,
) -> None:
    queue: asyncio.Queue[tuple[int, Prompt]] = asyncio.Queue()
    for i, p in enumerate(prompts):
        queue.put_nowait((i, p))
    n_workers = max(1, min(phase.concurrency, len(prompts)))
    workers = [asyncio.create_task(_worker(session, cfg, builder, queue, phase, server_alive)) for _ in range(n_workers)]
    watchdog = asyncio.create_task(_watch(server_alive, phase, workers)) if server_alive else None
    try:
        # return_exceptions: a worker cancelled by the watchdog must not stop the others'
        # bookkeeping; a real bug in a worker still surfaces below.
        results = await asyncio.gather(*workers, return_exceptions=True)
    except asyncio.CancelledError:
        # Ctrl-C: gather already cancelled the workers; wait until each has recorded
        # its in-flight request, then propagate.
        await asyncio.gather(*workers, return_exceptions=True)
        raise
    finally:
        if watchdog is not None:
            watchdog.cancel()
            await asyncio.gather(watchdog, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
            raise r


async def _worker(
    session: aiohttp.ClientSession,
    cfg: ClientConfig,
    builder: Builder,
    queue: asyncio.Queue,
    phase: _Phase,
    server_alive: Callable[[], Any] | None = None,
) -> None:
    while not phase.aborted:
        try:
            index, prompt = queue.get_nowait()
        except asyncio.QueueEmpty:
            return
        await _conversation(session, cfg, builder, index, prompt, phase, server_alive, perf_counter_ns())


async def _conversation(
    session: aiohttp.ClientSession,
    cfg: ClientConfig,
    builder: Builder,
    index: int,
    prompt: Prompt,
    phase: _Phase,
    server_alive: Callable[[], Any] | None,
    t_queued: int,
) -> None:
    """Every turn of one prompt, in order; ``t_queued`` stamps the first turn."""
    history: list[tuple[str, str]] = []
    for turn in range(len(prompt.turns)):
        if phase.aborted:
            return
        if turn:
            t_queued = perf_counter_ns()  # ready for the next turn
        path, body = builder.build(prompt, turn, history)
        rec = RequestRecord(
            arm=phase.arm,
            concurrency=phase.concurrency,
            prompt_index=index,
            prompt_id=prompt.id,
            variant=phase.variant,
            repeat=phase.repeat,
            turn=turn,
            category=prompt.category,
            warmup=phase.warmup,
            t_queued_ns=t_queued,
            tags=dict(prompt.tags),
        )
        try:
            await stream_request(session, cfg, path, body, rec)
        except asyncio.CancelledError:
            if phase.aborted:
                rec.error, rec.error_detail = "server_died", phase.aborted
            _finish(rec, phase)
            raise
        if rec.error in ("connection", "truncated") and server_alive is not None:
            # Once the server is gone every queued request fails in a millisecond:
            # stop here rather than record the rest of the queue as refused.
            died = await _died(server_alive)
            if died:
                phase.aborted = phase.aborted or died
                rec.error, rec.error_detail = "server_died", f"{died} ({rec.error_detail})"
        _finish(rec, phase)
        if rec.error is not None:
            break
        history.append((prompt.turns[turn], rec.output_text))


async def _open_loop(
    session: aiohttp.ClientSession,
    cfg: ClientConfig,
    builder: Builder,
    prompts: list[Prompt],
    phase: _Phase,
    server_alive: Callable[[], Any] | None,
    arrivals: list[float],
) -> None:
    """Rate mode: prompt i starts its conversation ``arrivals[i]`` seconds after the
    first, whatever is still in flight, with at most ``phase.concurrency`` in flight
    (a later arrival waits for a slot). ``t_queued_ns`` is the scheduled arrival, so
    ``queue_wait_ms`` is how late the request went out."""
    slots = asyncio.Semaphore(max(1, phase.concurrency))
    tasks: list[asyncio.Task] = []

    async def one(i: int, p: Prompt, due: int) -> None:
        try:
            await _conversation(session, cfg, builder, i, p, phase, server_alive, due)
        finally:
            slots.release()

    watchdog = None
    try:
        if server_alive:
            watchdog = asyncio.create_task(_watch(server_alive, phase, tasks))
        t0 = perf_counter_ns()
        for i, (p, at) in enumerate(zip(prompts, arrivals)):
            due = t0 + int(at * 1e9)
            delay = (due - perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            await slots.acquire()
            if phase.aborted:
                slots.release()
                break
            tasks.append(asyncio.create_task(one(i, p, due)))
        results = await asyncio.gather(*tasks, return_exceptions=True)
    except asyncio.CancelledError:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        if watchdog is not None:
            watchdog.cancel()
            await asyncio.gather(watchdog, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
            raise r


def _finish(rec: RequestRecord, phase: _Phase) -> None:
    phase.records.append(rec)
    if phase.on_record is not None:
        phase.on_record(rec)


async def _died(server_alive: Callable[[], Any]) -> str | None:
    """server_alive()'s message, asked twice: the broken connection can arrive a
    moment before the dead process can be reaped."""
    for pause in (0.0, 0.05):
        await asyncio.sleep(pause)
        msg = server_alive()
        if inspect.isawaitable(msg):
            msg = await msg
        if msg:
            return str(msg)
    return None


async def _watch(server_alive: Callable[[], Any], phase: _Phase, workers: list[asyncio.Task]) -> None:
    while True:
        await asyncio.sleep(_WATCH_PERIOD_S)
        msg = server_alive()
        if inspect.isawaitable(msg):
            msg = await msg
        if msg:
            phase.aborted = str(msg)
            for w in workers:
                w.cancel()
            return


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


def _wall_s(records: list[RequestRecord]) -> float:
    sent = [r.t_sent_ns for r in records if r.t_sent_ns]
    ends = [r.t_end_ns for r in records if r.t_end_ns]
    if not sent or not ends:
        return 0.0
    return (max(ends) - min(sent)) / 1e9
