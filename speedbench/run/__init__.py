"""The run path: ``speedbench run`` from a scenario to a finished run folder.

- session.py  a run as a whole: new or resumed, pre-flight, data, summary, exit code
- arms.py     arms in waves (concurrent on disjoint GPUs), signals, one arm's server lifecycle
- point.py    one (arm, concurrency, variant) point: requests, records, Prometheus, status
- context.py  what these share, passed explicitly (nothing is global)
- plan.py     what a run will launch and send (the dry-run prints it, the run executes it)
- live.py     the live progress view during a run

The order inside a point (warmup, settled scrape, measure, scrape) belongs to
:func:`speedbench.loadgen.measure`.

``new_run`` and ``resume_run`` load lazily: ``--dry-run``, ``speedbench gather`` and the
Slurm executor import :mod:`speedbench.run.plan`, and importing it must not load the
whole run path (the run path sits above the executors; see docs/architecture.md).
"""

from importlib import import_module
from typing import Any

_LAZY = {"new_run": "speedbench.run.session", "resume_run": "speedbench.run.session"}

__all__ = ["new_run", "resume_run"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'speedbench.run' has no attribute {name!r}")
