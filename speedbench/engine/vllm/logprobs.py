"""The output check's request on vLLM: the target's top next tokens after a prefix, by id.

/v1/completions takes a prompt as token ids, so the check sends the prompt exactly as the
server tokenised it (the ``prompt_token_ids`` of the timed request) plus the outputs both
arms agreed on, and generates one token. ``logprobs: K`` lists the K most likely tokens of
that step; ``return_tokens_as_token_ids`` names them ``token_id:<id>`` instead of their
text, so two tokens that detokenise alike stay apart. vLLM caps K at its ``max_logprobs``
(20 by default). The first token of a request comes from the target's prefill alone, with
no draft involved, so a speculative server answers as the target does."""

from __future__ import annotations

from typing import Any

PREFIX = "token_id:"


def margin_request(model: str, prompt_ids: list[int], prefix: list[int], top: int) -> tuple[str, dict]:
    body = {"model": model, "prompt": [*prompt_ids, *prefix], "max_tokens": 1, "temperature": 0.0,
            "logprobs": top, "return_tokens_as_token_ids": True, "stream": False}
    return "/v1/completions", body


def read_top(body: Any) -> dict[int, float] | None:
    """{token id: logprob} of the one generated step; None when the answer has no such list."""
    try:
        tops = body["choices"][0]["logprobs"]["top_logprobs"][0]
        out = {}
        for name, lp in tops.items():
            if not name.startswith(PREFIX) or lp is None:
                continue
            out[int(name[len(PREFIX):])] = float(lp)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None
    return out or None
