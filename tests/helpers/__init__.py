"""Test helpers, imported one way: ``from tests.helpers.<module> import ...``.

- fakes.py          the fake server as a context manager, a fake request builder, prompts
- runfactory.py     synthetic run folders (records, summary rows, history) for report tests
- slurm_cluster.py  a single-node Slurm (slurmctld + slurmd + munge) in a temporary folder
- cli_runs.py       scenario files and process tags for tests that run speedbench as a subprocess
"""
