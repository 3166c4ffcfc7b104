"""A watchdog per launched server: when speedbench dies, the server dies too.

speedbench stops its servers on success, failure, Ctrl-C and SIGTERM. It cannot on SIGKILL
or the OOM killer, and the server (vLLM plus its engine workers, in their own process
group) would keep the GPUs and fail the next nightly run. So every server gets a small
process of its own that polls its parent: once speedbench is gone (the watchdog is
re-parented), it runs the launcher's cleanup (``docker stop`` for containers), SIGTERMs
the server's process group, and SIGKILLs what is left after the grace period.

Why not the parent-death signal (``prctl(PR_SET_PDEATHSIG)``)? It reaches only the
direct child, not vLLM's workers; it fires when the *thread* that forked exits, and arms
run in worker threads; and setting it needs a ``preexec_fn``, which is unsafe in a
threaded process. The watchdog covers the whole group and needs none of that.

The watchdog is plain Python with no speedbench import (``python -c``), starts in
milliseconds, ignores SIGTERM/SIGINT/SIGHUP (a batch system's or terminal's signal must
not remove it before speedbench's own teardown has run) and exits as soon as the group
is gone. Servers also carry ``SPEEDBENCH_OWNER_PID`` / ``SPEEDBENCH_OWNER_HOST`` in their
environment, so ``speedbench doctor`` can name any server that outlived its owner anyway.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

OWNER_PID, OWNER_HOST, OWNER_ARM = "SPEEDBENCH_OWNER_PID", "SPEEDBENCH_OWNER_HOST", "SPEEDBENCH_ARM"
POLL_S = 0.5

_CODE = r"""
import os, shutil, signal, subprocess, sys, time
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
parent, pgid, grace, poll = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
scratch, cleanup = sys.argv[5], sys.argv[6:]
def alive():
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
while os.getppid() == parent:
    if not alive():
        sys.exit(0)
    time.sleep(poll)
print(f"speedbench watchdog: owner {parent} is gone; stopping server group {pgid}", file=sys.stderr, flush=True)
if cleanup:
    try:
        subprocess.run(cleanup, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=grace + 30)
    except Exception:
        pass
for sig in (signal.SIGTERM, signal.SIGKILL):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        break
    end = time.monotonic() + grace
    while alive() and time.monotonic() < end:
        time.sleep(0.1)
if scratch:
    shutil.rmtree(scratch, ignore_errors=True)
"""


def spawn(pgid: int, *, grace_s: float, cleanup: list[str] | None = None, log=None,
          scratch: str | None = None) -> subprocess.Popen:
    """Start the watchdog of process group ``pgid``; its stderr goes to ``log`` (the server log).
    ``scratch``: the server's temporary folder, removed once the group is stopped."""
    return subprocess.Popen(
        [sys.executable, "-c", _CODE, str(os.getpid()), str(pgid), str(max(1.0, grace_s)), str(POLL_S),
         scratch or "", *(cleanup or [])],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log or subprocess.DEVNULL,
        start_new_session=True,  # not in the server's group, and no terminal's Ctrl-C
    )


def dismiss(proc: subprocess.Popen | None) -> None:
    """Stop a watchdog whose server speedbench has stopped itself."""
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGKILL)  # it ignores SIGTERM on purpose
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        pass


def owner_env(arm: str) -> dict[str, str]:
    return {OWNER_PID: str(os.getpid()), OWNER_HOST: socket.gethostname(), OWNER_ARM: arm}
