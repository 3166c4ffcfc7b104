"""The integration tier's shared resources.

scripts/test.sh runs this tier in parallel workers (pytest-xdist, ``--dist loadfile``):
most of its tests wait on subprocesses and fake servers, so several run side by side on
two cores. Each module runs whole on one worker, so a module-scoped fixture (an MLflow
server, a shared fake, a run many tests read) starts once, not once per worker; what
several tests must share lives in one module. The one-node Slurm cluster below is one
such resource: every test that submits to it is in test_slurm.py (the ``slurm`` marker).
(xdist's ``loadgroup`` would group across modules, but with pytest 9.2 its group marks
no longer reach the scheduler: pytest builds node ids apart from the ``_nodeid`` that
xdist 3.8 rewrites, so every test was scheduled on its own.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.helpers.slurm_cluster import Cluster


@pytest.fixture(scope="session")
def cluster():
    """The single-node Slurm (tests/helpers/slurm_cluster.py), started once per worker that
    runs a Slurm test: with ``--dist loadfile`` that is the one worker running test_slurm.py."""
    # Not under pytest's tmp folder: that one is private to root, and munged runs as munge.
    root = Path(tempfile.mkdtemp(prefix="speedbench-slurm-", dir="/tmp"))
    c = Cluster(root)
    try:
        c.start()
    except Exception:
        c.stop()
        raise
    yield c
    subprocess.run(["scancel", "--user=root"], env={**os.environ, **c.env}, check=False)
    c.stop()
    shutil.rmtree(root, ignore_errors=True)
