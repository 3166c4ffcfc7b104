"""Where a run's arms execute (docs/slurm.md). Import the submodules themselves.

- base.py    the Executor interface (plan, submit, resume, status, gather, cancel) and ArmJob
- kinds.py   the one lookup from ``executor.kind`` to an executor
- local.py   this process runs every arm (speedbench/run/); the default
- slurm.py   one batch job per arm plus a dependent gather job, all writing one run folder
- matrix.py  the nightly matrix: scenarios x checkpoints x overrides

A Kubernetes Job executor would sit beside slurm.py (kubernetes.py) with one entry in kinds.py.
"""
