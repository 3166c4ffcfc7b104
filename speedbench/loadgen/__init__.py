"""One benchmark point: closed-loop concurrency (or open-loop arrivals) over a workload,
with warmup first.

:func:`measure` is a whole point as a run executes it: warmup, a settled Prometheus
scrape, every measured repeat, a settled scrape again. :func:`run_pass` is one pass.
Both take a :class:`Target` (where requests go) and a :class:`PointJob` (what to send).

- job.py      PointJob (key, prompts, warmup, repeats, arrivals), Target (client, builder,
              liveness probe, record sink) and Metrics (the engine's /metrics scrape)
- point.py    run_pass(): one pass (warmup, then measurement), the loop-lag probe; run_async
- loops.py    the closed loop (workers on a queue), the open loop (arrivals), multi-turn
              conversations, the server watchdog
- measure.py  measure(): warmup -> settled scrape -> repeats -> settled scrape
"""

from speedbench.loadgen.job import Builder, Metrics, PointJob, ServerAlive, Target
from speedbench.loadgen.measure import Measurement, measure
from speedbench.loadgen.point import PointResult, run_async, run_pass

__all__ = ["Builder", "Measurement", "Metrics", "PointJob", "PointResult", "ServerAlive", "Target", "measure",
           "run_async", "run_pass"]
