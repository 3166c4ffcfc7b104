"""Containers an earlier speedbench run left running.

Every container the docker launcher starts is labelled (engine/docker.py). A harness that
was killed (SIGKILL, a lost SSH session) cannot run its `docker stop`, and the container
keeps its GPUs and port: the next run then fails to load or, worse, measures while
sharing the GPUs. The labels name the owning process, so a container whose owner is
gone is reported as left over, and one whose owner still runs as a run in progress.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass

from speedbench.doctor.base import Check, Context
from speedbench.engine.docker import LABEL

PS_ARGS = ["ps", "--filter", f"label={LABEL}", "--format", "{{json .}}"]


@dataclass(frozen=True)
class Labelled:
    name: str
    status: str
    labels: dict[str, str]

    @property
    def owner(self) -> str:
        return f"{self.labels.get('speedbench.owner_host', '?')}:{self.labels.get('speedbench.owner_pid', '?')}"


def parse_ps(text: str) -> list[Labelled]:
    """`docker ps --format '{{json .}}'` lines -> containers. Labels come as "k=v,k=v"."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue  # daemon warnings share the stream
        try:
            row = json.loads(line)
        except ValueError:
            continue
        labels: dict[str, str] = {}
        for item in str(row.get("Labels") or "").split(","):
            key, sep, value = item.partition("=")
            if sep:
                labels[key.strip()] = value
        out.append(Labelled(str(row.get("Names") or row.get("ID") or "?"), str(row.get("Status") or ""), labels))
    return out


def owner_alive(c: Labelled, *, host: str | None = None) -> bool:
    """True when the labelled owner is a live process on this host."""
    if c.labels.get("speedbench.owner_host") != (host or socket.gethostname()):
        return False  # another host's docker context, or no owner label: cannot tell, treat as left over
    try:
        pid = int(c.labels.get("speedbench.owner_pid", ""))
    except ValueError:
        return False
    if pid <= 0:
        return False  # kill(0) would signal our own process group
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # exists, owned by someone else
    except (ProcessLookupError, OverflowError):
        return False
    return True


def check_leftover_containers(ctx: Context) -> list[Check]:
    launcher = ctx.scenario.server.launcher
    rc, text = ctx.facts.docker(PS_ARGS)
    if rc != 0:
        # No docker here, or the engine check (docker launcher) already says why.
        return []
    found = parse_ps(text)
    if not found:
        return [Check("leftover containers", "ok",
                      "no speedbench containers are running")] if launcher == "docker" else []
    stale = [c for c in found if not owner_alive(c)]
    live = [c for c in found if c not in stale]
    out = []
    if stale:
        names = " ".join(c.name for c in stale)
        desc = ", ".join(f"{c.name} ({c.labels.get('speedbench.scenario') or '?'}/"
                         f"{c.labels.get('speedbench.arm') or '?'}, {c.status or 'running'}, owner {c.owner} gone)"
                         for c in stale)
        out.append(Check("leftover containers", "warn",
                         f"{len(stale)} container(s) left running by an earlier speedbench run hold GPUs and ports: "
                         f"{desc}",
                         f"docker stop {names}"))
    if live:
        desc = ", ".join(f"{c.name} (owner pid {c.labels.get('speedbench.owner_pid')})" for c in live)
        out.append(Check("leftover containers", "warn",
                         f"{len(live)} speedbench container(s) belong to a run still in progress: {desc}",
                         "wait for that run to finish, or give this one other GPUs (server.gpus)"))
    return out
