"""One point's measurement as two objects: the job (what to send, how often) and the
target (where requests go, how to tell the server died, where records land). vLLM's
benchmarks pass one ``RequestFuncInput`` the same way, instead of a dozen arguments."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from speedbench.client.http import ClientConfig
from speedbench.records import PointKey, Prompt, RequestRecord

ServerAlive = Callable[[], Any]  # -> None while the server lives, else why not (may be async)
OnRecord = Callable[[RequestRecord], Any]


class Metrics(Protocol):
    """The server's Prometheus endpoint, as its engine reads it (the run passes its
    ``Engine``): the text of one scrape, and the lines two scrapes must agree on before
    a snapshot counts as settled."""

    settle_prefixes: tuple[str, ...]

    async def scrape(self, base_url: str) -> str: ...


class Builder(Protocol):
    def build(self, prompt: Prompt, turn: int, history: list[tuple[str, str]]) -> tuple[str, dict]: ...


@dataclass(frozen=True)
class PointJob:
    """One point's work: ``repeats`` measured passes over ``prompts``, numbered from
    ``first_repeat`` (a round of fresh server starts measures one pass, numbered by its
    round), after ``warmup`` (once, before the first pass, closed loop). ``arrivals``
    (seconds from the start, one per prompt; loadgen/arrivals.py) switches measurement to
    the open loop with at most ``key.concurrency`` in flight; None is the closed loop."""

    key: PointKey
    prompts: Sequence[Prompt]
    warmup: Sequence[Prompt] = ()
    repeats: int = 1
    first_repeat: int = 0
    arrivals: Sequence[float] | None = None


@dataclass(frozen=True)
class Target:
    """Where a job's requests go. ``server_alive()`` (sync or async) returns None while
    the server lives and a message once it died; the loops poll it and stop the pass.
    ``on_record(rec)`` is called (synchronously) as each measured record completes,
    including records cut short by an abort or a cancellation; warmup records never
    reach it."""

    client: ClientConfig
    builder: Builder
    server_alive: ServerAlive | None = None
    on_record: OnRecord | None = None
