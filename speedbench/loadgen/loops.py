"""The request loops of one pass: closed loop (workers on a queue) and open loop (arrivals).

Closed loop: ``concurrency`` worker coroutines pull prompts from one queue in workload
order, so exactly N requests are in flight while prompts remain (fewer only at the
tail). A multi-turn prompt holds its worker (its concurrency slot) for all its turns,
feeding the model's answers back as history, as SPEED-Bench does. A turn that fails
ends its conversation: later turns would need the missing answer.

When the target has ``server_alive``, a watchdog polls it every 0.5 s and aborts the pass
when the server process has died.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

import aiohttp

from speedbench.client.http import stream_request
from speedbench.loadgen.job import OnRecord, ServerAlive, Target
from speedbench.loadgen.lag import LagProbe
from speedbench.records import PointKey, Prompt, RequestRecord

_WATCH_PERIOD_S = 0.5


@dataclass
class Phase:
    """Shared state of one phase (warmup or measurement)."""

    key: PointKey
    repeat: int
    warmup: bool
    on_record: OnRecord | None
    records: list[RequestRecord] = field(default_factory=list)
    aborted: str | None = None
    lag: LagProbe | None = None  # measurement only: each record gets the lag of its window


@dataclass
class Pass:
    """What the loops of one phase share: the HTTP session, the target, the phase's state."""

    session: aiohttp.ClientSession
    target: Target
    phase: Phase


async def ask(server_alive: ServerAlive | None) -> str | None:
    """server_alive()'s message (it may be sync or async), or None while the server lives."""
    if server_alive is None:
        return None
    msg = server_alive()
    if inspect.isawaitable(msg):
        msg = await msg
    return str(msg) if msg else None


async def closed_loop(run: Pass, prompts: Sequence[Prompt]) -> None:
    """``key.concurrency`` workers take the prompts off one queue in workload order."""
    queue: asyncio.Queue[tuple[int, Prompt]] = asyncio.Queue()
    for i, p in enumerate(prompts):
        queue.put_nowait((i, p))
    n_workers = max(1, min(run.phase.key.concurrency, len(prompts)))
    workers = [asyncio.create_task(_worker(run, queue)) for _ in range(n_workers)]
    server_alive = run.target.server_alive
    watchdog = asyncio.create_task(_watch(server_alive, run.phase, workers)) if server_alive else None
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
        await _stop(watchdog)
    _raise_first_error(results)


async def _worker(run: Pass, queue: asyncio.Queue) -> None:
    while not run.phase.aborted:
        try:
            index, prompt = queue.get_nowait()
        except asyncio.QueueEmpty:
            return
        await _conversation(run, index, prompt, perf_counter_ns())


async def _conversation(run: Pass, index: int, prompt: Prompt, t_queued: int) -> None:
    """Every turn of one prompt, in order; ``t_queued`` stamps the first turn."""
    phase, server_alive = run.phase, run.target.server_alive
    history: list[tuple[str, str]] = []
    for turn in range(len(prompt.turns)):
        if phase.aborted:
            return
        if turn:
            t_queued = perf_counter_ns()  # ready for the next turn
        path, body = run.target.builder.build(prompt, turn, history)
        rec = _new_record(phase, index, prompt, turn, t_queued)
        try:
            await stream_request(run.session, run.target.client, path, body, rec)
        except asyncio.CancelledError:
            if phase.aborted:
                rec.error, rec.error_detail = "server_died", phase.aborted
            _finish(rec, phase)
            raise
        if rec.error in ("connection", "truncated", "http_status") and server_alive is not None:
            # Once the server is gone every queued request fails in a millisecond:
            # stop here rather than record the rest of the queue as refused. A vLLM
            # whose engine died answers 500s for a few seconds before it closes.
            died = await _died(server_alive)
            if died:
                phase.aborted = phase.aborted or died
                rec.error, rec.error_detail = "server_died", f"{died} ({rec.error_detail})"
        _finish(rec, phase)
        if rec.error is not None:
            break
        history.append((prompt.turns[turn], rec.output_text))


def _new_record(phase: Phase, index: int, prompt: Prompt, turn: int, t_queued: int) -> RequestRecord:
    """The record of one turn before it is sent: where it belongs (point, round, prompt)."""
    return RequestRecord(
        arm=phase.key.arm,
        concurrency=phase.key.concurrency,
        prompt_index=index,
        prompt_id=prompt.id,
        variant=phase.key.variant,
        repeat=phase.repeat,
        turn=turn,
        category=prompt.category,
        warmup=phase.warmup,
        t_queued_ns=t_queued,
        tags=dict(prompt.tags),
    )


async def open_loop(run: Pass, prompts: Sequence[Prompt], arrivals: Sequence[float]) -> None:
    """Rate mode: prompt i starts its conversation ``arrivals[i]`` seconds after the
    first, whatever is still in flight, with at most ``key.concurrency`` in flight
    (a later arrival waits for a slot). ``t_queued_ns`` is the scheduled arrival, so
    ``queue_wait_ms`` is how late the request went out."""
    phase, server_alive = run.phase, run.target.server_alive
    slots = asyncio.Semaphore(max(1, phase.key.concurrency))
    tasks: list[asyncio.Task] = []

    async def one(i: int, p: Prompt, due: int) -> None:
        try:
            await _conversation(run, i, p, due)
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
        await _stop(watchdog)
    _raise_first_error(results)


async def _stop(task: asyncio.Task | None) -> None:
    """Cancel a helper task (the watchdog) and wait until it has ended."""
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _raise_first_error(results: list[Any]) -> None:
    """gather(..., return_exceptions=True) keeps one task's failure from stopping the
    others; a real error still surfaces here. Cancellations (the watchdog's) are expected."""
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
            raise r


def _finish(rec: RequestRecord, phase: Phase) -> None:
    if phase.lag is not None and rec.t_sent_ns:
        rec.loop_lag_ns = phase.lag.worst(rec.t_sent_ns, rec.t_end_ns or perf_counter_ns())
    phase.records.append(rec)
    if phase.on_record is not None:
        phase.on_record(rec)


async def _died(server_alive: ServerAlive) -> str | None:
    """server_alive()'s message, asked three times: the broken connection (or vLLM's 500)
    can arrive a moment before the dead process is reaped or its log says why."""
    for pause in (0.0, 0.05, 0.2):
        await asyncio.sleep(pause)
        msg = await ask(server_alive)
        if msg:
            return msg
    return None


async def _watch(server_alive: ServerAlive, phase: Phase, workers: list[asyncio.Task]) -> None:
    while True:
        await asyncio.sleep(_WATCH_PERIOD_S)
        msg = await ask(server_alive)
        if msg:
            phase.aborted = msg
            for w in workers:
                w.cancel()
            return
