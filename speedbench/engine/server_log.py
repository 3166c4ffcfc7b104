"""A launched server's log as the launcher reads it back: its last lines for an error
message, and its end, enough for a crash's stack of every thread (engine/diagnose.py)."""

from __future__ import annotations

import os
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
