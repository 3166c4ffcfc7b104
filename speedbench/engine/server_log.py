"""A launched server's log as the launcher reads it back: its last lines for an error
message, and its end, enough for a crash's stack of every thread; and what its engine
reads there as the cause of death (a :class:`Death`: vLLM's reader is engine/vllm/diagnose.py)."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

LOG_TAIL_LINES = 30


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def log_end(path: Path, size: int = 256 * 1024) -> str:
    """The log's last ``size`` bytes: enough for a crash's stack of every thread."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


@dataclass(frozen=True)
class Death:
    cause: str  # "vLLM's engine process died of SIGILL (illegal instruction) in torch.ops._C.x"
    fix: str = ""  # "" when none is known


def signal_name(code: int) -> str:
    """-4 -> "SIGILL": Python's exit code for a process ended by a signal is minus it."""
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"
