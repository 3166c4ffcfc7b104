"""Hosting the fake server for tests: in a background thread or as a child process.

In-process (shares the GIL with the test, cheapest)::

    with FakeServer(FakeConfig(t_step_s=0.01, k=3, acceptance=(3, 1))) as srv:
        ... srv.base_url ...; srv.log[0].emit_ns; srv.max_concurrent; srv.config = ...

As a child process (like a real server; timing tests, crash tests with ``die_after``)::

    with FakeProcess(FakeConfig(...)) as srv:
        ... srv.base_url ...; srv.log(); srv.max_concurrent; srv.returncode()
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import urllib.request
from dataclasses import asdict

from aiohttp import web

from speedbench.testing.fake_server import build_app
from speedbench.testing.fake_state import Emission, ServerState
from speedbench.testing.script import FakeConfig


class FakeServer:
    """The fake server on 127.0.0.1 (port 0 = a free port) in a background thread with
    its own event loop, so the client under test runs on an undisturbed loop."""

    def __init__(self, config: FakeConfig | None = None, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.state = ServerState(config or FakeConfig())
        self.host, self.port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def config(self) -> FakeConfig:
        return self.state.config

    @config.setter
    def config(self, value: FakeConfig) -> None:
        self.state.config = value  # takes effect for the next request

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def log(self) -> list[Emission]:
        return self.state.log

    @property
    def max_concurrent(self) -> int:
        return self.state.max_concurrent

    def reset(self) -> None:
        self._call(self.state.reset)

    def metrics_text(self) -> str:
        return self.state.metrics_text()

    def _call(self, fn) -> None:
        if self._loop is None:
            fn()
            return
        done = threading.Event()

        def run() -> None:
            fn()
            done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait(5)

    def start(self) -> FakeServer:
        ready = threading.Event()
        errors: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._runner = web.AppRunner(build_app(self.state), access_log=None, handle_signals=False)
                loop.run_until_complete(self._runner.setup())
                site = web.TCPSite(self._runner, self.host, self.port)
                loop.run_until_complete(site.start())
                self.port = self._runner.addresses[0][1]
            except BaseException as e:  # noqa: BLE001 -- re-raised by start() in the caller's thread
                errors.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=main, name="fake-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> FakeServer:  # noqa: PYI034 -- start() returns self
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class FakeProcess:
    """The fake server as a child process (a real server is one too): no GIL shared
    with the client under test. ``log()`` fetches the emission log over HTTP; its
    ``perf_counter_ns`` stamps compare directly with ours (CLOCK_MONOTONIC)."""

    def __init__(self, config: FakeConfig | None = None, *, host: str = "127.0.0.1") -> None:
        self.config = config or FakeConfig()
        self.host = host
        self.base_url = ""
        self._proc: subprocess.Popen | None = None

    def start(self) -> FakeProcess:
        cfg = asdict(self.config)
        cfg["faults"] = {str(k): asdict(v) for k, v in self.config.faults.items()}
        argv = [sys.executable, "-m", "speedbench.testing.fake_server", "--host", self.host, "--port", "0",
                "--config-json", json.dumps(cfg)]
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
        line = self._proc.stdout.readline() if self._proc.stdout else ""
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"fake server did not start: {line!r}")
        self.base_url = line.split()[-1]
        return self

    def _get(self, path: str, method: str = "GET") -> bytes:
        req = urllib.request.Request(self.base_url + path, method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read()

    def log(self) -> list[Emission]:
        return [Emission(**e) for e in json.loads(self._get("/fake/log"))]

    @property
    def max_concurrent(self) -> int:
        return json.loads(self._get("/fake/stats"))["max_concurrent"]

    def reset(self) -> None:
        self._get("/fake/reset", "POST")

    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        if self._proc is not None and self._proc.stdout:
            self._proc.stdout.close()
        self._proc = None

    def __enter__(self) -> FakeProcess:  # noqa: PYI034 -- start() returns self
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
