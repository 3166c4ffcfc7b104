"""A whole point as a run executes it: warmup, a settled Prometheus scrape, every
measured repeat, a settled scrape again."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from speedbench.errors import ServerError
from speedbench.loadgen.job import Metrics, PointJob, ServerAlive, Target
from speedbench.loadgen.loops import ask
from speedbench.loadgen.point import PointResult, run_pass

# Prometheus counters are updated by the API server as outputs stream back; poll until
# two scrapes agree so the "after" snapshot includes the last requests' steps.
_SCRAPE_SETTLE_S = 0.3
_SCRAPE_SETTLE_TRIES = 10


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


async def measure(target: Target, job: PointJob, metrics: Metrics) -> Measurement:
    """Warmup -> settled scrape -> ``job.repeats`` measured passes -> settled scrape.
    The same arrival schedule (rate mode) in every pass.

    The warmup runs once, before the first pass, on the same connections. A scrape
    that fails because the server died aborts the point with the death as the reason;
    any other failed scrape raises :class:`ServerError`. ``metrics`` reads the server's
    ``/metrics`` (the run's engine; tests pass their own).
    """
    m = Measurement([])
    base_url, server_alive = target.client.base_url, target.server_alive

    async def before() -> str | None:
        m.before, died = await _scrape_or_dead(metrics, base_url, server_alive)
        return died

    for r in range(job.repeats):
        res = await run_pass(target, job, job.first_repeat + r, before_measure=before if r == 0 else None)
        # The watchdog polls every 0.5 s; once a server is gone the remaining requests
        # fail in milliseconds, so a pass can end before it looks.
        res.aborted = res.aborted or await ask(server_alive)
        m.repeats.append(res)
        if res.aborted:
            return m
    m.after, m.repeats[-1].aborted = await _scrape_or_dead(metrics, base_url, server_alive)
    return m


async def _scrape_or_dead(metrics: Metrics, base_url: str,
                          server_alive: ServerAlive | None) -> tuple[str, str | None]:
    """(settled /metrics text, None), or ("", why) when the server died: a dead server
    fails the scrape, and the death is what to report, not the failed GET."""
    try:
        return await _settled_scrape(metrics, base_url), None
    except ServerError:
        died = await ask(server_alive)
        if not died:
            raise
        return "", died


async def _settled_scrape(metrics: Metrics, base_url: str) -> str:
    text = await metrics.scrape(base_url)
    for _ in range(_SCRAPE_SETTLE_TRIES):
        await asyncio.sleep(_SCRAPE_SETTLE_S)
        again = await metrics.scrape(base_url)
        if _spec_part(again, metrics) == _spec_part(text, metrics):
            return again
        text = again
    return text


def _spec_part(text: str, metrics: Metrics) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(metrics.settle_prefixes)]
