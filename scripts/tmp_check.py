"""What a test suite left in the system's temporary folder (/tmp).

scripts/test.sh runs the suite with TMPDIR and pytest's --basetemp inside one folder of its
own, which it removes at the end; so nothing the suite makes through ``tempfile`` or pytest
stays behind. What could still land in /tmp is what names /tmp itself. This check lists
the entries there that only a suite makes (pytest's, vLLM's, speedbench's), once before
the tiers and once after, and names each that is new, owned by this user, and used by no
running process (another suite on the same host still holds its own files).

One entry is deliberate: /tmp/speedbench-vllm.lock, the lock every suite (and the
benchmarks, docs/testing.md) takes before starting vLLM. It must be one fixed path that
concurrent suites in different checkouts all see, so it stays, empty, between suites.

    python scripts/tmp_check.py snapshot > BEFORE     # the suite's kind of entries now
    python scripts/tmp_check.py compare < BEFORE      # exit 1, naming them, if any is new
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path

TMP = Path("/tmp")
# Names the suite's own processes give what they put in /tmp: pytest's base folders,
# vLLM's distributed-init files and IPC sockets (a uuid4), speedbench's server folders
# (engine/local.py), the suite's own folder and the Slurm test cluster's.
SUITE_NAMES = ("pytest-of-*", "vllm_dist_*", "speedbench*", "sb-*")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# the one entry meant to stay (above)
KEPT = frozenset({"speedbench-vllm.lock"})


def is_suite_name(name: str) -> bool:
    if name in KEPT:
        return False
    return bool(UUID.fullmatch(name)) or any(fnmatch.fnmatchcase(name, p) for p in SUITE_NAMES)


def suite_entries(tmp: Path = TMP, uid: int | None = None) -> set[str]:
    """The names in ``tmp`` a suite makes, of entries this user owns."""
    uid = os.getuid() if uid is None else uid
    found = set()
    for entry in tmp.iterdir():
        try:
            mine = entry.lstat().st_uid == uid
        except OSError:  # gone meanwhile
            continue
        if mine and is_suite_name(entry.name):
            found.add(entry.name)
    return found


def paths_in_use(proc: Path = Path("/proc")) -> list[str]:
    """Every running process's working folder, open files and command line (what it may
    still be using); processes that vanish or are not ours to read are skipped."""
    seen: list[str] = []
    for pid in proc.iterdir():
        if not pid.name.isdigit():
            continue
        try:
            seen.append(os.readlink(pid / "cwd"))
            seen += [os.readlink(fd) for fd in (pid / "fd").iterdir()]
            seen.append((pid / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return seen


def leftovers(before: Iterable[str], after: Iterable[str], in_use: Iterable[str], tmp: Path = TMP) -> list[str]:
    """The entries new since ``before`` that no process mentions in ``in_use``."""
    used = "\n".join(in_use)
    new = sorted(set(after) - set(before))
    # the whole name: /tmp/sb-1 is not in use because /tmp/sb-12 is
    return [name for name in new if not re.search(re.escape(str(tmp / name)) + r"(?![^/\s])", used)]


def main(argv: list[str]) -> int:
    if argv == ["snapshot"]:
        print("\n".join(sorted(suite_entries())))
        return 0
    if argv == ["compare"]:
        before = [line.strip() for line in sys.stdin if line.strip()]
        left = leftovers(before, suite_entries(), paths_in_use())
        for name in left:
            print(f"[test] the suite left {TMP / name}", file=sys.stderr)
        return 1 if left else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
