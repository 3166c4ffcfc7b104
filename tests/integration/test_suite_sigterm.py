"""SIGTERM to a test session (a CI job's cancel, ``kill -TERM`` of its process group) runs
the session's teardown, as Ctrl-C does, so the processes its fixtures started do not
outlive it. tests/conftest.py installs the handler; this runs a child pytest with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD_TEST = '''
import subprocess, sys, time
from pathlib import Path
import pytest

@pytest.fixture(scope="session")
def daemon():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path({pid_file!r}).write_text(str(proc.pid))
    yield proc
    proc.terminate()
    proc.wait(10)
    Path({done_file!r}).write_text("torn down")

def test_waits(daemon):
    Path({running_file!r}).write_text("running")
    time.sleep(600)
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_tears_down_session_fixtures(tmp_path):
    pid_file, done_file, running_file = tmp_path / "daemon.pid", tmp_path / "done", tmp_path / "running"
    test_file = tmp_path / "test_child.py"
    test_file.write_text(CHILD_TEST.format(pid_file=str(pid_file), done_file=str(done_file),
                                           running_file=str(running_file)))
    # -p tests.conftest loads the project's conftest for a test outside tests/
    child = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:randomly",
                              "-p", "no:cacheprovider", str(test_file)], cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    daemon_pid = None
    try:
        deadline = time.monotonic() + 120  # a loaded host can take long to start pytest
        # signal once the test body runs: the fixture's file is written before pytest has
        # registered its teardown, and a signal in that gap would have nothing to run
        while not running_file.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.1)
        if pid_file.exists() and pid_file.read_text():
            daemon_pid = int(pid_file.read_text())
        assert daemon_pid is not None, f"the child session never started its fixture:\n{child.communicate()[0]}"
        child.send_signal(signal.SIGTERM)
        out, _ = child.communicate(timeout=60)
        assert done_file.read_text() == "torn down", out
        assert not _alive(daemon_pid), out
        assert child.returncode != 0, out  # an interrupted session does not pass
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if daemon_pid is not None and _alive(daemon_pid):
            os.kill(daemon_pid, signal.SIGKILL)
