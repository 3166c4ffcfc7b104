"""The fake server's token ids and its answer to the output check's request
(speedbench/testing/fake_tokens.py): the shape vLLM gives, read by the engine's own reader,
so the integration tests' verdicts rest on ids the fake really sends."""

from __future__ import annotations

from speedbench.engine.vllm import logprobs
from speedbench.metrics import outputs as cmp
from speedbench.testing import FakeConfig
from speedbench.testing.fake_args import config_from_argv
from speedbench.testing.fake_tokens import (
    OUTPUT,
    TIE,
    WRONG,
    check_logprobs,
    diverges,
    output_id,
    position,
    prompt_ids,
)


def test_prompt_ids_stay_below_the_outputs_and_match_usage():
    chat = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "add two numbers"}]}
    ids = prompt_ids(chat)
    assert len(ids) == (2 + 4) + (3 + 4)  # the words and 4 template ids per message, as usage counts
    assert all(0 <= t < OUTPUT for t in ids) and ids == prompt_ids(chat)  # the same prompt, the same ids
    assert prompt_ids({"prompt": "add two numbers"}) == ids[-5:-2]
    assert prompt_ids({"prompt": [3, 101]}) == [3, 101]  # a prompt of ids is taken as it is


def test_output_ids_depart_only_where_scripted():
    honest = FakeConfig()
    assert [output_id(honest, p, True) for p in range(3)] == [100, 101, 102]
    wrong, tie = FakeConfig(wrong_after=2), FakeConfig(tie_after=1)
    assert [output_id(wrong, p, True) for p in range(4)] == [100, 101, WRONG + 2, WRONG + 3]
    assert [output_id(tie, p, True) for p in range(3)] == [100, TIE + 1, TIE + 2]
    assert [output_id(wrong, p, False) for p in range(4)] == [100, 101, 102, 103]  # a prompt it spares


def test_diverge_share_picks_a_fixed_share_of_prompts():
    texts = [f"prompt {i}" for i in range(400)]
    assert not any(diverges(FakeConfig(), t) for t in texts)  # neither mode on: no prompt touched
    assert all(diverges(FakeConfig(wrong_after=0), t) for t in texts)
    half = FakeConfig(tie_after=0, diverge_share=0.5)
    hit = [t for t in texts if diverges(half, t)]
    assert 150 < len(hit) < 250 and hit == [t for t in texts if diverges(half, t)]


def test_the_check_answer_has_vllms_shape_and_the_targets_ranking():
    assert position([5, 9, 100, 101]) == 2 and position([5, 9]) == 0
    top, lp = check_logprobs(FakeConfig(), [5, 9, 100, 101], cmp.TOP, as_ids=True)
    assert top == 102 and set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
    assert lp["tokens"] == ["token_id:102"] and lp["text_offset"] == [0]
    assert len(lp["top_logprobs"]) == 1 and len(lp["top_logprobs"][0]) == cmp.TOP
    read = logprobs.read_top({"choices": [{"logprobs": lp}]})
    assert read is not None and max(read, key=read.__getitem__) == 102
    assert lp["token_logprobs"] == [read[102]]
    m, exact = cmp.margin(read, 102, WRONG + 2)  # a wrong token is not listed: a bound past the line
    assert not exact and m is not None and m >= cmp.NEAR_TIE_NATS
    _, tied = check_logprobs(FakeConfig(tie_after=2), [5, 100, 101], 5, as_ids=True)
    read = logprobs.read_top({"choices": [{"logprobs": tied}]})
    assert read is not None and list(read)[:2] == [102, TIE + 2]
    m, exact = cmp.margin(read, 102, TIE + 2)
    assert exact and m is not None and 0 < m < 0.05
    _, named = check_logprobs(FakeConfig(), [100], 2, as_ids=False)
    assert named["tokens"] == [" w101"]  # without return_tokens_as_token_ids: the token's text


def test_the_modes_are_flags_of_the_fakes_command_line():
    cfg, _, _ = config_from_argv(["--wrong-after", "3", "--tie-after", "5", "--diverge-share", "0.25"])
    assert (cfg.wrong_after, cfg.tie_after, cfg.diverge_share) == (3, 5, 0.25)
    cfg, _, _ = config_from_argv([])
    assert (cfg.wrong_after, cfg.tie_after, cfg.diverge_share) == (None, None, 1.0)
