"""speedbench export --format speculation-profile: specdec_bench's speculation_profile.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speedbench.metrics.registry import SummaryRow
from speedbench.cli import main
from speedbench.results.loader import load_run
from speedbench.results.profile import (
    extrapolate_over_k,
    mean_check,
    monotonicity_check,
    speculation_profile,
)
from speedbench.results.run import Run
from tests.helpers.runfactory import make_run

# The keys specdec_bench's build_profile writes (schema "1.0"), in its order.
SPECDEC_KEYS = ["schema_version", "measured", "method", "draft_checkpoint", "target_model", "num_speculative_tokens",
                "block_size", "max_supported_k", "verification_method", "conditional_accept_rates",
                "marginal_accept_rates", "mean_accept_length", "mean_accept_length_per_request",
                "accept_length_model", "accept_length_by_k", "acceptance_length_histogram", "per_category",
                "measurement_conditions", "validation"]


def _profiles(out: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(out.glob("*/speculation_profile.json"))}


def test_each_speculative_point_gets_a_profile_equal_to_its_summary_row(tmp_path):
    rd = make_run(tmp_path / "r")
    out = tmp_path / "out"
    assert main(["export", str(rd.path), "--format", "speculation-profile", "-o", str(out)]) == 0
    profiles = _profiles(out)
    run = load_run(rd.path)
    spec_rows = [r for r in run.rows if r.speculative]
    assert sorted(profiles) == sorted(f"{r.arm}__c{r.concurrency}" for r in spec_rows)
    for row in spec_rows:
        prof = profiles[f"{row.arm}__c{row.concurrency}"]
        assert list(prof)[:len(SPECDEC_KEYS)] == SPECDEC_KEYS and list(prof)[-1] == "speedbench"
        assert_profile_is_the_row(prof, row)
        hist = row.acceptance_histogram
        assert prof["acceptance_length_histogram"] == {str(j + 1): n for j, n in enumerate(hist) if n}
        ext = prof["speedbench"]["accept_length_extrapolated_by_k"]
        assert ext["3"] == pytest.approx(row.al_tokens)
        assert ext["1"] == pytest.approx(1 + row.per_position_joint[0])
        cats = {c.category: c.al_requests for c in run.categories
                if c.arm == row.arm and c.concurrency == row.concurrency}
        assert prof["per_category"] == cats
        assert prof["draft_checkpoint"]["id"] == f"org/{row.arm}-draft"
        assert prof["target_model"]["id"] == "tiny/target"
    assert "baseline__c1" not in profiles


def _row(**over):
    row = {"arm": "a", "concurrency": 1, "variant": "", "speculative": True, "method": "eagle3",
           "num_speculative_tokens": 3, "per_position_conditional": [0.6, 0.5, 0.0],
           "per_position_joint": [0.6, 0.3, 0.0], "al_tokens": 1.9, "al_requests": 2.0,
           "acceptance_histogram": [40, 30, 30, 0]}
    return SummaryRow.from_dict({**row, **over})


def test_a_list_longer_than_k_is_kept_and_a_cut_one_fails_the_mean_check():
    # the row says k=2 but four positions were accepted: the profile keeps all four
    prof = speculation_profile(Run(None, {"rows": []}), _row(
        num_speculative_tokens=2, per_position_joint=[0.8, 0.6, 0.4, 0.2], al_tokens=3.0))
    check = prof["validation"]["mean_consistency"]
    assert check["passed"] is True  # the list is never cut: 1 + 0.8 + 0.6 + 0.4 + 0.2 = 3.0
    assert mean_check(3.0, [0.8, 0.6])["passed"] is False
    assert mean_check(3.0, [0.8, 0.6])["implied_mean_accept_length"] == pytest.approx(2.4)


def test_monotonicity_flags_a_rising_marginal():
    res = monotonicity_check([0.5, 0.6, 0.1])
    assert not res["passed"] and res["violations"] == [{"position": 1, "value": 0.6, "previous": 0.5}]
    prof = speculation_profile(Run(None, {"rows": []}), _row(per_position_joint=[0.5, 0.6, 0.1]))
    assert prof["validation"]["marginal_monotonicity"]["passed"] is False


def test_short_lists_are_padded_to_k_and_non_chain_methods_are_not_extrapolated():
    prof = speculation_profile(Run(None, {"rows": []}), _row(
        method="ngram", num_speculative_tokens=5, per_position_joint=[0.6, 0.3], per_position_conditional=[0.6, 0.5]))
    assert prof["marginal_accept_rates"] == [0.6, 0.3, 0.0, 0.0, 0.0]
    assert prof["conditional_accept_rates"] == [0.6, 0.5, 0.0, 0.0, 0.0]
    assert prof["accept_length_model"] == "measured_per_k"
    assert prof["speedbench"]["accept_length_extrapolated_by_k"] is None


def test_extrapolation_is_the_running_sum_of_the_marginals():
    assert extrapolate_over_k([0.6, 0.3, 0.0]) == pytest.approx({"1": 1.6, "2": 1.9, "3": 1.9})


def test_a_sweep_over_k_fills_accept_length_by_k():
    rows = [_row(arm="k2", num_speculative_tokens=2, al_tokens=1.8), _row(arm="k3", al_tokens=1.9),
            _row(arm="other", num_speculative_tokens=4, al_tokens=2.5, method="draft_model")]
    run = Run(None, {"rows": [r.to_dict() for r in rows]})
    assert speculation_profile(run, rows[1])["accept_length_by_k"] == {"2": 1.8, "3": 1.9}


def test_an_arm_without_measured_acceptance_is_marked_unmeasured():
    prof = speculation_profile(Run(None, {"rows": []}), _row(al_tokens=None, al_requests=None))
    assert prof["measured"] is False and prof["validation"] is None and prof["accept_length_by_k"] == {}


def test_several_runs_only_for_the_category_matrix(tmp_path):
    rd = make_run(tmp_path / "r")
    assert main(["export", str(rd.path), str(rd.path), "--format", "speculation-profile"]) == 2


def assert_profile_is_the_row(prof: dict, row: SummaryRow) -> None:
    """A chain drafter's profile carries the summary row's figures unchanged, and passes
    both of specdec_bench's checks."""
    assert prof["conditional_accept_rates"] == row.per_position_conditional
    assert prof["marginal_accept_rates"] == row.per_position_joint
    assert prof["mean_accept_length"] == row.al_tokens
    assert prof["mean_accept_length_per_request"] == row.al_requests
    assert prof["validation"]["mean_consistency"]["passed"]
    assert prof["validation"]["marginal_monotonicity"]["passed"]
    assert prof["accept_length_model"] == "chain_analytic"  # eagle3 drafts a chain
