"""Prompts from a JSONL file, and random-token prompts (opt-in only).

One JSON object per line, in any of these shapes:

* ``{"prompt": "..."}`` or ``{"text": "..."}``: one user turn.
* ``{"messages": [{"role": "user", "content": "..."}, ...]}``: a chat. Each user message is
  one turn. Assistant messages are dropped: the runner feeds back the model's own answers,
  as SPEED-Bench does. A leading system message is kept in the prompt's tags as
  ``system_prompt`` and used unless the workload or variant sets one.
* ``{"turns": [...], ...}``: SPEED-Bench's own schema.

Optional keys on any shape: ``id`` (or ``question_id``), ``category``, ``sub_category``,
``source``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from speedbench.errors import ScenarioError
from speedbench.records import Prompt
from speedbench.workload.speed_bench import read_jsonl, resolve_path
from speedbench.workload.speed_bench import turns_from_messages as _from_messages

DEFAULT_CATEGORY = "uncategorized"
DEFAULT_RANDOM_PROMPTS = 64
DEFAULT_RANDOM_TOKENS = 256
RANDOM_WARNING = (
    "workload.source is 'random': random-token prompts overstate speculative-decoding "
    "speedups (SPEED-Bench measured about 23% on average), because a draft's acceptance on "
    "noise says nothing about acceptance on real text. Use these numbers for load shape only."
)


def load_jsonl(path: str, *, base_dir: Path | None = None) -> list[Prompt]:
    p = resolve_path(path, base_dir)
    if not p.is_file():
        raise ScenarioError(
            f"workload.path: JSONL file {p} does not exist -- fix: point workload.path at a file "
            'with one {"prompt": ...} or {"messages": [...]} object per line'
        )
    rows = read_jsonl(p)
    if not rows:
        raise ScenarioError(f"workload.path: {p} holds no rows")
    return [_row_to_prompt(row, p) for row in rows]


def _row_to_prompt(row: dict[str, Any], path: Path) -> Prompt:
    line = row.get("_line", 0)
    at = f"{path}:{line}"
    tags: list[tuple[str, str]] = []
    if "messages" in row:
        turns, system = _from_messages(row["messages"], at)
        if system:
            tags.append(("system_prompt", system))
    elif "turns" in row:
        raw = row["turns"]
        turns = (raw,) if isinstance(raw, str) else tuple(str(t) for t in raw or ())
    elif "prompt" in row or "text" in row:
        text = row.get("prompt", row.get("text"))
        if not isinstance(text, str):
            raise ScenarioError(f"{at}: 'prompt'/'text' must be a string, got {type(text).__name__}")
        turns = (text,)
    else:
        keys = sorted(k for k in row if k != "_line")
        raise ScenarioError(
            f'{at}: no prompt in this row (keys {keys}) -- fix: use {{"prompt": "..."}}, '
            '{"text": "..."}, {"messages": [{"role": "user", "content": "..."}]} or {"turns": [...]}'
        )
    if not turns or not all(t.strip() for t in turns):
        raise ScenarioError(f"{at}: empty prompt")
    return Prompt(
        id=str(row.get("id", row.get("question_id", f"{path.stem}-{line}"))),
        turns=turns,
        category=str(row.get("category") or DEFAULT_CATEGORY),
        sub_category=str(row.get("sub_category") or ""),
        source=str(row.get("source") or path.name),
        tags=tuple(tags),
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
