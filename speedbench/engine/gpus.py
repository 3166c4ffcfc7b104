"""GPU inventory from ``nvidia-smi`` (used by placement and ``speedbench doctor``).

Parsing is kept apart from running the command so tests feed recorded text
(tests/data/nvidia-smi/). Only NVIDIA GPUs are seen; a host without ``nvidia-smi``
has no GPUs as far as speedbench is concerned.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field, replace
from typing import Callable, Literal

GPU_QUERY = [
    "nvidia-smi",
    "--query-gpu=index,name,uuid,memory.total,memory.used,compute_cap,driver_version",
    "--format=csv,noheader,nounits",
]
APPS_QUERY = [
    "nvidia-smi",
    "--query-compute-apps=pid,used_memory,gpu_uuid",
    "--format=csv,noheader,nounits",
]
# nvidia-smi can hang for a long time on a wedged driver; doctor must not.
_TIMEOUT_S = 20.0

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


@dataclass(frozen=True)
class GPUProcess:
    """One compute process holding GPU memory (from ``--query-compute-apps``)."""

    pid: int
    used_memory_mib: int | None  # None when nvidia-smi says [N/A] (e.g. inside some containers)
    gpu_uuid: str


@dataclass(frozen=True)
class GPU:
    index: int
    name: str
    uuid: str
    memory_total_mib: int
    memory_used_mib: int | None
    compute_cap: str  # "9.0", "10.0", "12.0"; "" when nvidia-smi reports [N/A]
    driver: str
    processes: tuple[GPUProcess, ...] = field(default=())

    @property
    def capability(self) -> tuple[int, int]:
        return parse_compute_cap(self.compute_cap)

    @property
    def process_memory_mib(self) -> int:
        """Memory held by compute processes on this GPU (unknown amounts count as 0)."""
        return sum(p.used_memory_mib or 0 for p in self.processes)


@dataclass(frozen=True)
class GPUProbe:
    """What asking nvidia-smi produced: the GPUs, or why there are none."""

    gpus: list[GPU]
    status: Literal["ok", "absent", "failed"]
    message: str = ""  # nvidia-smi's own words when it failed


def parse_compute_cap(cap: str) -> tuple[int, int]:
    try:
        major, _, minor = cap.strip().partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        return (0, 0)


def _int_or_none(text: str) -> int | None:
    # nvidia-smi writes "[N/A]" or "[Not Supported]" for values it cannot read.
    try:
        return int(float(text))
    except ValueError:
        return None


def _rows(text: str, n_fields: int) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        # GPU names never contain commas, so a plain split is exact for these queries.
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != n_fields:
            raise ValueError(f"unexpected nvidia-smi line (wanted {n_fields} fields): {line!r}")
        rows.append(parts)
    return rows


def parse_gpu_query(text: str) -> list[GPU]:
    """Parse ``GPU_QUERY`` output: one line per GPU, seven comma-separated fields."""
    gpus = []
    for idx, name, uuid, total, used, cap, driver in _rows(text, 7):
        gpus.append(
            GPU(
                index=int(idx),
                name=name,
                uuid=uuid,
                memory_total_mib=_int_or_none(total) or 0,
                memory_used_mib=_int_or_none(used),
                compute_cap="" if cap.startswith("[") else cap,
                driver=driver,
            )
        )
    return gpus


def parse_compute_apps(text: str) -> list[GPUProcess]:
    """Parse ``APPS_QUERY`` output; an idle machine prints nothing (or a "No running" line)."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lower().startswith("no running")]
    return [
        GPUProcess(pid=int(pid), used_memory_mib=_int_or_none(mem), gpu_uuid=uuid)
        for pid, mem, uuid in _rows("\n".join(lines), 3)
    ]


def attach_processes(gpus: list[GPU], procs: list[GPUProcess]) -> list[GPU]:
    return [replace(g, processes=tuple(p for p in procs if p.gpu_uuid == g.uuid)) for g in gpus]


def _run(runner: Runner, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return runner(argv, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)


def probe_gpus(runner: Runner = subprocess.run) -> GPUProbe:
    """Ask nvidia-smi for the GPUs and the compute processes on them."""
    try:
        res = _run(runner, GPU_QUERY)
    except FileNotFoundError:
        return GPUProbe([], "absent", "nvidia-smi not found")
    except (OSError, subprocess.TimeoutExpired) as e:
        return GPUProbe([], "failed", f"nvidia-smi did not answer: {e}")
    if res.returncode != 0:
        msg = (res.stdout + res.stderr).strip() or f"exit status {res.returncode}"
        return GPUProbe([], "failed", msg)
    try:
        gpus = parse_gpu_query(res.stdout)
    except ValueError as e:
        return GPUProbe([], "failed", str(e))
    try:
        apps = _run(runner, APPS_QUERY)
        if apps.returncode == 0:
            gpus = attach_processes(gpus, parse_compute_apps(apps.stdout))
    except (OSError, subprocess.TimeoutExpired, ValueError):
        pass  # process memory is a nicety; the inventory itself is fine
    return GPUProbe(gpus, "ok")


def detect_gpus(runner: Runner = subprocess.run) -> list[GPU]:
    """The GPUs on this host; [] when nvidia-smi is absent or fails."""
    return probe_gpus(runner).gpus


# ---- architecture helpers (compute capability major versions) -------------------------

def is_ada(gpu: GPU) -> bool:
    return gpu.capability == (8, 9)


def is_blackwell(gpu: GPU) -> bool:
    """B200 / GB200 / B300 are 10.x, RTX 50xx / RTX PRO 6000 are 12.x."""
    return gpu.capability >= (10, 0)


def architecture(gpu: GPU) -> str:
    major = gpu.capability[0]
    if major >= 10:
        return "Blackwell"
    if major == 9:
        return "Hopper"
    if is_ada(gpu):
        return "Ada"
    if major == 8:
        return "Ampere"
    return f"compute {gpu.compute_cap or 'unknown'}"
