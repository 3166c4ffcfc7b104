"""The output comparison and the margin rule (metrics/outputs.py): what makes a divergence
numerics or a loss, and each verdict."""

from __future__ import annotations

import numpy as np

from speedbench.metrics import outputs as o
from speedbench.metrics.stored_outputs import CheckAnswer


def _outs(**seqs: list[int]) -> dict:
    return {(int(k[1:]), 0): np.asarray(v) for k, v in seqs.items()}


def test_first_divergence_counts_common_tokens():
    assert o.first_divergence(np.array([1, 2, 3]), np.array([1, 2, 3])) is None
    assert o.first_divergence(np.array([1, 2, 3]), np.array([1, 9, 3])) == 1
    assert o.first_divergence(np.array([1, 2]), np.array([1, 2, 3])) == 2  # one ended first


def test_compare_pairs_prompts_and_names_each_divergence():
    arm = _outs(p0=[5, 6, 7], p1=[5, 6, 8], p2=[1])
    ref = _outs(p0=[5, 6, 7], p1=[5, 6, 7], p3=[1])
    c = o.compare(arm, ref)
    assert (c.pairs, c.identical) == (2, 1)
    assert c.identical_fraction == 0.5
    assert c.divergences == (o.Divergence(1, 0, 2, ref_token=7, arm_token=8),)


def test_a_later_turn_is_not_compared_after_its_conversation_diverged():
    arm = {(0, 0): np.array([1, 2]), (0, 1): np.array([3]), (1, 0): np.array([4]), (1, 1): np.array([5])}
    ref = {(0, 0): np.array([1, 9]), (0, 1): np.array([3]), (1, 0): np.array([4]), (1, 1): np.array([6])}
    c = o.compare(arm, ref)
    assert c.pairs == 3  # (0, 1) skipped: its prompt held a different first answer
    assert [(d.prompt_index, d.turn) for d in c.divergences] == [(0, 0), (1, 1)]


def test_margin_exact_and_bounded():
    top = {7: -0.1, 8: -0.3, 9: -4.0}
    m, exact = o.margin(top, 7, 8)
    assert exact and abs(m - 0.2) < 1e-12
    m, exact = o.margin(top, 7, 42)  # the arm's token below the list: at least 3.9 below
    assert (round(m, 6), exact) == (3.9, False)
    m, exact = o.margin(top, 42, 8)  # the reference's token unlisted: the arm's is the likelier
    assert exact is False and m < 0
    assert o.margin(top, 41, 42) == (None, False)


def test_near_tie_is_numerics_and_a_far_token_is_a_loss():
    assert o.is_loss(o.NEAR_TIE_NATS / 10, True) is False
    assert o.is_loss(o.NEAR_TIE_NATS * 4, True) is True
    assert o.is_loss(o.NEAR_TIE_NATS * 4, False) is True  # lower bound past the threshold
    assert o.is_loss(-1.0, False) is False
    assert o.is_loss(None, False) is None


def _cmp(n_div: int, pairs: int = 10) -> o.Comparison:
    return o.Comparison(pairs, pairs - n_div, tuple(o.Divergence(i, 0, 3, 7, 8) for i in range(n_div)))


def test_verdicts():
    assert o.verdict(_cmp(0), [])[0] == o.IDENTICAL
    tie = CheckAnswer(margin=0.01, exact=True)
    assert o.verdict(_cmp(2), [tie, tie])[0] == o.NUMERICS
    v, why = o.verdict(_cmp(2), [tie, CheckAnswer(margin=6.0, exact=False)])
    assert v == o.LOSSY and "1 of 2" in why
    v, why = o.verdict(_cmp(2), [CheckAnswer(error="the check request was refused (HTTP 400: no)")])
    assert v == o.NOT_CHECKED and "HTTP 400" in why
    assert o.verdict(None, [], "not recorded") == (o.NOT_CHECKED, "not recorded")
    # one of two divergences checked (under the per-point cap): not enough to call it lossless
    assert o.verdict(_cmp(2), [tie])[0] == o.NOT_CHECKED
