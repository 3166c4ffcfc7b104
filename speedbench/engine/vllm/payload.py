"""vLLM's per-request payload: its request fields (token ids, exact length, templated
prompts, usage once), and what vLLM adds to the usage chunk and to each choice (engine
timing, spec-decode stats). The client and the request builder call these through the
engine (client/extensions.py, workload/chat.py); the OpenAI parts are the client's own.

vLLM 0.32 sends ``metrics.speculative_decoding`` next to the final ``usage`` (accepted
inside ``usage`` too); older servers sent ``speculative_decoding_stats`` per choice.
Both normalise to :class:`SpecStats` on the record. A malformed payload is noted on the
record (``spec_error``) and never fails the request: its tokens and timings are still good.
"""

from __future__ import annotations

import json
import math
from typing import Any

from speedbench.records import EngineTiming, RequestRecord, SpecStats

# vLLM's extension: each chunk carries its ``token_ids`` (exact tokens per chunk without a
# tokenizer). Servers without it may answer 400 naming the field; the client then asks again
# without it and counts text deltas instead (client/http.py).
TOKEN_IDS_FIELD = "return_token_ids"
CHUNK_IDS_FIELD = "token_ids"  # where each choice of the stream then carries them



def request_fields(exact_length: bool, templated: bool) -> dict[str, Any]:
    """``ignore_eos`` generates exactly ``max_tokens``; ``add_special_tokens: false`` keeps
    /v1/completions from adding a second BOS to a prompt whose rendered template already
    holds one (a shifted prompt changes what the draft sees, and so acceptance)."""
    fields: dict[str, Any] = {}
    if templated:
        fields["add_special_tokens"] = False
    if exact_length:
        fields["ignore_eos"] = True
    return fields


def usage_options(per_chunk: bool) -> dict[str, Any]:
    """vLLM's switch for usage in every chunk, stated either way rather than left to its default."""
    return {"continuous_usage_stats": per_chunk}


# vLLM 0.32's per-request timing fields (``--enable-per-request-metrics``) -> EngineTiming
_TIMING_FIELDS = (("generation_time_ms", "generation_ms"), ("time_to_first_token_ms", "ttft_ms"),
                  ("queue_time_ms", "queue_ms"), ("mean_itl_ms", "mean_itl_ms"))


def read_usage(obj: dict, usage: dict, rec: RequestRecord) -> None:
    """What vLLM puts beside the usage counts: engine timing and spec stats (0.32 puts
    ``metrics`` next to ``usage``; accepted inside ``usage`` too)."""
    holders = [h for h in (obj.get("metrics"), usage.get("metrics"), usage) if isinstance(h, dict)]
    for holder in holders:
        if read_timing(rec, holder):
            break
    for holder in holders:
        if isinstance(holder.get("speculative_decoding"), dict) and set_spec(rec, holder["speculative_decoding"]):
            return


def read_choice(choice: dict, rec: RequestRecord) -> None:
    """Older vLLM's per-choice ``speculative_decoding_stats``; the prompt's token ids, which
    /v1/completions sends in its first choice (with ``return_token_ids``)."""
    legacy = choice.get("speculative_decoding_stats")
    if legacy is not None:
        set_spec(rec, legacy)
    read_event(choice, rec)


def read_event(obj: dict, rec: RequestRecord) -> None:
    """The prompt's token ids as the server tokenised it: chat sends them at the first
    chunk's top level (with ``return_token_ids``). Kept for the output check's requests."""
    ids = obj.get("prompt_token_ids")
    if rec.prompt_ids is None and isinstance(ids, list):
        rec.prompt_ids = ids


def read_timing(rec: RequestRecord, d: dict) -> bool:
    """The engine's per-request timing, when ``d`` carries it. A field that is not a
    finite non-negative number is dropped (the request keeps its client timing)."""
    values: dict[str, float] = {}
    for src, dst in _TIMING_FIELDS:
        v = d.get(src)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
            values[dst] = float(v)
    if not values:
        return False
    rec.engine = EngineTiming(**values)
    return True


def set_spec(rec: RequestRecord, payload: Any) -> bool:
    """Store the request's spec stats; a malformed payload is noted on the record and
    never fails the request (its tokens and timings are still good)."""
    try:
        spec = parse_spec(payload)
    except (TypeError, ValueError) as e:
        rec.spec = None
        rec.spec_error = f"{type(e).__name__}: {e}; payload {json.dumps(payload, default=str)[:300]}"
        return True
    if spec is not None:
        rec.spec = spec
        return True
    return False


def _first_int(d: dict, *keys: str) -> int | None:
    for k in keys:
        v = d.get(k)
        if v is not None:
            return int(v)
    return None


def parse_spec(d: Any) -> SpecStats | None:
    """Normalise either server shape to :class:`SpecStats`.

    Current (vLLM 0.32 ``metrics.speculative_decoding``): a dense histogram list,
    ``num_spec_steps``, ``num_accepted_draft_tokens``, ``num_draft_tokens``. Older
    per-choice ``speculative_decoding_stats``: a sparse histogram ``{"j": count}`` and
    ``num_drafts`` / ``num_accepted_tokens``. Missing totals are derived from the
    histogram (steps = sum(h), accepted = sum(j * h[j])). Raises ``TypeError`` /
    ``ValueError`` for a payload that is present but unusable.
    """
    if not isinstance(d, dict):
        return None
    hist = _histogram(d.get("acceptance_histogram", d.get("histogram")))
    steps = _first_int(d, "num_spec_steps", "num_drafts", "num_steps")
    accepted = _first_int(d, "num_accepted_draft_tokens", "num_accepted_tokens", "accepted_tokens")
    drafts = _first_int(d, "num_draft_tokens", "draft_tokens")
    if steps is None and hist:
        steps = sum(hist)
    if accepted is None and hist:
        accepted = sum(j * v for j, v in enumerate(hist))
    if steps is None and accepted is None:
        return None
    mal = d.get("mean_acceptance_length")
    return SpecStats(
        num_spec_steps=steps or 0,
        num_draft_tokens=drafts or 0,
        num_accepted_tokens=accepted or 0,
        acceptance_histogram=hist,
        mean_acceptance_length=float(mal) if isinstance(mal, (int, float)) else None,
    )


def _histogram(raw: Any) -> list[int]:
    """The acceptance histogram as a dense list (``hist[j]``: steps that accepted ``j``
    tokens), from the dense list or the older sparse ``{"j": count}``; [] when absent."""
    hist: list[int] = []
    if isinstance(raw, dict):
        pairs = {int(k): int(v) for k, v in raw.items()}  # TypeError/ValueError: malformed
        if pairs:
            hist = [0] * (max(pairs) + 1)
            for j, v in pairs.items():
                if j < 0 or v < 0:
                    raise ValueError(f"negative histogram entry {j}: {v}")
                hist[j] = v
    elif isinstance(raw, list):
        hist = [int(v) for v in raw]  # int(None) -> TypeError: malformed
        if any(v < 0 for v in hist):
            raise ValueError("negative histogram count")
    elif raw is not None:
        raise TypeError(f"acceptance_histogram is a {type(raw).__name__}")
    return hist
