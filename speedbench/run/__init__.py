"""The run path: ``speedbench run`` from a scenario to a finished run folder.

- session.py  a run as a whole: new or resumed (``new_run``, ``resume_run``), pre-flight, data, summary, exit code
- arms.py     arms in waves (concurrent on disjoint GPUs), signals, one arm's server lifecycle
- point.py    one (arm, concurrency, variant) point: requests, records, Prometheus, status
- context.py  what these share, passed explicitly (nothing is global)
- plan.py     what a run will launch and send (the dry-run prints it, the run executes it)
- live.py     the live progress view during a run
- progress.py what the run path tells its user, through a Progress the caller supplies

The order inside a point (warmup, settled scrape, measure, scrape) belongs to
:func:`speedbench.loadgen.measure`.

This file imports nothing: ``--dry-run``, ``speedbench gather`` and the Slurm executor
import :mod:`speedbench.run.plan`, and importing it must not load the whole run path (the
run path sits above the executors; see docs/architecture.md). Callers that run import
:mod:`speedbench.run.session`.
"""
