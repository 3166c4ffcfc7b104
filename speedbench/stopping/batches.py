"""A point measured in batches that may stop early (sequential stopping): warmup, a
settled scrape, one closed-loop pass per batch until the caller says stop, a settled
scrape. What decides after each batch is stopping/point.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from speedbench.loadgen.job import Metrics, PointJob, Target
from speedbench.loadgen.loops import ask
from speedbench.loadgen.measure import Measurement, _scrape_or_dead
from speedbench.loadgen.point import run_pass
from speedbench.records import RequestRecord

# go_on(records so far, prompts sent so far) -> True to send the next batch
GoOn = Callable[[list[RequestRecord], int], bool]


async def measure_batches(target: Target, job: PointJob, batches: Sequence[Sequence[int]], go_on: GoOn,
                          metrics: Metrics) -> Measurement:
    """``batches`` holds indices into ``job.prompts``; each batch is one pass (one
    ``PointResult`` in the measurement). Records keep the prompt's index in
    ``job.prompts``, so pairs across arms match whatever order the batches follow. The
    warmup runs before the first batch only; the Prometheus snapshots bracket all of
    them (nothing else runs on the server between batches)."""
    m = Measurement([])
    base_url, server_alive = target.client.base_url, target.server_alive
    records: list[RequestRecord] = []

    async def before() -> str | None:
        m.before, died = await _scrape_or_dead(metrics, base_url, server_alive)
        return died

    sent = 0
    for b, batch in enumerate(batches):
        index = list(batch)

        def on_record(rec: RequestRecord, index: list[int] = index) -> None:
            # the loops number prompts within the batch; the record keeps the workload's index
            rec.prompt_index = index[rec.prompt_index]
            if target.on_record is not None:
                target.on_record(rec)

        sub = replace(job, prompts=[job.prompts[i] for i in index], warmup=job.warmup if b == 0 else ())
        res = await run_pass(replace(target, on_record=on_record), sub, job.first_repeat,
                             before_measure=before if b == 0 else None)
        res.aborted = res.aborted or await ask(server_alive)
        m.repeats.append(res)
        records.extend(res.records)
        sent += len(index)
        if res.aborted:
            return m
        if not go_on(records, sent):  # asked after the last batch too: it records where the point ended
            break
    m.after, m.repeats[-1].aborted = await _scrape_or_dead(metrics, base_url, server_alive)
    return m
