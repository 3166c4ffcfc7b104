"""What the host was doing while a point ran: its conditions, recorded with the point.

A snapshot is taken as the point starts and again as it ends; the difference is the
point's conditions (metrics/conditions.py compares two arms' and says when a comparison
is confounded). Everything here is cumulative counters read from Linux's /proc, so two
reads cost microseconds and nothing runs beside the timed requests:

* /proc/stat's first line: every CPU's busy, idle and stolen time, so the host's busy
  cores over the point and the share a hypervisor stole;
* /proc/<pid>/stat of every process in the server's process group: the CPU the engine
  got (a local launch only; a container's or a remote endpoint's processes are not ours
  to read);
* /proc/self/stat: the client's own CPU (this process, all its threads);
* /proc/loadavg at both ends.

Other work on the host is what the host's busy time holds beyond the engine's and the
client's. On a GPU host ``nvidia-smi`` adds each GPU's SM clock, power, temperature and
the compute processes outside the engine, read at both ends.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedbench.engine.procs import state_and_group

PROC = Path("/proc")
GPU_CONDITIONS_QUERY = ["nvidia-smi", "--query-gpu=index,clocks.sm,power.draw,temperature.gpu",
                        "--format=csv,noheader,nounits"]
GPU_APPS_QUERY = ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader,nounits"]
_NVSMI_TIMEOUT_S = 5.0  # a wedged driver must not hold a point up


@dataclass
class Snapshot:
    """Cumulative counters at one instant; :func:`between` turns two into conditions."""

    wall_ns: int
    cpu_total: int | None = None  # jiffies over every CPU (/proc/stat), None off Linux
    cpu_idle: int | None = None  # idle + iowait
    cpu_steal: int | None = None
    engine_jiffies: int | None = None  # None: the engine's processes are not ours to read
    client_jiffies: int | None = None
    load_1m: float | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    gpu_other_pids: int | None = None  # compute processes outside the engine's group


def _jiffies(stat_text: str) -> int:
    """utime + stime of one /proc/<pid>/stat (fields 14 and 15, counted after the name)."""
    fields = stat_text[stat_text.rfind(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def _host_cpu(proc: Path) -> tuple[int, int, int] | None:
    """(total, idle + iowait, steal) jiffies from /proc/stat's aggregate line."""
    try:
        first = (proc / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    vals = [int(x) for x in first[1:9]] + [0] * (8 - len(first[1:9]))
    user, nice, system, idle, iowait, irq, softirq, steal = vals[:8]
    return user + nice + system + idle + iowait + irq + softirq + steal, idle + iowait, steal


def group_pids(pgid: int, proc: Path = PROC) -> list[int]:
    """Every live process of one process group."""
    out = []
    for d in proc.iterdir():
        if d.name.isdigit():
            try:
                if state_and_group(d / "stat")[1] == pgid:
                    out.append(int(d.name))
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile, or not ours to read
    return out


def _group_jiffies(pgid: int, proc: Path) -> int | None:
    total, seen = 0, False
    for pid in group_pids(pgid, proc):
        try:
            total += _jiffies((proc / str(pid) / "stat").read_text())
            seen = True
        except (OSError, ValueError, IndexError):
            continue
    return total if seen else None


def _load(proc: Path) -> float | None:
    try:
        return float((proc / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def parse_gpu_conditions(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu`` CSV -> one
    dict per GPU (a field nvidia-smi reports as [N/A] is None)."""
    def val(s: str) -> float | None:
        try:
            return float(s)
        except ValueError:
            return None
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and parts[0].isdigit():
            out.append({"index": int(parts[0]), "sm_clock_mhz": val(parts[1]), "power_w": val(parts[2]),
                        "temperature_c": val(parts[3])})
    return out


def _nvidia_smi(argv: list[str]) -> str | None:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=_NVSMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 else None


def _gpu_part(snap: Snapshot, pgid: int | None, proc: Path) -> None:
    text = _nvidia_smi(GPU_CONDITIONS_QUERY)
    if text is None:
        return
    snap.gpus = parse_gpu_conditions(text)
    apps = _nvidia_smi(GPU_APPS_QUERY)
    if apps is not None:
        pids = {int(x) for x in apps.split() if x.strip().isdigit()}
        ours = set(group_pids(pgid, proc)) if pgid is not None else set()
        snap.gpu_other_pids = len(pids - ours)


def take(pgid: int | None, *, gpus: bool, proc: Path = PROC) -> Snapshot:
    """The host's counters now; ``pgid``: the engine's process group (None: not ours)."""
    snap = Snapshot(wall_ns=time.monotonic_ns())
    host = _host_cpu(proc)
    if host is not None:
        snap.cpu_total, snap.cpu_idle, snap.cpu_steal = host
    if pgid is not None:
        snap.engine_jiffies = _group_jiffies(pgid, proc)
    try:
        snap.client_jiffies = _jiffies((proc / "self" / "stat").read_text())
    except (OSError, ValueError, IndexError):
        pass
    snap.load_1m = _load(proc)
    if gpus:
        _gpu_part(snap, pgid, proc)
    return snap


def _cores(jiffies: int | None, wall_s: float, hz: float) -> float | None:
    return None if jiffies is None or wall_s <= 0 else round(jiffies / hz / wall_s, 3)


def between(a: Snapshot, b: Snapshot, *, ncpu: int | None = None, hz: float | None = None) -> dict[str, Any]:
    """The conditions over [a, b]: cores busy on the host, the engine's, the client's and
    the rest's (other work), the stolen share, the load average at both ends, and the GPUs'
    figures at both ends. A figure that could not be read is absent, and ``not_checked``
    says why (metrics/conditions.py names them in the report)."""
    hz = hz or float(os.sysconf("SC_CLK_TCK"))
    ncpu = ncpu or os.cpu_count() or 1
    wall = (b.wall_ns - a.wall_ns) / 1e9
    out: dict[str, Any] = {"wall_s": round(wall, 3), "cpus": ncpu, "load_1m": [a.load_1m, b.load_1m]}
    missing: list[str] = []
    if a.cpu_total is not None and b.cpu_total is not None and b.cpu_total > a.cpu_total:
        total = b.cpu_total - a.cpu_total
        steal = (b.cpu_steal or 0) - (a.cpu_steal or 0)
        busy = total - ((b.cpu_idle or 0) - (a.cpu_idle or 0)) - steal  # stolen time ran nothing of ours
        out["host_busy_cores"] = round(ncpu * busy / total, 3)
        out["steal_share"] = round(steal / total, 4)
    else:
        missing.append("host CPU (no /proc/stat)")
    engine = None if a.engine_jiffies is None or b.engine_jiffies is None else b.engine_jiffies - a.engine_jiffies
    client = None if a.client_jiffies is None or b.client_jiffies is None else b.client_jiffies - a.client_jiffies
    out["engine_cores"], out["client_cores"] = _cores(engine, wall, hz), _cores(client, wall, hz)
    if engine is None:
        missing.append("engine CPU (not a local launch)")
    if "host_busy_cores" in out and engine is not None and client is not None:
        out["other_cores"] = round(max(0.0, out["host_busy_cores"] - out["engine_cores"] - out["client_cores"]), 3)
    if b.gpus:
        out["gpus"] = [{"index": g["index"], **{k: [_of(a.gpus, g["index"], k), g.get(k)]
                                                 for k in ("sm_clock_mhz", "power_w", "temperature_c")}}
                       for g in b.gpus]
        out["gpu_other_processes"] = max(x for x in (a.gpu_other_pids, b.gpu_other_pids, 0) if x is not None)
    out["not_checked"] = missing
    return out


def _of(gpus: list[dict[str, Any]], index: int, key: str) -> Any:
    return next((g.get(key) for g in gpus if g.get("index") == index), None)
