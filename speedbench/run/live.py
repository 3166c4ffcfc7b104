"""Live progress for ``speedbench run``: server start-up, requests done per point,
live output tokens/s and errors.

On a terminal this is a rich Progress display; durable events (server ready, point
finished, messages) are printed above it so they stay in the scrollback. When the
console is not a terminal (CI logs) it prints plain lines instead, throttled so a long
run does not print one line per request. Arms run in threads, so every method may be
called from any thread.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from speedbench.records import PointKey, RequestRecord
from speedbench.report.wrap import print_wrapped


@dataclass
class _Point:
    total: int
    started: float
    done: int = 0
    errors: int = 0
    tokens: int = 0
    # (finish time, output tokens) of recent records, for a windowed tokens/s
    recent: deque = field(default_factory=deque)
    next_plain_pct: int = 25
    task: TaskID | None = None


class LiveProgress:
    """Context manager; ``with LiveProgress(console) as live: ...``."""

    def __init__(self, console: Console | None = None, *, plain: bool | None = None,
                 clock: Callable[[], float] = time.monotonic, window_s: float = 10.0,
                 plain_server_every_s: float = 30.0):
        self.console = console or Console(highlight=False)
        self.plain = (not self.console.is_terminal) if plain is None else plain
        self._clock = clock
        self._window_s = window_s
        self._server_every_s = plain_server_every_s
        self._lock = threading.RLock()
        self._points: dict[PointKey, _Point] = {}
        self._servers: dict[str, TaskID | None] = {}
        self._server_last_print: dict[str, float] = {}
        self._server_logs: dict[str, Path | None] = {}
        self._progress: Progress | None = None
        # the run's remaining work, for the ETA: server starts and points (one per round)
        self._starts_left = 0
        self._points_left = 0
        self._start_s: list[float] = []
        self._point_s: list[float] = []

    # ---- context ------------------------------------------------------------------------

    def __enter__(self) -> LiveProgress:  # noqa: PYI034 - no subclasses; Self needs Python 3.11
        if not self.plain:
            self._progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=30),
                MofNCompleteColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                console=self.console, transient=True,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    # ---- output ---------------------------------------------------------------------------

    def _line(self, text: str, style: str = "") -> None:
        """A durable line: above the live display, or a plain log line; wrapped to the
        console's width between words (a log splits a longer one mid-word)."""
        target = self._progress.console if self._progress is not None else self.console
        print_wrapped(target, Text(text, style=style if not self.plain else ""))

    def message(self, text: str) -> None:
        with self._lock:
            self._line(text)

    # ---- the run as a whole ---------------------------------------------------------------

    def plan(self, starts: int, points: int) -> None:
        """The work ahead: server starts and (point, round) measurements; enables the ETA."""
        with self._lock:
            self._starts_left, self._points_left = starts, points

    def eta_s(self) -> float | None:
        """Seconds left, from the mean server start and point time seen so far (None
        until both have been seen once)."""
        if not self._start_s or not self._point_s:
            return None
        return (self._starts_left * sum(self._start_s) / len(self._start_s)
                + self._points_left * sum(self._point_s) / len(self._point_s))

    def _eta_text(self) -> str:
        eta = self.eta_s()
        if eta is None or not (self._starts_left or self._points_left):
            return ""
        done = f"{self._starts_left} server starts and {self._points_left} points left"
        return f"  (ETA {eta / 60:.0f} min: {done})" if eta >= 90 else f"  (ETA {eta:.0f} s: {done})"

    # ---- servers ---------------------------------------------------------------------------

    def server_starting(self, arm: str, log: Path | None = None) -> None:
        """``log``: the server's own log, where its start-up text goes (none: an endpoint
        that is already running)."""
        with self._lock:
            task = None
            if self._progress is not None:
                task = self._progress.add_task(f"starting [bold]{escape(arm)}[/bold]", total=None, info="")
            self._servers[arm] = task
            self._server_logs[arm] = log
            self._server_last_print[arm] = self._clock()
            self._line(f"{arm}: starting server")

    def server_progress(self, arm: str, elapsed_s: float, phase: str = "") -> None:
        """``phase``: what readiness still waits for, in our words (engine/probe.py's
        startup_phase). The engine's own start-up text stays in its log: quoted here, one
        line of it says little and runs past any width."""
        with self._lock:
            task = self._servers.get(arm)
            if self._progress is not None and task is not None:
                self._progress.update(task, info=escape(phase))
                return
            now = self._clock()
            if now - self._server_last_print.get(arm, 0.0) >= self._server_every_s:
                self._server_last_print[arm] = now
                log = self._server_logs.get(arm)
                self._line(f"{arm}: still starting after {elapsed_s:.0f} s" + (f", {phase}" if phase else "")
                           + (f"; its log: {log}" if log else ""))

    def server_ready(self, arm: str, elapsed_s: float) -> None:
        with self._lock:
            task = self._servers.pop(arm, None)
            if self._progress is not None and task is not None:
                self._progress.remove_task(task)
            self._start_s.append(elapsed_s)
            self._starts_left = max(0, self._starts_left - 1)
            self._line(f"{arm}: server ready after {elapsed_s:.1f} s" + self._eta_text(), "green")

    # ---- points ------------------------------------------------------------------------------

    def point_started(self, key: PointKey, total: int) -> None:
        with self._lock:
            p = _Point(total=total, started=self._clock())
            if self._progress is not None:
                p.task = self._progress.add_task(escape(key.label), total=total or None, info="")
            self._points[key] = p
            self._line(f"{key.label}: {total} requests")

    def _rate(self, p: _Point, now: float) -> float:
        while p.recent and now - p.recent[0][0] > self._window_s:
            p.recent.popleft()
        span = min(self._window_s, now - p.started)
        return sum(t for _, t in p.recent) / span if span > 0 else 0.0

    def record_done(self, rec: RequestRecord) -> None:
        with self._lock:
            key = PointKey(rec.arm, rec.concurrency, rec.variant)
            p = self._points.get(key)
            if p is None or rec.warmup:
                return
            now = self._clock()
            p.done += 1
            if rec.error:
                p.errors += 1
            else:
                p.tokens += rec.n_output
                p.recent.append((now, rec.n_output))
            rate = self._rate(p, now)
            info = f"{rate:,.0f} tok/s" + (f"  [red]{p.errors} errors[/red]" if p.errors else "")
            if self._progress is not None and p.task is not None:
                self._progress.update(p.task, completed=p.done, info=info)
                return
            pct = 100 * p.done // p.total if p.total else 100
            if pct >= p.next_plain_pct and p.done < p.total:
                p.next_plain_pct = (pct // 25 + 1) * 25
                self._line(f"{key.label}: {p.done}/{p.total} done, "
                           f"{rate:,.0f} output tok/s, {p.errors} errors")

    def point_done(self, key: PointKey) -> None:
        with self._lock:
            p = self._points.pop(key, None)
            if p is None:
                return
            if self._progress is not None and p.task is not None:
                self._progress.remove_task(p.task)
            elapsed = self._clock() - p.started
            self._point_s.append(elapsed)
            self._points_left = max(0, self._points_left - 1)
            rate = p.tokens / elapsed if elapsed > 0 else 0.0
            self._line(f"{key.label}: {p.done}/{p.total} requests in {elapsed:.1f} s, "
                       f"{rate:,.0f} output tok/s, {p.errors} errors" + self._eta_text(), "red" if p.errors else "")
