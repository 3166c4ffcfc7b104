"""Servers an earlier speedbench run left running (local launcher).

Every server speedbench launches carries its owner's pid and host in its environment
(engine/watchdog.py). The watchdog stops a server whose owner died; this check is the
backstop for anything that still got away (a watchdog killed too, a server started by an
older speedbench). Only the process group leader is named: stopping its group stops vLLM
and all its workers.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from speedbench.doctor.base import Check, Context
from speedbench.engine.procs import state_and_group
from speedbench.engine.watchdog import OWNER_ARM, OWNER_HOST, OWNER_PID


@dataclass(frozen=True)
class Tagged:
    pid: int
    pgid: int
    cmdline: str
    owner_pid: int
    owner_host: str
    arm: str


def scan_proc(root: str = "/proc") -> list[Tagged]:
    """Live processes whose environment names a speedbench owner (Linux /proc)."""
    out = []
    try:
        pids = [int(d) for d in os.listdir(root) if d.isdigit()]
    except OSError:
        return []
    for pid in pids:
        try:
            with open(f"{root}/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            if OWNER_PID.encode() not in env:
                continue
            state, pgid = state_and_group(f"{root}/{pid}/stat")
            if state == "Z":
                continue
            with open(f"{root}/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            out.append(Tagged(pid=pid, pgid=pgid, cmdline=cmd, owner_pid=int(env[OWNER_PID.encode()] or 0),
                              owner_host=env.get(OWNER_HOST.encode(), b"").decode(),
                              arm=env.get(OWNER_ARM.encode(), b"").decode()))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
    return out


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (ProcessLookupError, OverflowError):
        return False
    return True


def check_leftover_servers(ctx: Context) -> list[Check]:
    procs = ctx.facts.processes() if ctx.facts.processes else scan_proc()
    host = socket.gethostname()
    leaders = [p for p in procs if p.pid == p.pgid]
    stale = [p for p in leaders if p.owner_host == host and not _alive(p.owner_pid)]
    if not stale:
        return []
    desc = ", ".join(f"pid {p.pid} (arm {p.arm or '?'}, owner pid {p.owner_pid} gone): {p.cmdline[:120]}"
                     for p in stale)
    fix = "; ".join(f"kill -TERM -- -{p.pgid}" for p in stale)
    return [Check("leftover servers", "warn",
                  f"{len(stale)} server(s) left running by an earlier speedbench run hold GPUs and ports: {desc}", fix)]
