"""Where a run's arms execute (docs/slurm.md). Import the submodules themselves.

- base.py    Executor (what every executor does: plan, submit, resume, follow-up steps),
             JobExecutor (arms run as scheduler jobs: status, gather, cancel), Submission, Step, ArmJob
- kinds.py   the one lookup from ``executor.kind`` to an executor
- local.py   this process runs every arm (speedbench/run/); the default
- slurm/     one batch job per arm plus a dependent gather job, all writing one run folder
- matrix.py  the nightly matrix: scenarios x checkpoints x overrides

A Kubernetes Job executor would sit beside slurm/ (kubernetes.py) with one entry in kinds.py.
"""
