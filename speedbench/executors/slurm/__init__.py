"""The Slurm executor (docs/slurm.md): one batch job per arm, a dependent gather, status and
cancel. Import the submodules themselves:

- scripts.py     every sbatch file speedbench writes: an arm's job, the gather, and the follow-up
                 jobs of a nightly matrix (promote, dashboard); the argv that starts speedbench in a job
- client.py      the Slurm commands: sbatch, scontrol, sacct, scancel (a fake runner in unit tests)
- submission.py  a run folder's jobs: scripts written into ``RUN/slurm/``, submitted, listed in jobs.json
- states.py      Slurm's job states: each arm's job and its point progress, forgotten jobs, cancel
- gathering.py   the gather: its job's state, and ``speedbench gather RUN`` (finished through run/finish.py)
- executor.py    SlurmExecutor, the Executor that ties them together

Faults: ``--signal=B:TERM@N`` makes the batch shell forward SIGTERM to speedbench N
seconds before the time limit; speedbench marks the running point interrupted, saves,
and exits 130, and the script then requeues its own job (same job id, same files),
which resumes from the finished points. ``speedbench cancel`` leaves a marker first, so
a cancelled job is not requeued.
"""
