"""The event-loop lag probe of a pass, and each request's share of it.

The probe sleeps 10 ms again and again and notes how late each wake came. A loop busy
elsewhere (another stream's parsing, a stall, a starved CPU) runs every callback late,
the socket reads that stamp token arrivals included: a stamp can be late by as much as
the loop was. Each measured record gets the worst lateness the probe saw while it was
in flight (``RequestRecord.loop_lag_ns``), from which the metrics bound how far the
client's own clock can have moved its per-user TPS (docs/metrics.md, "The client's own
timing error").
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from time import perf_counter_ns

PROBE_PERIOD_S = 0.010


class LagProbe:
    """Run :meth:`run` as a task on the loop being measured. Each wake is one sample: the
    stretch ``[due, woke]`` during which the loop ran late, ``woke - due`` long."""

    def __init__(self, period_s: float = PROBE_PERIOD_S) -> None:
        self.period_ns = int(period_s * 1e9)
        self.due: list[int] = []
        self.woke: list[int] = []  # increasing: the probe wakes in order
        self._pending_due: int | None = None  # the wake it waits for now

    async def run(self) -> None:
        while True:
            self._pending_due = perf_counter_ns() + self.period_ns
            await asyncio.sleep(self.period_ns / 1e9)
            now = perf_counter_ns()
            self.due.append(self._pending_due)
            self.woke.append(max(now, self._pending_due))

    def worst(self, t0_ns: int, t1_ns: int) -> int:
        """The longest late stretch (ns) that overlaps ``[t0, t1]``, the one still open
        included: the wake that will report a stall often runs just after the request
        it delayed has finished, so its lateness so far counts too."""
        worst = 0
        for i in range(bisect_left(self.woke, t0_ns), len(self.woke)):
            if self.due[i] > t1_ns:
                break
            worst = max(worst, self.woke[i] - self.due[i])
        now = perf_counter_ns()
        if self._pending_due is not None and self._pending_due <= min(now, t1_ns):
            worst = max(worst, now - self._pending_due)
        return worst

    def stats_ms(self) -> dict[str, float]:
        """p50 / p99 / max of the samples, in ms (PointResult.loop_lag_ms)."""
        if not self.woke:
            return {"p50": 0.0, "p99": 0.0, "max": 0.0}
        s = sorted(w - d for d, w in zip(self.due, self.woke))

        def pct(q: float) -> float:
            # nearest-rank: the probe gives hundreds of samples, interpolation adds nothing
            return s[min(len(s) - 1, int(q * len(s)))] / 1e6

        return {"p50": pct(0.50), "p99": pct(0.99), "max": s[-1] / 1e6}
