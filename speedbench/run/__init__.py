"""The run path: ``speedbench run`` from a scenario to a finished run folder.

- session.py  a run as a whole: new or resumed, pre-flight, data, summary, exit code
- arms.py     arms in waves (concurrent on disjoint GPUs), signals, one arm's server lifecycle
- point.py    one (arm, concurrency, variant) point: requests, records, Prometheus, status
- context.py  what these share, passed explicitly (nothing is global)

The order inside a point (warmup, settled scrape, measure, scrape) belongs to
:func:`speedbench.runner.measure`.
"""

from speedbench.run.session import new_run, resume_run

__all__ = ["new_run", "resume_run"]
