"""Context-length padding: lengthen a prompt to a target token count (a context bucket).

The prompt is kept intact at the end; in front of it goes a per-prompt header and a slice
of generated filler (short prose notes and small code-like functions). Header and slice
are chosen by a seeded RNG keyed by the workload seed and the prompt id, so

* the same prompt always gets the same padding (both arms see identical requests), and
* different prompts differ from their first tokens on (the header holds a hash of the
  id). vLLM's prefix-cache block hashes chain over all earlier blocks, so no padded
  block can be shared between prompts and flatter the results.

The filler is varied rather than one passage repeated, because repeated context is easy
for n-gram drafting to copy and would inflate acceptance.

With a tokenizer the padded text hits the target within a token or two (decoded
boundaries can merge). Without one, lengths are estimated at ``CHARS_PER_TOKEN``
characters per token, which is typical for English and code with BPE vocabularies but
can be off by 30% either way.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from speedbench.workload.speed_bench import CONFIG_INPUT_TOKENS

CHARS_PER_TOKEN = 4
SEPARATOR = "\n\n---\n\n"

_NOUNS = ("buffer", "ledger", "packet", "router", "cache", "queue", "sensor", "invoice", "matrix",
          "token", "shard", "window", "record", "channel", "budget", "schedule", "archive", "cursor",
          "segment", "profile", "bucket", "report", "signal", "batch")
_VERBS = ("load", "merge", "scan", "flush", "parse", "rank", "split", "sync", "trim", "verify",
          "encode", "route", "sample", "index", "render", "retry", "compact", "export")
_ADJS = ("stale", "pending", "sorted", "sparse", "hourly", "remote", "cached", "partial", "nested",
         "signed", "frozen", "urgent", "shared", "empty")
_SENTENCES = (
    "Each worker must {verb} the {adj} {noun} before it touches the {noun2}.",
    "When the {noun} grows past {num} entries, the service starts to {verb} the oldest {noun2} first.",
    "Operators noted that the {adj} {noun} took {num} ms to {verb} during the nightly job.",
    "A {noun} that fails to {verb} is retried {small} times and then parked on the {adj} {noun2} list.",
    "The {noun2} limit was raised to {num} after the {adj} {noun} incident in week {small}.",
    "Do not {verb} a {noun} while its {noun2} is still {adj}; wait for the next cycle.",
    "In region {small}, the {adj} {noun} count stayed near {num} for most of the quarter.",
    "The team agreed to {verb} every {noun} once per hour and to keep {small} spare {noun2} slots.",
)
_CODE = (
    'def {verb}_{noun}({noun2}_list, limit={num}):\n'
    '    """Keep the {adj} entries, at most `limit` of them."""\n'
    '    kept = []\n'
    '    for item in {noun2}_list:\n'
    '        if item.{adj} and len(kept) < limit:\n'
    '            kept.append(item.{noun})\n'
    '    return kept\n',
    'class {Noun}{Noun2}:\n'
    '    def __init__(self, size={num}):\n'
    '        self.size = size\n'
    '        self.{noun2}s = []\n\n'
    '    def {verb}(self, value):\n'
    '        if len(self.{noun2}s) >= self.size:\n'
    '            self.{noun2}s.pop(0)\n'
    '        self.{noun2}s.append(value)\n',
    '{noun}_{small} = {{\n'
    '    "name": "{adj}-{noun2}",\n'
    '    "limit": {num},\n'
    '    "action": "{verb}",\n'
    '}}\n',
)


class Padder:
    """Pads prompts to one target length; holds the filler pool so it is built only once.

    Every padded prompt takes a different, seeded slice of one shared pool of filler, so
    padding costs one decode and one encode per prompt.
    """

    def __init__(self, target_tokens: int, *, seed: int | str = 0, tokenizer=None):
        self.target = target_tokens
        self.tokenizer = tokenizer
        self.seed = seed
        self._pool_text = ""
        self._pool_ids: list[int] = []

    def pad(self, text: str, *, key: str) -> str:
        """``text`` lengthened to about the target; unchanged if already that long.

        ``key`` (the prompt id) picks the header and the slice of filler.
        """
        header = f"Background notes {hashlib.sha256(f'{self.seed}:{key}'.encode()).hexdigest()[:10]}:\n"
        tail = SEPARATOR + text
        rng = random.Random(f"padding:{self.seed}:{key}")
        if self.tokenizer is None:
            budget = self.target * CHARS_PER_TOKEN - len(header) - len(tail)
            if budget <= 0:
                return text
            pool = self._text_pool()
            start = rng.randrange(len(pool) - budget + 1)
            filler = pool[start:start + budget]
            cut = filler.rfind(" ")  # end on a word boundary, as a tokenizer would
            return header + (filler[:cut] if cut > budget // 2 else filler) + tail
        budget = self.target - self._count(header + tail)
        if budget <= 0:
            return text
        ids = self._id_pool()
        start = rng.randrange(len(ids) - budget + 1)
        candidate = header + self.tokenizer.decode(ids[start:start + budget]) + tail
        # Tokens can merge or split where the pieces join: correct once by the difference.
        diff = self.target - self._count(candidate)
        if diff and budget + diff > 0:
            start = min(start, len(ids) - (budget + diff))
            candidate = header + self.tokenizer.decode(ids[start:start + budget + diff]) + tail
        return candidate

    def _count(self, s: str) -> int:
        return len(self.tokenizer.encode(s, add_special_tokens=False))

    # The pools depend only on the seed and the target, never on which prompt came
    # first, so every builder cuts the same slices. 1.5x the target leaves room for
    # prompts to start at many different offsets.
    def _text_pool(self) -> str:
        if not self._pool_text:
            n = self.target * CHARS_PER_TOKEN * 3 // 2 + 1000
            self._pool_text = _filler(random.Random(f"padding-pool:{self.seed}"), n)
        return self._pool_text

    def _id_pool(self) -> list[int]:
        if not self._pool_ids:
            need = self.target * 3 // 2 + 100
            n_chars = need * CHARS_PER_TOKEN // 2
            while len(self._pool_ids) < need:  # vocabularies differ in characters per token
                n_chars *= 2
                text = _filler(random.Random(f"padding-pool:{self.seed}"), n_chars)
                self._pool_ids = self.tokenizer.encode(text, add_special_tokens=False)
        return self._pool_ids


def _filler(rng: random.Random, n_chars: int) -> str:
    parts: list[str] = []
    size = 0
    while size < n_chars:
        words: dict[str, Any] = {
            "noun": rng.choice(_NOUNS), "noun2": rng.choice(_NOUNS), "verb": rng.choice(_VERBS),
            "adj": rng.choice(_ADJS), "num": rng.randint(10, 9999), "small": rng.randint(2, 9),
        }
        words["Noun"], words["Noun2"] = words["noun"].title(), words["noun2"].title()
        if rng.random() < 0.3:
            para = rng.choice(_CODE).format(**words)
        else:
            para = " ".join(
                rng.choice(_SENTENCES).format(**{**words, "noun": rng.choice(_NOUNS), "num": rng.randint(10, 9999)})
                for _ in range(rng.randint(2, 5))
            ) + "\n"
        parts.append(para)
        size += len(para) + 1
    return "\n".join(parts)


def context_buckets(scenario: dict[str, Any] | None) -> dict[str, int]:
    """variant name -> context length in tokens, from a resolved scenario dict: the
    variant's ``input_tokens`` (the length its prompts are padded to), else the length of
    its SPEED-Bench throughput ``config``. Other variants are not buckets; a variant's
    name is never read for a length."""
    out: dict[str, int] = {}
    for v in ((scenario or {}).get("workload") or {}).get("variants") or []:
        tokens = v.get("input_tokens") or CONFIG_INPUT_TOKENS.get(str(v.get("config") or ""))
        if tokens:
            out[str(v.get("name", ""))] = int(tokens)
    return out
