"""What the host was doing while a point ran: its conditions, recorded with the point.

A snapshot is taken as the point starts and again as it ends; the difference is the
point's conditions (metrics/conditions.py compares two arms' and says when a comparison
is confounded). Everything here is cumulative counters read from Linux's /proc, so two
reads cost microseconds and nothing runs beside the timed requests:

* /proc/stat's per-CPU lines for the CPUs this process may run on (a Slurm cpuset's or a
  container's, else the host's): their busy, idle and stolen time, so the busy cores over
  the point and the share a hypervisor stole;
* /proc/<pid>/stat of every process in the server's process group: the CPU the engine
  got (a local launch only; a container's or a remote endpoint's processes are not ours
  to read);
* /proc/self/stat: the client's own CPU (this process, all its threads);
* /proc/loadavg at both ends.

Other work on the host is what the host's busy time holds beyond the engine's and the
client's. On a GPU host run/gpu_watch.py samples the arm's GPUs while the point runs.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedbench.engine.procs import state_and_group

PROC = Path("/proc")


@dataclass
class Snapshot:
    """Cumulative counters at one instant; :func:`between` turns two into conditions."""

    wall_ns: int
    cpus: int = 0  # the CPUs this process may run on (its affinity: a cpuset or container's)
    cpu_total: int | None = None  # jiffies over those CPUs (/proc/stat's cpuN lines), None off Linux
    cpu_idle: int | None = None  # idle + iowait
    cpu_steal: int | None = None
    engine: dict[int, int] | None = None  # pid -> jiffies; None: the engine's processes are not ours to read
    client_jiffies: int | None = None
    load_1m: float | None = None


def _jiffies(stat_text: str) -> int:
    """utime + stime of one /proc/<pid>/stat (fields 14 and 15, counted after the name)."""
    fields = stat_text[stat_text.rfind(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def _affinity() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def _host_cpu(proc: Path, cpus: set[int]) -> tuple[int, int, int] | None:
    """(total, idle + iowait, steal) jiffies over ``cpus`` from /proc/stat's per-CPU lines:
    a Slurm cpuset's or a container's neighbours on other cores are not this run's load."""
    total = idle = steal = 0
    seen = False
    for line in (proc / "stat").read_text().splitlines():
        name, *vals = line.split()
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
            continue
        user, nice, system, idl, iowait, irq, softirq, st = ([int(x) for x in vals[:8]] + [0] * 8)[:8]
        total += user + nice + system + idl + iowait + irq + softirq + st
        idle, steal, seen = idle + idl + iowait, steal + st, True
    return (total, idle, steal) if seen else None


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


def _group_jiffies(pgid: int, proc: Path) -> dict[int, int]:
    out = {}
    for pid in group_pids(pgid, proc):
        try:
            out[pid] = _jiffies((proc / str(pid) / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue
    return out


def take(pgid: int | None, *, proc: Path = PROC) -> Snapshot:
    """The host's counters now; ``pgid``: the engine's process group (None: not ours). A
    counter that cannot be read is left out: conditions are a diagnosis, and must never
    stop the point they describe."""
    cpus = _affinity()
    snap = Snapshot(wall_ns=time.monotonic_ns(), cpus=len(cpus))
    try:
        host = _host_cpu(proc, cpus)
        if host is not None:
            snap.cpu_total, snap.cpu_idle, snap.cpu_steal = host
        if pgid is not None:
            snap.engine = _group_jiffies(pgid, proc) or None
        snap.client_jiffies = _jiffies((proc / "self" / "stat").read_text())
        snap.load_1m = float((proc / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pass  # no /proc (not Linux), or a file not ours to read: what was read stays
    return snap


def _cores(jiffies: int | None, wall_s: float, hz: float) -> float | None:
    return None if jiffies is None or wall_s <= 0 else round(jiffies / hz / wall_s, 3)


def _engine_delta(a: Snapshot, b: Snapshot) -> int | None:
    """The engine's CPU over [a, b], process by process: a worker that started meanwhile
    counts from 0 (its whole life is inside), one that exited takes its time with it."""
    if a.engine is None or b.engine is None:
        return None
    return sum(max(0, j - a.engine.get(pid, 0)) for pid, j in b.engine.items())


def between(a: Snapshot, b: Snapshot, *, hz: float | None = None) -> dict[str, Any]:
    """The conditions over [a, b]: cores busy on this run's CPUs, the engine's, the client's
    and the rest's (other work), the stolen share and the load average at both ends. A
    figure that could not be read is absent, and ``not_checked`` says why
    (metrics/conditions.py names them in the report)."""
    hz = hz or float(os.sysconf("SC_CLK_TCK"))
    ncpu = b.cpus or 1
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
    engine = _engine_delta(a, b)
    client = None if a.client_jiffies is None or b.client_jiffies is None else b.client_jiffies - a.client_jiffies
    out["engine_cores"], out["client_cores"] = _cores(engine, wall, hz), _cores(client, wall, hz)
    if engine is None:
        missing.append("engine CPU (not a local launch)")
    if "host_busy_cores" in out and engine is not None and client is not None:
        out["other_cores"] = round(max(0.0, out["host_busy_cores"] - out["engine_cores"] - out["client_cores"]), 3)
    out["not_checked"] = missing
    return out
