"""The default gate ``lossless`` (report/lossless.py, docs/gates.md "Default gates") over a
summary's outputs block: a lossy point fails its arm, the other verdicts pass and are
counted, and the gate stays away from runs whose outputs were never compared.
(tests/integration/test_output_check.py runs it end to end on the fake server.)"""

from __future__ import annotations

import pytest

from speedbench.errors import ScenarioError
from speedbench.metrics import outputs as cmp
from speedbench.metrics.gates import LOSSLESS
from speedbench.report import lossless
from speedbench.report.gate import default_gates
from speedbench.results.run import Run
from speedbench.scenario import validate_data


def _point(arm: str, c: int, verdict: str, pairs: int = 4) -> dict:
    return {"arm": arm, "concurrency": c, "variant": "", "verdict": verdict, "reason": f"why {arm} {c}",
            "pairs": pairs}


def _run(*points: dict, **block) -> Run:
    return Run(None, {"outputs": {"near_tie_nats": cmp.NEAR_TIE_NATS, "points": list(points), **block}})


def test_a_lossy_point_fails_its_arm_and_the_rest_pass_with_their_counts():
    run = _run(_point("eagle", 1, cmp.IDENTICAL), _point("eagle", 4, cmp.NUMERICS),
               _point("eagle", 16, cmp.NOT_CHECKED, pairs=0), _point("bad", 1, cmp.LOSSY),
               _point("bad", 4, cmp.IDENTICAL))
    assert default_gates(run) == [LOSSLESS]
    by_arm = {c.arm: c for c in lossless.arm_checks(run)}
    assert by_arm["eagle"].status == "pass"
    assert by_arm["eagle"].message == "2 points identical/within numerics, 1 not checked"
    bad = by_arm["bad"]
    assert (bad.status, bad.lossy) == ("fail", 1)
    assert bad.message == "1 of 2 points lossy: c=1 (why bad 1); 1 point identical/within numerics"


def test_the_gate_judges_only_runs_whose_outputs_were_compared():
    assert default_gates(Run(None, {})) == []  # a folder from before outputs were kept
    assert default_gates(_run(_point("eagle", 1, cmp.NOT_CHECKED, pairs=0))) == []  # nothing compared
    sampled = _run(_point("eagle", 1, cmp.NOT_CHECKED), not_checked="sampling at temperature 0.7")
    assert default_gates(sampled) == [] and lossless.arm_checks(sampled) == []


def test_a_scenario_turns_it_off_by_name_and_a_misspelt_name_is_refused():
    base = {"name": "s", "server": {"model": "m"}, "arms": [{"name": "base"}]}
    assert validate_data({**base, "gates_off": ["lossless"]}).gates_off == ["lossless"]
    with pytest.raises(ScenarioError, match="did you mean 'lossless'"):
        validate_data({**base, "gates_off": ["losless"]})
