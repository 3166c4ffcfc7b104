"""One benchmark point: closed-loop concurrency (or open-loop arrivals) over a workload,
with warmup first.

:func:`measure` is a whole point as a run executes it: warmup, a settled Prometheus
scrape, every measured repeat, a settled scrape again. :func:`run_point` is one pass.

- point.py    run_point(): one pass (warmup, then measurement), the loop-lag probe; run_async
- loops.py    the closed loop (workers on a queue), the open loop (arrivals), multi-turn
              conversations, the server watchdog
- measure.py  measure(): warmup -> settled scrape -> repeats -> settled scrape
"""

from speedbench.loadgen.loops import Builder, ServerAlive
from speedbench.loadgen.measure import Measurement, measure
from speedbench.loadgen.point import PointResult, run_async, run_point

__all__ = ["Builder", "Measurement", "PointResult", "ServerAlive", "measure", "run_async", "run_point"]
