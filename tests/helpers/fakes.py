"""Test doubles shared by the measurement-core tests.

``FakeBuilder`` stands in for ``speedbench.workload.chat.RequestBuilder`` (same
``build(prompt, turn, history) -> (path, body)`` interface) so runner tests do not
depend on the workload package. ``fake_server`` starts the scripted fake server, which
speaks vLLM's stream and counters: ``VLLM`` is the engine a run would hand the client and
the load generator for it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from speedbench.engine.vllm import VllmEngine
from speedbench.records import Prompt
from speedbench.testing import FakeConfig
from speedbench.testing.hosting import FakeServer

VLLM = VllmEngine()


class FakeBuilder:
    def __init__(self, api: str = "chat", model: str = "fake-model", max_tokens: int = 4096,
                 extra: dict | None = None) -> None:
        self.api = api
        self.model = model
        self.max_tokens = max_tokens
        self.extra = extra or {}
        self.calls: list[tuple[str, int, list[tuple[str, str]]]] = []

    def build(self, prompt: Prompt, turn: int, history: list[tuple[str, str]]) -> tuple[str, dict]:
        self.calls.append((prompt.id, turn, list(history)))
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "temperature": 0.0, **self.extra}
        if self.api == "chat":
            msgs = []
            for user, assistant in history:
                msgs += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
            msgs.append({"role": "user", "content": prompt.turns[turn]})
            body["messages"] = msgs
            return "/v1/chat/completions", body
        text = "".join(f"{u}\n{a}\n" for u, a in history) + prompt.turns[turn]
        body["prompt"] = text
        return "/v1/completions", body

    def rendered_hash(self) -> str:
        return "fake"


def prompts(n: int, *, turns: int = 1, category: str = "coding", prefix: str = "p") -> list[Prompt]:
    return [
        Prompt(id=f"{prefix}{i}", turns=tuple(f"question {prefix}{i} turn {t}" for t in range(turns)),
               category=category)
        for i in range(n)
    ]


@contextlib.contextmanager
def fake_server(**config: Any) -> Iterator[FakeServer]:
    with FakeServer(FakeConfig(**config)) as srv:
        yield srv


def max_overlap(records) -> int:
    """The most requests in flight at once by the client's own stamps (sent .. ended):
    what the client promises, whatever order or timing the server saw them in."""
    events = sorted([(r.t_sent_ns, 1) for r in records] + [(r.t_end_ns, -1) for r in records],
                    key=lambda e: (e[0], e[1]))
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best
