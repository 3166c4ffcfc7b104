"""The integration tier's shared resources, and how its tests share the workers.

scripts/test.sh runs this tier in parallel workers (pytest-xdist, ``--dist loadgroup``):
most of its tests wait on subprocesses and fake servers, so several run side by side on
two cores. What cannot be shared is declared, and :func:`pytest_collection_modifyitems`
turns each declaration into an xdist group (one worker runs a whole group, in order):

* ``slurm``: the one-node Slurm cluster below (one per session, both Slurm modules);
* every other module is its own group, so a module's module-scoped fixtures (an MLflow
  server, a shared fake, a run many tests read) start once, not once per worker.
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
    """The single-node Slurm (tests/helpers/slurm_cluster.py); the Slurm modules' tests all
    run on one worker (their ``slurm`` group), so one cluster serves them all."""
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


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = "slurm" if item.get_closest_marker("slurm") is not None else Path(str(item.path)).stem
        item.add_marker(pytest.mark.xdist_group(group))
