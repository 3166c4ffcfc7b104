"""Reading Linux's process table: the one parser of ``/proc/<pid>/stat``, shared by the
launcher (is a server's group gone? group_alive) and the doctor (leftover servers)."""

from __future__ import annotations

import os
from pathlib import Path


def state_and_group(stat_path: Path | str) -> tuple[str, int]:
    """(state letter, process group id) of one ``/proc/<pid>/stat``. The fields are read
    after the ")" that closes the command name, which may itself hold spaces and
    parentheses: state ppid pgrp ... Raises OSError (gone, not ours), ValueError or
    IndexError (not a stat line)."""
    text = Path(stat_path).read_bytes().decode(errors="replace")
    fields = text[text.rfind(")") + 2:].split()
    return fields[0], int(fields[2])


def group_alive(pgid: int) -> bool:
    """True while a non-zombie process is left in the group (zombies hold no resources)."""
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                state, group = state_and_group(entry / "stat")
            except (OSError, ValueError, IndexError):
                continue
            if group == pgid and state not in ("Z", "X"):
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
