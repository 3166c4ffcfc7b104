"""Reading Linux's process table: the one parser of ``/proc/<pid>/stat``, shared by the
launcher (is a server's group gone?) and the doctor (leftover servers)."""

from __future__ import annotations

from pathlib import Path


def state_and_group(stat_path: Path | str) -> tuple[str, int]:
    """(state letter, process group id) of one ``/proc/<pid>/stat``. The fields are read
    after the ")" that closes the command name, which may itself hold spaces and
    parentheses: state ppid pgrp ... Raises OSError (gone, not ours), ValueError or
    IndexError (not a stat line)."""
    text = Path(stat_path).read_bytes().decode(errors="replace")
    fields = text[text.rfind(")") + 2:].split()
    return fields[0], int(fields[2])
