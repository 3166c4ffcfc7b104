"""What the real-vLLM tests that run `speedbench run` as a subprocess share: its command
and environment (a unique tag its processes inherit), the run folder it wrote, and the
check that nothing it started is left (tests/e2e/, tests/integration/test_vllm_refusals.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import psutil

from speedbench.engine.local import _group_alive

REPO = Path(__file__).resolve().parents[2]
CPU_TINY = REPO / "scenarios" / "cpu_tiny.yaml"
TAG_VAR = "SPEEDBENCH_TEST_TAG"


def env_for(tag: str, **extra: str) -> dict[str, str]:
    return {**os.environ, TAG_VAR: tag, "COLUMNS": "250", **extra}


def cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "speedbench.cli", *args]


def the_run(out: Path) -> Path:
    runs = sorted(p for p in out.glob("*/*") if p.is_dir())
    assert len(runs) == 1, runs
    return runs[0]


def points(run: Path) -> dict:
    p = run / "points.json"
    return {(d["arm"], d["concurrency"], d["variant"]): d for d in (json.loads(p.read_text()) if p.exists() else [])}


def n_records(run: Path) -> int:
    p = run / "records.jsonl"
    return sum(1 for line in p.read_text().splitlines() if line.strip()) if p.exists() else 0


def server_process(run: Path, arm: str) -> dict | None:
    p = run / "provenance.json"
    try:
        return json.loads(p.read_text()).get(arm, {}).get("server_process")
    except (OSError, ValueError):
        return None


def alive(pid: int | None) -> bool:
    try:
        return pid is not None and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_no_orphans(tag: str, run: Path | None) -> None:
    left = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(TAG_VAR) == tag and p.status() != psutil.STATUS_ZOMBIE:
                left.append((p.pid, " ".join(p.cmdline())[:120]))
        except (psutil.Error, OSError):
            continue
    assert not left, f"processes started by speedbench still alive: {left}"
    if run is not None and (run / "provenance.json").exists():
        for arm, prov in json.loads((run / "provenance.json").read_text()).items():
            sp = prov.get("server_process") or {}
            assert not alive(sp.get("pid")), f"arm {arm}: server pid {sp.get('pid')} alive"
            if sp.get("pgid"):
                assert not _group_alive(sp["pgid"]), f"arm {arm}: process group {sp['pgid']} alive"
    kids = [c for c in psutil.Process().children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE]
    assert not kids, f"children of the test still alive: {[(c.pid, c.cmdline()) for c in kids]}"
