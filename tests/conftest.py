"""Shared test plumbing.

Tiers (scripts/test.sh runs them in this order): tests/unit/<package>/ (pure, fast),
tests/integration/ (subprocesses, Slurm, Chromium, fake servers), tests/e2e/ (a real
vLLM). The e2e tier is both a folder and the ``vllm`` marker; the hook below keeps the
two the same, so ``-m "not vllm"`` and ``tests/unit tests/integration`` select alike.
"""

from __future__ import annotations

import fcntl
import os
import signal
import threading
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Child processes (the CLI under test, fake servers, Slurm jobs) import this checkout's
# speedbench, as pytest itself does through pyproject's pythonpath, and not the checkout an
# editable install points at (a second worktree sharing one .venv tested the first's code).
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
# Two cores cannot host two vLLM servers: every test that starts one holds this lock,
# so concurrent pytest runs (developers, helpers) queue instead of starving each other.
# The one file a suite keeps in /tmp on purpose (scripts/tmp_check.py allows it): every
# checkout's suite, the benchmarks and `flock` in docs/testing.md must find the same lock,
# so its path is fixed and not under the suite's own TMPDIR; it stays, empty, between runs.
VLLM_LOCK = Path("/tmp/speedbench-vllm.lock")

try:  # property-based tests (tests/unit/client/test_properties.py): the same examples on every run
    from hypothesis import HealthCheck, settings

    settings.register_profile("speedbench", derandomize=True, database=None, deadline=None, max_examples=150,
                              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    settings.load_profile("speedbench")
except ImportError:  # the `test` extra brings it; without it those tests are skipped
    pass


_held_lock: list = []  # the open lock file while this session holds it


def _hold_vllm_lock() -> None:
    """Take the vLLM lock for the rest of this session (released when the process ends),
    saying so when another session holds it."""
    if _held_lock:
        return
    f = open(VLLM_LOCK, "w")  # noqa: SIM115  (held open on purpose: the lock lasts as long as the file)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"\n[tests] another test session is running vLLM; waiting for {VLLM_LOCK}", flush=True)
        fcntl.flock(f, fcntl.LOCK_EX)
    _held_lock.append(f)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """Queue behind another session's vLLM before any test's clock starts. Waited for
    inside a fixture, the lock counted against the first test's pytest-timeout (900 s):
    a second suite on the same machine then failed all its real-vLLM tests instead of
    waiting its turn."""
    if any(item.get_closest_marker("vllm") for item in session.items):
        _hold_vllm_lock()


@pytest.fixture
def tag() -> str:
    """A fresh id per test, put in the environment of the processes it starts so that its
    orphan checks find them and nothing else (tests/integration, tests/e2e)."""
    return uuid.uuid4().hex


@pytest.fixture(scope="session")
def vllm_slot():
    _hold_vllm_lock()  # taken at collection when vllm-marked tests were selected
    yield


def _order_seed_line(config) -> str | None:
    """The random order's seed (pytest-randomly), as the arguments that replay it."""
    if not config.pluginmanager.hasplugin("randomly"):
        return None
    return f"random order: replay with -p randomly --randomly-seed={config.getoption('randomly_seed')}"


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def pytest_configure(config):
    """SIGTERM unwinds the session as Ctrl-C does. By default Python dies on it at once, with
    no fixture teardown: a CI job's cancel or ``kill -TERM`` of a suite's process group left
    its Slurm daemons and fake servers running. As a KeyboardInterrupt, ``with`` blocks close
    their fakes and fixtures stop their daemons before pytest exits."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)


def pytest_sessionstart(session):
    # pytest-randomly prints its seed in the header, which -q (scripts/test.sh) hides;
    # printed first and last, a failing order can be replayed from any CI log.
    line, reporter = _order_seed_line(session.config), session.config.pluginmanager.get_plugin("terminalreporter")
    if line and reporter is not None:
        reporter.write_line(line)


def pytest_terminal_summary(terminalreporter, config):
    line = _order_seed_line(config)
    if line:
        terminalreporter.write_line(line)


E2E = Path(__file__).resolve().parent / "e2e"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Every test under tests/e2e/ is marked ``vllm``; no test elsewhere may be."""
    stray = []
    for item in items:
        in_e2e = E2E in Path(str(item.path)).resolve().parents
        if in_e2e:
            item.add_marker(pytest.mark.vllm)
        elif item.get_closest_marker("vllm") is not None:
            stray.append(item.nodeid)
    if stray:
        raise pytest.UsageError(f"vllm-marked tests outside tests/e2e/ (move them there): {stray}")
