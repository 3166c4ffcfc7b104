"""The live view's ETA: remaining server starts and points times the mean seen so far."""

from __future__ import annotations

from rich.console import Console

from speedbench.records import PointKey
from speedbench.run.live import LiveProgress


def test_eta_counts_the_work_left_at_the_pace_seen():
    now = [0.0]
    console = Console(record=True, width=200)
    with LiveProgress(console, plain=True, clock=lambda: now[0]) as live:
        live.plan(starts=3, points=6)
        assert live.eta_s() is None  # nothing seen yet: no guess
        live.server_starting("a")
        live.server_ready("a", 30.0)
        key = PointKey("a", 1)
        live.point_started(key, 4)
        now[0] = 10.0
        live.point_done(key)
        # 2 starts x 30 s + 5 points x 10 s
        assert live.eta_s() == 110.0
    assert "(ETA 2 min: 2 server starts and 5 points left)" in console.export_text()
