"""A server we launch ourselves: its own process group, a free port, readiness that proves
inference works, crash detection (what its engine names in the launch: the log's death
marks and its reading of a death) and a teardown that leaves nothing behind.

Only the standard library is used (probes in engine/probe.py): the lifecycle is
synchronous and runs outside the client's event loop.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from speedbench.engine import watchdog
from speedbench.engine.base import LaunchSpec
# the group check and the log reading live with their subjects; imported under the names
# LocalServer has always used
from speedbench.engine.procs import group_alive as _group_alive
from speedbench.engine.server_log import LOG_TAIL_LINES, Death, log_end, log_tail, signal_name
# free_port is looked up here at call time, so tests can make it racy.
from speedbench.engine.probe import client_host, free_port, port_is_free, probe_ready, startup_phase
from speedbench.errors import ServerError

ProgressFn = Callable[[float, str], None]  # (seconds since the start, probe.startup_phase)

LAUNCH_MARK = "=== speedbench: arm"  # the line each launch writes to the log first
POLL_S = 1.0  # how often a loading server's phase is reported
# How often readiness is probed: a refused connection costs microseconds, and every
# second between "startup complete" and the probe that sees it is a second per start.
PROBE_S = 0.25
# How often an automatically chosen port may be retried when another process grabbed it
# between our probe and vLLM's bind (the probe socket must be closed before vLLM binds).
PORT_ATTEMPTS = 3
_ADDR_IN_USE = ("address already in use", "errno 98", "errno 48", "port is already allocated")


class LocalServer:
    """Context manager around one launched server process group."""

    def __init__(self, spec: LaunchSpec, log_path: Path, *, ready_timeout_s: float, grace_s: float,
                 on_progress: ProgressFn | None = None, api_key: str | None = None):
        self.spec = spec
        self._log_path = Path(log_path)
        self.ready_timeout_s = ready_timeout_s
        self.grace_s = grace_s
        self.on_progress = on_progress
        self.api_key = api_key
        self._proc: subprocess.Popen | None = None
        self._watchdog: subprocess.Popen | None = None
        self._pgid: int | None = None
        self._port: int | None = spec.port
        self._model_name: str | None = None
        self._stopped = False
        self._stopped_running = False  # stop() found it alive: its exit was ours, not a crash
        self._death: str | None = None  # why it died, read from its log once
        self._log_seen = 0  # bytes of the log already searched for an engine death
        self._scratch: str | None = None  # the server's own temporary folder (spec.scratch_env)

    # ---- properties --------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self._log_path

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def pgid(self) -> int | None:
        return self._pgid

    @property
    def port(self) -> int | None:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{client_host(self.spec.host)}:{self._port}"

    @property
    def model_name(self) -> str | None:
        return self._model_name

    @property
    def argv(self) -> list[str]:
        """The argv as launched (or as it would be, once a port is chosen)."""
        return self.command(self._port) if self._port is not None else list(self.spec.argv)

    # ---- launching ---------------------------------------------------------------

    def command(self, port: int) -> list[str]:
        argv = self.spec.argv_with_port(port)
        # "python" in a scenario means the interpreter running speedbench (the venv's).
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        return argv

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({name: self.scratch() for name in self.spec.scratch_env})  # the scenario's env wins
        env.update(self.spec.env_with_gpus())
        env.update(watchdog.owner_env(self.spec.arm))  # doctor finds servers that outlive us
        return env

    def cleanup_argv(self) -> list[str]:
        """What the watchdog runs before signalling the group (docker: stop the container)."""
        return []

    def scratch(self) -> str:
        """The server's own temporary folder, made on first use and removed by :meth:`stop`
        (or by the watchdog when speedbench dies first). Short (``/tmp/sb-XXXXXXXX``): a
        unix socket's path may hold at most 107 bytes, and vLLM adds a 36-character uuid."""
        if self._scratch is None:
            self._scratch = tempfile.mkdtemp(prefix="sb-")
        return self._scratch

    def __enter__(self) -> "LocalServer":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "LocalServer":
        if not self.spec.argv:
            raise ServerError(f"arm '{self.spec.arm}': no command to launch")
        if self.spec.port is not None:
            if not port_is_free(self.spec.host, self.spec.port):
                raise ServerError(
                    f"arm '{self.spec.arm}': port {self.spec.port} on {self.spec.host} is already in use "
                    "-- fix: stop whatever listens there, choose another server.port, or remove "
                    "server.port so speedbench picks a free one"
                )
            self._port = self.spec.port
        else:
            self._port = free_port(self.spec.host)
        self._launch()
        return self

    def _launch(self) -> None:
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        assert self._port is not None  # start() picked it
        argv = self.command(self._port)
        with open(self._log_path, "ab") as log:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
            log.write(f"{LAUNCH_MARK} {self.spec.arm}, port {self._port}, {stamp}\n".encode())
            log.flush()
            self._log_seen = log.tell()  # earlier launches' deaths are not this one's
            try:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.environment(),
                    # Own session = own process group: Ctrl-C in the terminal does not
                    # reach it, and stop() can signal vLLM and all its workers at once.
                    start_new_session=True,
                )
            except OSError as e:
                raise ServerError(f"arm '{self.spec.arm}': cannot start {argv[0]!r}: {e}") from None
        self._pgid = self._proc.pid  # a session leader's pgid is its pid
        watchdog.dismiss(self._watchdog)  # a port retry relaunches
        with open(self._log_path, "ab") as log:
            self._watchdog = watchdog.spawn(self._pgid, grace_s=self.grace_s, cleanup=self.cleanup_argv(), log=log,
                                            scratch=self._scratch)
        self._stopped = self._stopped_running = False

    # ---- readiness and liveness --------------------------------------------------

    def wait_ready(self, model_name: str | None = None, request: tuple[str, dict] | None = None) -> str:
        """Block until the server completes ``request`` (probe.ready_request's (path, body);
        None: a short completion); return the served model name."""
        if self._proc is None:
            raise ServerError(f"arm '{self.spec.arm}': wait_ready() before start()")
        t0 = time.monotonic()
        deadline = t0 + self.ready_timeout_s
        attempts = 1
        missing = "not probed yet"
        last_progress = 0.0
        while True:
            now = time.monotonic()
            if self._proc.poll() is not None:
                tail = log_tail(self._log_path)
                if self._retry_port(tail, attempts):
                    attempts += 1
                    continue
                raise ServerError(self._failure(self._cause("while starting"), tail))
            if now >= deadline:
                raise ServerError(self._failure(
                    f"server (pid {self.pid}) not ready after {self.ready_timeout_s:.0f} s ({missing}) "
                    "-- fix: raise server.ready_timeout_s if the model is just slow to load",
                    log_tail(self._log_path)))
            if self.on_progress and now - last_progress >= POLL_S:
                last_progress = now
                self.on_progress(now - t0, startup_phase(missing))
            name, missing = probe_ready(self.base_url, model_name, self.api_key,
                                        timeout=max(1.0, min(60.0, deadline - now)), request=request)
            if name is not None and self._proc.poll() is None:
                self._model_name = name
                return name
            time.sleep(min(PROBE_S, max(0.0, deadline - time.monotonic())))

    def _retry_port(self, tail: str, attempts: int) -> bool:
        if self.spec.port is not None or attempts >= PORT_ATTEMPTS:
            return False
        if not any(m in tail.lower() for m in _ADDR_IN_USE):
            return False
        if self._pgid is not None:
            self._signal(self._pgid, signal.SIGKILL)  # workers it may have forked already
        self._reap()
        self._port = free_port(self.spec.host)
        self._launch()
        return True

    def _failure(self, what: str, tail: str) -> str:
        return (f"arm '{self.spec.arm}': {what}\n"
                f"--- last {LOG_TAIL_LINES} lines of {self._log_path} ---\n{tail}\n--- end of log ---")

    def diagnosis(self) -> Death | None:
        """What the log says killed the server (its engine's ``diagnose``), or None."""
        if self.spec.diagnose is None:
            return None
        text = log_end(self._log_path)
        # The log is appended to by every launch of the arm (rounds, resumes, port
        # retries): only this launch's part may name the cause.
        text = text[max(0, text.rfind(LAUNCH_MARK)):]
        return self.spec.diagnose(text, self.spec.argv)

    def _cause(self, when: str) -> str:
        """The cause first, then its fix, and the API server's exit code last: vLLM's API
        server exits 0 when its engine dies, so the code alone says nothing."""
        assert self._proc is not None
        code = self._proc.returncode
        ended = ("was shutting down" if code is None else f"exited with code {code}" if code >= 0
                 else f"was killed by {signal_name(code)}")
        death = self.diagnosis()
        if death is None:
            return f"server (pid {self._proc.pid}) {ended} {when}"
        fix = f" -- fix: {death.fix}" if death.fix else ""
        return f"{death.cause} {when}{fix} (the API server, pid {self._proc.pid}, then {ended})"

    def dead(self) -> str | None:
        """None while the server lives; why it died once its process has exited, or once
        its log says its engine died. The API server outlives its engine by seconds,
        answering 500s and then refusing connections: without the log, a point would
        record the rest of its queue against a dead server. Cheap: a stat, and only the
        log's new bytes are read."""
        if self._proc is None:
            return None
        running = self._proc.poll() is None
        if running and (self._stopped or not self._engine_died()):
            return None
        if self._death is None:
            how = "server was stopped by speedbench" if not running and self._stopped_running \
                else self._cause("while serving")
            self._death = f"arm '{self.spec.arm}': {how}; log: {self._log_path}"
        return self._death

    def _engine_died(self) -> bool:
        if not self.spec.death_marks:
            return False  # an engine that names none: the process's exit is the only sign
        try:
            size = self._log_path.stat().st_size
            if size <= self._log_seen:
                return False
            with open(self._log_path, "rb") as f:
                f.seek(max(0, self._log_seen - 64))  # a mark may straddle two reads
                new = f.read(size - f.tell()).decode("utf-8", errors="replace")
        except OSError:
            return False
        self._log_seen = size
        return any(mark in new for mark in self.spec.death_marks)

    # ---- teardown ----------------------------------------------------------------

    def stop(self) -> None:
        """SIGTERM the group, wait up to grace_s, then SIGKILL what is left. Idempotent."""
        if self._proc is None or self._pgid is None:
            self._remove_scratch()  # made for a launch that could not start
            return
        pgid = self._pgid
        if self._stopped and not _group_alive(pgid):
            return
        if not self._stopped:
            self._stopped_running = self._proc.poll() is None
        self._stopped = True
        self._signal(pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        while time.monotonic() < deadline:
            self._proc.poll()  # reap our child so it does not linger as a zombie
            if not _group_alive(pgid):
                break
            time.sleep(0.1)
        else:
            self._signal(pgid, signal.SIGKILL)
            end = time.monotonic() + 10
            while time.monotonic() < end and (self._proc.poll() is None or _group_alive(pgid)):
                time.sleep(0.05)
        self._reap()
        watchdog.dismiss(self._watchdog)
        self._remove_scratch()  # the group is gone: nothing writes there any more

    def _remove_scratch(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    @staticmethod
    def _signal(pgid: int, sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _reap(self) -> None:
        if self._proc is None:
            return
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                self._proc.kill()
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
