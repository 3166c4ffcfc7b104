"""The fake server's token ids, for the output check (docs/metrics.md, "Outputs").

Prompt ids lie below 100 and output ids from 100 up, so an id says which side it is on:
the honest output token at position p is ``100 + p`` (what the fake's target model
"computes"). A check request sends the prompt's ids and the prefix both arms shared; the
prefix's length is the count of its trailing ids of 100 and over, and the target's top
token there is ``100 + p``. Two scripted departures from it (FakeConfig):

- ``wrong_after``: a lossy speculative path, emitting ``WRONG + p`` from position N on,
  a token the target never ranks (the check's answer does not list it);
- ``tie_after``: a near-tie, emitting ``TIE + p``, which every server's check answer lists
  a few hundredths of a nat below the top token (the fake target's runner-up everywhere),
  as numerics flip real ties.

Pure arithmetic, so tests compute what the fake will say from the same functions.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from speedbench.testing.script import FakeConfig

OUTPUT = 100  # the first output id; every prompt id is below it
WRONG = 50000
TIE = 60000
# the check answer's logprobs: the top token and its near-tie runner-up, far above the fillers
TIE_TOP_LP, TIE_ALT_LP = math.log(0.48), math.log(0.47)  # 0.021 nats apart
FILLER_LP = -5.0


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _word_ids(text: str) -> list[int]:
    # 5..94: ids 0..4 are the chat template's; none reaches OUTPUT
    return [5 + _hash(w) % 90 for w in text.split()]


def prompt_ids(body: dict) -> list[int]:
    """The ids the fake "tokenised" a request's prompt into: each word's hash below 100,
    and per chat message its template ids, so there are as many as usage's prompt_tokens."""
    if "messages" in body:
        out: list[int] = []
        for m in body["messages"]:
            role = 1 + _hash(str(m.get("role", ""))) % 4
            out += [0, role, *_word_ids(str(m.get("content", ""))), 0, 4]  # 4 template ids, as usage counts them
        return out
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        return [int(t) for t in prompt]
    return _word_ids(str(prompt))


def diverges(cfg: FakeConfig, text: str) -> bool:
    """Whether wrong_after / tie_after touch this prompt: every prompt, or a fixed share of
    them picked by the prompt text's hash (the same prompts on every server and round)."""
    if cfg.wrong_after is None and cfg.tie_after is None:
        return False
    return cfg.diverge_share >= 1.0 or (_hash(f"share:{text}") % 10_000) / 10_000 < cfg.diverge_share


def output_id(cfg: FakeConfig, pos: int, affected: bool) -> int:
    """The id the fake emits at output position ``pos``."""
    if affected and cfg.wrong_after is not None and pos >= cfg.wrong_after:
        return WRONG + pos
    if affected and cfg.tie_after is not None and pos >= cfg.tie_after:
        return TIE + pos
    return OUTPUT + pos


def position(prompt: list[int]) -> int:
    """How many output tokens a check's prompt carries: its trailing ids of 100 and over."""
    n = 0
    for t in reversed(prompt):
        if t < OUTPUT:
            break
        n += 1
    return n


def target_top(cfg: FakeConfig, pos: int, k: int) -> dict[int, float]:
    """The target's ``k`` most likely next tokens at output position ``pos``, best first: the
    honest token, its near-tie alternative just below, then fillers (prompt-side ids). The
    same on every server, as one target's distribution is: the check pass asks the baseline's."""
    top: dict[int, float] = {OUTPUT + pos: TIE_TOP_LP, TIE + pos: TIE_ALT_LP}
    filler = 0
    while len(top) < max(1, k):
        top[filler] = FILLER_LP - 0.25 * filler
        filler += 1
    return dict(list(top.items())[:max(1, k)])


def check_logprobs(cfg: FakeConfig, prompt: list[int], k: int, as_ids: bool) -> tuple[int, dict[str, Any]]:
    """(the generated token, vLLM's ``choices[0].logprobs`` of a one-token completion with
    ``logprobs: k``). ``as_ids``: ``return_tokens_as_token_ids``, tokens named ``token_id:N``."""
    top = target_top(cfg, position(prompt), k)
    best = next(iter(top))

    def name(t: int) -> str:
        return f"token_id:{t}" if as_ids else f" w{t}"

    return best, {"tokens": [name(best)], "token_logprobs": [top[best]],
                  "top_logprobs": [{name(t): lp for t, lp in top.items()}], "text_offset": [0]}
