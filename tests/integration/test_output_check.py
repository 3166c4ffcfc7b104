"""The output check end to end (issue 55: same outputs, or no speedup), on the fake server
that imitates vLLM's wire for it (speedbench/testing/fake_tokens.py).

One `speedbench run`, shared by the module: a baseline, an honest speculative arm, an arm
whose speculative path emits wrong tokens from position 3 on (``--wrong-after``, with its
acceptance as ever: speed alone cannot tell it) and an arm that flips near-ties from
position 3 on (``--tie-after``: its server's check answer ranks the flipped token 0.02 nats
below the target's). A check that compared nothing, read the wrong prefix or the wrong
server, or a gate that ignored the verdicts, fails here.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

import pytest
import yaml
from tests.helpers.cli_runs import fake_local, scenario, write_prompts, write_yaml
from tests.integration.test_reliability import out_of, sb, the_run

from speedbench.engine.vllm import logprobs
from speedbench.metrics import outputs as cmp
from speedbench.metrics.stored_outputs import OutputsEntry
from speedbench.results.loader import load_run
from speedbench.testing import FakeConfig
from speedbench.testing.fake_tokens import OUTPUT, TIE
from speedbench.testing.hosting import FakeServer

SPEC = {"method": "eagle3", "model": "draft", "num_speculative_tokens": 2}
AFTER = 3  # the wrong and the tied tokens start here; the prefix before it is shared
LEVELS = [1, 2]
PROMPTS = 4


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """(the run folder, the run's output, its exit code)."""
    tmp = tmp_path_factory.mktemp("outcheck")
    prompts = write_prompts(tmp / "p.jsonl", [f"write function number {i}" for i in range(PROMPTS)])
    arms = [{"name": "base"}, {"name": "honest", "speculative_config": SPEC},
            {"name": "wrong", "speculative_config": SPEC, "args": {"wrong-after": AFTER}},
            {"name": "tie", "speculative_config": SPEC, "args": {"tie-after": AFTER}}]
    # a passing gate of the scenario's own: with lossless off, `gate` still has one to check
    sc = scenario("outcheck", prompts, server=fake_local(**{"t-step": "0.002", "output-tokens": "8"}), arms=arms,
                  concurrency=LEVELS, gates=[{"metric": "error_rate", "max": 0.5}])
    path = write_yaml(tmp / "s.yaml", sc)
    res = sb(["run", str(path), "-o", str(tmp / "out"), "--skip-doctor"], tag="outcheck", cwd=tmp, timeout=300)
    return the_run(tmp / "out"), out_of(res), res.returncode


def _entries(run: Path, arm: str) -> list[OutputsEntry]:
    r = load_run(run)
    return [r.outputs_of(arm, c) for c in LEVELS]


def test_honest_and_tied_arms_pass_and_the_wrong_one_is_lossy(checked):
    run, out, _ = checked
    honest, tie, wrong = _entries(run, "honest"), _entries(run, "tie"), _entries(run, "wrong")
    assert [e.verdict for e in honest] == [cmp.IDENTICAL] * 2, honest
    assert all(e.pairs == PROMPTS == e.identical for e in honest)
    # every tie checked on the baseline's server, each a near-tie of 0.02 nats
    assert [e.verdict for e in tie] == [cmp.NUMERICS] * 2, tie
    assert all(e.checked == e.near_ties == e.divergences == PROMPTS for e in tie), tie
    assert all(m.margin is not None and 0 < m.margin < 0.05 and m.exact and m.position == AFTER
               for e in tie for m in e.largest_margins), tie
    assert [e.verdict for e in wrong] == [cmp.LOSSY] * 2, wrong
    assert all(e.to_dict()["first_divergence"] == {"min": AFTER, "median": AFTER, "max": AFTER} for e in wrong)
    # the wrong token is not among the target's top 20: the margin is a lower bound, far past the line
    assert all(m.margin is not None and m.margin >= cmp.NEAR_TIE_NATS and not m.exact
               for e in wrong for m in e.largest_margins)
    # the baseline against itself at its lowest concurrency: the batch-shape floor
    assert load_run(run).outputs_of("base", 2).verdict == cmp.IDENTICAL


def test_the_check_pass_asked_the_baseline_once_and_only_where_outputs_differ(checked):
    run, out, _ = checked
    checks = json.loads((run / "outputs" / "checks.json").read_text())
    ties = [c for c in checks if c["arm"] == "tie"]
    assert len(ties) == PROMPTS * len(LEVELS)
    assert {(c["ref_token"], c["arm_token"]) for c in ties} == {(OUTPUT + AFTER, TIE + AFTER)}
    assert {c["arm"] for c in checks} == {"tie", "wrong"}  # nothing else diverged: nothing else asked
    # one more start of the baseline's server, after every arm, logged apart
    assert (run / "logs" / "base.check.log").exists()
    assert out.count("output check: the baseline's server ready") == 1, out[-3000:]


def test_the_run_exits_1_on_the_lossless_gate(checked):
    _, out, code = checked
    assert code == 1, out[-3000:]
    assert "gate FAIL: lossless no lossy point arm=wrong 2 of 2 points lossy" in out, out[-3000:]
    assert "arm=tie" in out and "arm=honest 2 points identical/within numerics" in out


def test_gate_fails_naming_the_lossy_arm_and_passes_with_lossless_off(checked, tmp_path):
    run, _, _ = checked
    res = sb(["gate", str(run)], tag="outcheck-gate", cwd=tmp_path)
    assert res.returncode == 1, out_of(res)
    fails = [ln for ln in res.stdout.splitlines() if "FAIL " in ln or "│ FAIL" in ln]
    assert fails and all("wrong" in ln for ln in fails), res.stdout
    # the same run with the gate turned off by name in its scenario: the scenario's own gate passes
    off = tmp_path / "off"
    shutil.copytree(run, off)
    saved = yaml.safe_load((off / "scenario.resolved.yaml").read_text())
    (off / "scenario.resolved.yaml").write_text(yaml.safe_dump({**saved, "gates_off": ["lossless"]}))
    res = sb(["gate", str(off)], tag="outcheck-off", cwd=tmp_path)
    assert res.returncode == 0, out_of(res)
    assert "lossless" not in res.stdout and "error_rate" in res.stdout


def test_the_fake_answers_the_check_request_in_vllms_shape():
    """The engine's own request and reader against the fake's wire: the tie's alternative
    just below the top token at the prefix's length, the top token generated."""
    with FakeServer(FakeConfig(tie_after=2)) as srv:
        path, body = logprobs.margin_request("fake-model", [7, 8, 9], [OUTPUT, OUTPUT + 1], cmp.TOP)
        req = urllib.request.Request(srv.base_url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            answer = json.loads(resp.read())
    choice = answer["choices"][0]
    assert choice["text"] == f" w{OUTPUT + 2}" and choice["logprobs"]["tokens"] == [f"token_id:{OUTPUT + 2}"]
    top = logprobs.read_top(answer)
    assert top is not None and len(top) == cmp.TOP and max(top, key=top.__getitem__) == OUTPUT + 2
    m, exact = cmp.margin(top, OUTPUT + 2, TIE + 2)
    assert exact and 0 < m < 0.05  # type: ignore[operator]
