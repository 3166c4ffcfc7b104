"""What an engine adds to the OpenAI request and stream, as the client sees it.

The client speaks plain OpenAI streaming (text deltas, the final ``usage`` counts). An
engine may add a request field that asks for each chunk's token ids, and figures beside
``usage`` or inside a choice (engine timing, spec-decode stats); the run hands the client
its engine (``Engine`` satisfies :class:`StreamExtensions`; vLLM's: engine/vllm/payload.py).
Generic code states what a request needs (an exact output length, a prompt already
templated, usage once at the end) and the engine names the fields that say so.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from speedbench.records import RequestRecord


class StreamExtensions(Protocol):
    # The request field asking for per-chunk token ids ("": the engine has none). A server
    # that refuses it answers 400 naming it; the client asks again without it.
    token_ids_field: str
    # The field of a streamed choice that holds that chunk's token ids ("": none is read).
    chunk_ids_field: str

    def request_fields(self, exact_length: bool, templated: bool) -> dict[str, Any]:
        """The body fields that ask for exactly ``max_tokens`` tokens (``exact_length``) and
        for a prompt taken as it is, special tokens included (``templated``: the client
        rendered the chat template); ``{}`` where plain OpenAI already means that."""
        ...

    def usage_options(self, per_chunk: bool) -> dict[str, Any]:
        """The ``stream_options`` fields beside ``include_usage`` that ask for usage with
        every chunk (``per_chunk``) or once at the end."""
        ...

    def read_usage(self, obj: dict, usage: dict, rec: RequestRecord) -> None:
        """The engine's figures in the usage event (``obj``), beside the token counts."""
        ...

    def read_choice(self, choice: dict, rec: RequestRecord) -> None:
        """The engine's figures inside one choice of an event."""
        ...

    def read_event(self, obj: dict, rec: RequestRecord) -> None:
        """The engine's figures at an event's top level (the prompt's token ids)."""
        ...


class PlainOpenAI:
    """No extension: token counts from text deltas and ``usage`` only."""

    token_ids_field: str = ""
    chunk_ids_field: str = ""

    def request_fields(self, exact_length: bool, templated: bool) -> dict[str, Any]:
        # OpenAI has no way to ask either: the body says nothing more
        return {}

    def usage_options(self, per_chunk: bool) -> dict[str, Any]:
        return {}  # OpenAI sends usage once, at the end

    def read_usage(self, obj: dict, usage: dict, rec: RequestRecord) -> None:
        return None

    def read_choice(self, choice: dict, rec: RequestRecord) -> None:
        return None

    def read_event(self, obj: dict, rec: RequestRecord) -> None:
        return None


PLAIN = PlainOpenAI()


def ask_token_ids(payload: dict, field: str, want: bool) -> None:
    """Set or drop the token-ids field on a request body."""
    if want and field:
        payload[field] = True
    elif field:
        payload.pop(field, None)


def refuses_token_ids(status: int, head: bytes, field: str) -> bool:
    """Whether an error response refuses the token-ids field (a server without the extension)."""
    return bool(field) and status == 400 and field.encode() in head


def read_usage(obj: dict, usage: Any, rec: RequestRecord, stream: StreamExtensions) -> None:
    """The usage chunk: token counts, then the engine's own figures. A usage that is not
    an object, or a count that is not a number, is ignored (the client's own counts
    stand): a proxy's odd chunk must not fail a request whose tokens arrived."""
    if not isinstance(usage, dict):
        return
    for key, attr in (("prompt_tokens", "prompt_tokens"), ("completion_tokens", "output_tokens")):
        v = usage.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
            setattr(rec, attr, int(v))
    stream.read_usage(obj, usage, rec)
