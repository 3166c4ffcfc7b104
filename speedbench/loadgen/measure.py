"""A whole point as a run executes it: warmup, a settled Prometheus scrape, every
measured repeat (or, under sequential stopping, each batch until the look says stop), a
settled scrape again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from speedbench.errors import ServerError
from speedbench.loadgen.job import Metrics, PointJob, ServerAlive, Target
from speedbench.loadgen.loops import ask
from speedbench.loadgen.point import PointResult, run_pass
from speedbench.records import RequestRecord

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


# go_on(records so far, prompts sent so far) -> True to send the next batch
GoOn = Callable[[list[RequestRecord], int], bool]


async def measure(target: Target, job: PointJob, metrics: Metrics, *,
                  batches: Sequence[Sequence[int]] | None = None, go_on: GoOn | None = None) -> Measurement:
    """Warmup -> settled scrape -> the measured passes -> settled scrape. The passes are
    ``job.repeats`` whole passes (the same arrival schedule, rate mode, in each), or with
    ``batches`` (sequential stopping, stopping/point.py) one closed-loop pass per batch of
    indices into ``job.prompts`` until ``go_on`` says stop (asked after the last batch too:
    it records where the point ended).

    The warmup runs once, before the first pass, on the same connections. A scrape
    that fails because the server died aborts the point with the death as the reason;
    any other failed scrape raises :class:`ServerError`. ``metrics`` reads ``/metrics`` as
    the run's engine does (a stand-in in tests).
    """
    m = Measurement([])
    base_url, server_alive = target.client.base_url, target.server_alive
    records: list[RequestRecord] = []
    sent = 0

    async def before() -> str | None:
        m.before, died = await _scrape_or_dead(metrics, base_url, server_alive)
        return died

    for i, (t, sub, repeat) in enumerate(_passes(target, job, batches)):
        res = await run_pass(t, sub, repeat, before_measure=before if i == 0 else None)
        # The watchdog polls every 0.5 s; once a server is gone the remaining requests
        # fail in milliseconds, so a pass can end before it looks.
        res.aborted = res.aborted or await ask(server_alive)
        m.repeats.append(res)
        records.extend(res.records)
        sent += len(sub.prompts)
        if res.aborted:
            return m
        if go_on is not None and not go_on(records, sent):
            break
    m.after, m.repeats[-1].aborted = await _scrape_or_dead(metrics, base_url, server_alive)
    return m


def _passes(target: Target, job: PointJob,
            batches: Sequence[Sequence[int]] | None) -> Iterator[tuple[Target, PointJob, int]]:
    """(target, job, repeat) of each pass. A batch is a job of its own prompts (the warmup
    with the first only); its records keep the prompt's index in ``job.prompts``, so pairs
    across arms match whatever order the batches follow."""
    if batches is None:
        for r in range(job.repeats):
            yield target, job, job.first_repeat + r
        return
    for b, batch in enumerate(batches):
        index = list(batch)

        def on_record(rec: RequestRecord, index: list[int] = index) -> None:
            # the loops number prompts within the batch; the record keeps the workload's index
            rec.prompt_index = index[rec.prompt_index]
            if target.on_record is not None:
                target.on_record(rec)

        yield (replace(target, on_record=on_record),
               replace(job, prompts=[job.prompts[i] for i in index], warmup=job.warmup if b == 0 else ()),
               job.first_repeat)


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
