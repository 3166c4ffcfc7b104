"""What a run or resume still has to measure: points by round."""

from __future__ import annotations

from pathlib import Path

from speedbench.run.plan import build_plan
from speedbench.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]


def test_rounds_left_and_unfinished_points():
    plan = build_plan(load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml"), n_prompts=4)
    points = plan.points()
    assert plan.rounds == 3
    assert plan.rounds_left(set()) == [(k, r) for r in range(3) for k in points]
    first = points[0]
    finished = {(k, r) for k in points for r in range(3)} - {(first, 2)}
    assert plan.rounds_left(finished) == [(first, 2)]
    assert plan.unfinished(finished) == [first]
    assert plan.unfinished(finished, arm=first.arm) == [first]
    other = next(k.arm for k in points if k.arm != first.arm)
    assert plan.unfinished(finished, arm=other) == []
