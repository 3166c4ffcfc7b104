"""Scenario files and process tags for tests that drive ``speedbench`` as a subprocess
against the fake server (tests/integration/: reliability, executors, Slurm).

Every speedbench subprocess a test starts gets a unique ``SPEEDBENCH_TEST_TAG`` in its
environment, which every server it launches (and their workers) inherit; :func:`tagged`
finds the ones still alive.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psutil
import yaml

from speedbench.engine.local import _group_alive

TAG_VAR = "SPEEDBENCH_TEST_TAG"
FAKE_CLI = ["python", "-m", "speedbench.testing.fake_server"]


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def write_prompts(path: Path, rows: list[Any]) -> Path:
    lines = [json.dumps(r if isinstance(r, dict) else {"id": f"row{i}", "prompt": r, "category": "coding"})
             for i, r in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def scenario(name: str, prompts: Path, *, arms: list[dict], server: dict | None = None, **top) -> dict:
    workload = {"source": "jsonl", "path": str(prompts), "max_tokens": 8, "warmup": 0,
                "request_timeout_s": 30, "idle_timeout_s": 10, **top.pop("workload", {})}
    return {"name": name, "server": {"ready_timeout_s": 20, "shutdown_grace_s": 3, **(server or {})},
            "arms": arms, "workload": workload, "concurrency": top.pop("concurrency", [1]), **top}


def fake_local(**args: Any) -> dict:
    """The fake server as a *local* server: speedbench launches, watches and stops it."""
    return {"launcher": "local", "model": "fake-model", "command": FAKE_CLI, "model_arg": "flag", "args": args}


def tagged(tag: str) -> list[psutil.Process]:
    """Live (non-zombie) processes that inherited this test's tag."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(TAG_VAR) == tag and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def alive(pid: int | None) -> bool:
    try:
        return pid is not None and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_no_orphans(tag: str, run: Path | None = None) -> None:
    """Nothing the tagged speedbench started is alive: no tagged process, no server pid or
    process group from the run's provenance, and no child of the test itself."""
    left = tagged(tag)
    assert not left, f"processes started by speedbench still alive: {[(p.pid, p.cmdline()) for p in left]}"
    if run is not None and (run / "provenance.json").exists():
        for arm, prov in json.loads((run / "provenance.json").read_text()).items():
            sp = prov.get("server_process") or {}
            assert not alive(sp.get("pid")), f"arm {arm}: server pid {sp.get('pid')} is alive"
            if sp.get("pgid"):
                assert not _group_alive(sp["pgid"]), f"arm {arm}: process group {sp['pgid']} is alive"
    kids = [c for c in psutil.Process().children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE]
    assert not kids, f"children of the test still alive: {[(c.pid, c.cmdline()) for c in kids]}"
