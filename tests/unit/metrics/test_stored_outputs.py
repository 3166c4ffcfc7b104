"""The output check's stored results typed (metrics/stored_outputs.py): summary.json's
``outputs`` block and outputs/checks.json read once into frozen rows, read by attribute,
and given back byte for byte, an old folder's shapes and unknown keys included."""

from __future__ import annotations

import json

import pytest

from speedbench.metrics import outputs as cmp
from speedbench.metrics.stored_outputs import CheckAnswer, OutputsBlock, OutputsEntry, read_checks
from speedbench.records import PointKey

LOSSY = {"arm": "e3", "concurrency": 4, "variant": "code",
         "reference": {"arm": "base", "concurrency": 4, "variant": "code"},
         "verdict": "lossy", "reason": "1 of 2 divergences ...", "pairs": 10, "identical": 8,
         "identical_fraction": 0.8, "divergences": 2, "first_divergence": {"min": 3, "median": 4.5, "max": 6},
         "checked": 2, "near_ties": 1,
         "largest_margins": [{"prompt_index": 1, "turn": 0, "position": 6, "margin": 3.2, "exact": False}],
         "floor": ""}
UNCOMPARED = {"arm": "e3", "concurrency": 1, "variant": "", "reference": {"arm": "base", "concurrency": 1,
                                                                         "variant": ""},
              "verdict": "not checked", "reason": "no token ids in the stream", "pairs": 0, "identical": 0,
              "identical_fraction": None, "floor": ""}
BLOCK = {"near_tie_nats": 0.5, "top": 20, "checks_per_point": 32, "points": [LOSSY, UNCOMPARED]}


def test_an_entry_reads_by_attribute():
    e = OutputsEntry.from_dict(LOSSY)
    assert e.key == PointKey("e3", 4, "code") and e.reference is not None and e.reference.key == PointKey("base", 4,
                                                                                                         "code")
    assert e.lossy and e.verdict_text == cmp.LOSSY and e.fraction == 0.8 and e.reason_text.startswith("1 of 2")
    assert e.first_divergence is not None and (e.first_divergence.min, e.first_divergence.median) == (3, 4.5)
    assert [m.margin for m in e.largest_margins] == [3.2]
    bare = OutputsEntry.from_dict(UNCOMPARED)
    assert bare.first_divergence is None and bare.largest_margins == () and bare.fraction is None
    assert not bare.has("divergences") and bare.verdict_text == cmp.NOT_CHECKED


@pytest.mark.parametrize("stored", [
    BLOCK,
    {**BLOCK, "not_checked": "sampling at temperature 0.7: outputs cannot be compared token for token"},
    {"points": [{"floor": "A/A", "verdict": "identical", "arm": "aa", "concurrency": 1, "extra": [1, 2]}],
     "top": 20, "future_key": {"x": 1}},  # an entry's keys in another order, keys this version does not know
])
def test_the_block_gives_back_what_was_stored_byte_for_byte(stored):
    block = OutputsBlock.read({"outputs": stored})
    assert block is not None
    assert json.dumps(block.to_dict()) == json.dumps(stored)


def test_a_summary_without_the_block_reads_none_and_a_block_without_points_reads_no_list():
    assert OutputsBlock.read({"rows": []}) is None and OutputsBlock.read({"outputs": None}) is None
    block = OutputsBlock.read({"outputs": {"near_tie_nats": 0.5}})
    assert block is not None and block.points is None and block.not_checked is None


def test_check_answers_read_once_and_give_back_their_keys():
    stored = [{"arm": "e3", "concurrency": 4, "repeat": 0, "prompt_index": 1, "turn": 0, "position": 6,
               "margin": 0.02, "exact": True, "top_listed": 20, "check_s": 0.1},
              "not an answer",
              {"arm": "e3", "concurrency": 4, "variant": "", "repeat": 0, "error": "the check request failed"}]
    answers = read_checks(stored)
    assert len(answers) == 2 and answers[0].variant == ""  # an answer from before variants: the default workload
    assert answers[0].margin == 0.02 and answers[0].error is None and answers[1].error == "the check request failed"
    assert [a.to_dict() for a in answers] == [stored[0], stored[2]]
    assert read_checks(None) == [] and CheckAnswer().variant == ""
