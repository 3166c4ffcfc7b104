"""What the real-vLLM tests that run `speedbench run` as a subprocess share: its command
and environment (a unique tag its processes inherit), the run folder it wrote, and the
check that nothing it started is left (tests/e2e/, tests/integration/test_vllm_refusals.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.helpers.cli_runs import TAG_VAR, assert_no_orphans

__all__ = ["CPU_TINY", "REPO", "TAG_VAR", "assert_no_orphans", "cmd", "env_for", "n_records", "points",
           "server_process", "the_run"]

REPO = Path(__file__).resolve().parents[2]
CPU_TINY = REPO / "scenarios" / "cpu_tiny.yaml"


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
