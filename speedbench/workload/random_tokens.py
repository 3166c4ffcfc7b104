"""Random-token prompts (opt-in only): load shape without real text.

SPEED-Bench found that random-token inputs overstate speculative-decoding speedups by
about 23%, so this source is refused unless ``allow_random: true``, and its prompts
always come with a warning.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from speedbench.errors import ScenarioError
from speedbench.records import Prompt
from speedbench.scenario import VariantSpec, WorkloadSpec
from speedbench.workload.base import Source

DEFAULT_RANDOM_PROMPTS = 64
DEFAULT_RANDOM_TOKENS = 256
RANDOM_WARNING = (
    "workload.source is 'random': random-token prompts overstate speculative-decoding "
    "speedups (SPEED-Bench measured about 23% on average), because a draft's acceptance on "
    "noise says nothing about acceptance on real text. Use these numbers for load shape only."
)


def random_prompts(
    *, allow: bool, seed: int, n: int | None = None, input_tokens: int | None = None, tokenizer=None
) -> tuple[list[Prompt], str]:
    """-> (prompts, warning). The caller shows the warning; it is part of the result, not optional.

    With a tokenizer, each prompt decodes ``input_tokens`` uniformly drawn non-special token
    ids. Without one, it joins pseudo-words of 2-7 letters, about one token each (an
    estimate: real tokenizers split such words into 1-3 pieces).
    """
    if not allow:
        raise ScenarioError(
            "workload.source is 'random', but random-token prompts overstate speculative-decoding "
            "speedups by about 23% (SPEED-Bench) -- fix: use source speed_bench, sample or jsonl, "
            "or set workload.allow_random: true if you only need load shape"
        )
    n = n or DEFAULT_RANDOM_PROMPTS
    length = input_tokens or DEFAULT_RANDOM_TOKENS
    rng = random.Random(f"random-prompts:{seed}")
    prompts = []
    for i in range(n):
        text = _random_text(rng, length, tokenizer)
        prompts.append(Prompt(id=f"random-{seed}-{i:05d}", turns=(text,), category="random", source="random"))
    return prompts, RANDOM_WARNING


def _random_text(rng: random.Random, length: int, tokenizer) -> str:
    if tokenizer is not None:
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        vocab = len(tokenizer)
        ids: list[int] = []
        while len(ids) < length:
            t = rng.randrange(vocab)
            if t not in special:
                ids.append(t)
        return tokenizer.decode(ids)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return " ".join("".join(rng.choice(letters) for _ in range(rng.randint(2, 7))) for _ in range(length))


class RandomSource(Source):
    name = "random"

    def read(self, spec: WorkloadSpec, config: str, *, base_dir: Path | None, variant: VariantSpec | None,
             tokenizer: Any) -> tuple[list[Prompt], list[str]]:
        # enough rows that warmup can use rows of its own
        n = (spec.num_prompts or DEFAULT_RANDOM_PROMPTS) + spec.warmup
        prompts, warning = random_prompts(allow=spec.allow_random, seed=spec.seed, n=n,
                                          input_tokens=variant.input_tokens if variant else None, tokenizer=tokenizer)
        return prompts, [warning]

    def default_cap(self, spec: WorkloadSpec, n_rows: int) -> int:
        return DEFAULT_RANDOM_PROMPTS  # the extra rows are warmup's

    def fingerprint(self, spec: WorkloadSpec, base_dir: Path | None) -> dict[str, object]:
        return {"sha256": "", "note": "generated prompts; no data files"}


SOURCE = RandomSource()
