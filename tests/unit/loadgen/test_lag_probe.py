"""The loop-lag probe's share per request (loadgen/lag.py): which late stretches count
for a window, the one still open when a request finishes, and a real stall."""

from __future__ import annotations

import asyncio
import time
from time import perf_counter_ns

from speedbench.loadgen.lag import LagProbe

MS = 1_000_000


def test_a_window_gets_the_worst_late_stretch_that_overlaps_it():
    p = LagProbe()
    # (due, woke) in ms: late by 1, 7, 3 and 20 ms
    for due, woke in ((10, 11), (21, 28), (38, 41), (51, 71)):
        p.due.append(due * MS)
        p.woke.append(woke * MS)
    assert p.worst(0, 9 * MS) == 0  # before any lateness
    assert p.worst(12 * MS, 20 * MS) == 0  # between two late stretches
    assert p.worst(25 * MS, 40 * MS) == 7 * MS  # overlaps the 7 ms and the 3 ms stretch
    assert p.worst(42 * MS, 52 * MS) == 20 * MS  # the 20 ms stretch began inside the window
    assert p.worst(0, 100 * MS) == 20 * MS
    assert p.stats_ms()["max"] == 20.0


def test_the_stretch_still_open_when_a_request_finishes_counts():
    # the wake that will report a stall usually runs after the request it delayed has
    # finished: its lateness so far must count already
    p = LagProbe()
    p._pending_due = perf_counter_ns() - 5 * MS
    assert p.worst(perf_counter_ns() - 50 * MS, perf_counter_ns()) >= 5 * MS
    # a stretch that opened after the window ended does not
    p._pending_due = perf_counter_ns() - 5 * MS
    assert p.worst(perf_counter_ns() - 50 * MS, p._pending_due - MS) == 0


def test_a_real_stall_of_the_loop_is_seen_by_a_window_ending_right_after_it():
    async def go() -> tuple[int, float]:
        p = LagProbe()
        task = asyncio.create_task(p.run())
        await asyncio.sleep(0)  # the probe starts its first 10 ms sleep
        t0 = perf_counter_ns()
        time.sleep(0.030)  # the loop blocked 30 ms: at least 20 of them past the probe's due time
        worst = p.worst(t0, perf_counter_ns())
        await asyncio.sleep(0.02)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return worst, p.stats_ms()["max"]

    worst, stats_max = asyncio.run(go())
    assert worst >= 20 * MS and stats_max >= 20.0
