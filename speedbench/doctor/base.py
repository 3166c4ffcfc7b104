"""The machine as the doctor reads it (:class:`Host`, one injectable probe per fact) and
the helpers its checks share. The check vocabulary (Check, Facts, Context) is
engine/preflight.py's, so an engine's own checks need nothing from doctor/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from speedbench.engine.base import argv_value
from speedbench.engine.gpus import GPU, GPUProbe, probe_gpus
from speedbench.engine.preflight import UNREAD, Check, Context, DockerRunner, Facts
from speedbench.engine.probe import port_is_free
from speedbench.scenario import ArmSpec, Scenario

# Check, Context, Facts and argv_value are the doctor's checks' vocabulary, imported from here.
__all__ = ["Check", "Context", "Facts", "Host", "argv_value", "launched_arms"]


def free_bytes(path: Path) -> int:
    probe = Path(path).expanduser()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent  # the cache folder may not exist yet; its disk does
    return shutil.disk_usage(probe).free


def run_docker(args: list[str]) -> tuple[int, str]:
    try:
        res = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError:
        return 127, "docker: command not found"
    except subprocess.TimeoutExpired:
        return 124, f"docker {' '.join(args[:2])} did not answer within 30 s"
    return res.returncode, (res.stdout + res.stderr).strip()


@dataclass(frozen=True)
class Host:
    """The machine as doctor may be told it, one injectable probe per fact; None (the
    default) reads the real machine, so tests can play any host.

    gpus: a GPU list or a probe (None: ask nvidia-smi). packages: distribution -> version
    of the engine's builds (None: the engine reads this machine's). env: the environment
    (HF cache location, tokens). which: PATH lookup. disk_free(path) -> bytes.
    port_free(host, port). docker(args) -> (rc, output). engine_source: the installed
    engine's package folder, whose names its checks read (None: cannot verify; left out:
    the engine finds its own). executable: the Python that would run the engine.
    check_source: the workload check (None: speedbench.workload's). cpu: the host CPU as
    the engine's kernel check reads it (None: the engine reads this machine's).
    """

    gpus: list[GPU] | GPUProbe | None = None
    packages: Mapping[str, str] | None = None
    env: Mapping[str, str] | None = None
    which: Callable[[str], str | None] | None = None
    disk_free: Callable[[Path], int] | None = None
    port_free: Callable[[str, int], bool] | None = None
    docker: DockerRunner | None = None
    engine_source: Any = UNREAD
    executable: str | None = None
    check_source: Callable[[Any], Any] | None = None
    cpu: dict[str, Any] | None = None

    def facts(self) -> Facts:
        """The facts, each read from the machine where this host leaves it out; the
        engine's own (its installation, the CPU its kernels depend on) are left for the
        engine's checks to read."""
        gpus = self.gpus
        if gpus is None:
            probe = probe_gpus()
        elif isinstance(gpus, GPUProbe):
            probe = gpus
        else:
            probe = GPUProbe(list(gpus), "ok" if gpus else "absent", "" if gpus else "no GPUs given")
        return Facts(
            gpus=probe,
            packages=None if self.packages is None else dict(self.packages),
            env=dict(os.environ) if self.env is None else dict(self.env),
            which=self.which or shutil.which,
            disk_free=self.disk_free or free_bytes,
            port_free=self.port_free or port_is_free,
            docker=self.docker or run_docker,
            engine_source=self.engine_source,
            executable=self.executable or sys.executable,
            check_source=self.check_source,
            cpu=None if self.cpu is None else dict(self.cpu),
        )


def launched_arms(sc: Scenario) -> list[ArmSpec]:
    if sc.server.launcher == "external":
        return []
    return [a for a in sc.arms if not a.base_url]


