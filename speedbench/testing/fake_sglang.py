"""The fake server's SGLang shape (``--shape sglang``): a wire that shares none of vLLM's
names, so that a stand-in engine written against it (tests/helpers/sglang_engine.py) runs a
whole ``speedbench run`` only where generic code takes every name from its engine.

Shaped like SGLang's public API rather than copied from it:

- per-chunk token ids are asked with ``return_output_ids`` and come as each choice's
  ``output_ids``; vLLM's request extensions (``return_token_ids``, ``ignore_eos``,
  ``add_special_tokens``, ``stream_options.continuous_usage_stats``) are refused with 400,
  as a server that forbids extra inputs refuses them;
- no ``usage`` object: the stream's last event, and a plain answer, carry ``meta_info``
  (SGLang's per-request record): the token counts and the request's speculative figures
  (``spec_verify_ct``, ``spec_draft_token_num``, ``spec_accept_token_num``, ...);
- /metrics: ``sglang:`` names, the gauges ``num_running_reqs`` and ``spec_accept_length``
  and the counters ``spec_verify_ct``, ``spec_draft_token_num``, ``spec_accept_token_num``
  and ``spec_accept_token_num_per_pos`` (one series per ``dp_rank``), which count the same
  steps as the per-request figures.
"""

from __future__ import annotations

from time import perf_counter_ns
from typing import Any

from speedbench.testing.fake_state import ServerState
from speedbench.testing.script import FakeConfig

SHAPE = "sglang"
# vLLM's request fields, which this shape does not know
REFUSED = ("return_token_ids", "ignore_eos", "add_special_tokens")


def ids_fields(shape: str) -> tuple[str, str]:
    """(the request field asking for per-chunk token ids, the choice's field holding them)."""
    return ("return_output_ids", "output_ids") if shape == SHAPE else ("return_token_ids", "token_ids")


def refused_field(body: dict) -> str | None:
    """The first of vLLM's request fields a body carries; None when it carries none."""
    for name in REFUSED:
        if name in body:
            return name
    options = body.get("stream_options")
    if isinstance(options, dict) and "continuous_usage_stats" in options:
        return "stream_options.continuous_usage_stats"
    return None


def refusal(cfg: FakeConfig, body: dict) -> tuple[str, dict[str, Any]] | None:
    """(the fault the log notes, the 400 answer) for a request refused before any token, in
    either shape: token ids asked of a server scripted to refuse them, or, in this shape, a
    field of vLLM's; None to serve it."""
    ids_request = ids_fields(cfg.shape)[0]
    if not cfg.accept_token_ids and body.get(ids_request):
        return "reject_token_ids", {"error": {"message": f"{ids_request}: extra inputs are not permitted", "code": 400}}
    refused = refused_field(body) if cfg.shape == SHAPE else None
    if refused:
        return "refused_field", {"object": "error", "message": f"{refused}: extra inputs are not permitted",
                                 "type": "BadRequestError", "code": 400}
    return None


def meta_info(rid: str, prompt_tokens: int, tokens: int, spec: dict[str, Any] | None,
              t_arrival_ns: int) -> dict[str, Any]:
    """One request's ``meta_info``: its counts, its latency so far and, with speculation,
    its verify steps, draft and accepted tokens (``spec``: script.Plan.spec_payload's figures)."""
    info: dict[str, Any] = {"id": rid, "finish_reason": {"type": "length", "length": tokens},
                            "prompt_tokens": prompt_tokens, "completion_tokens": tokens, "cached_tokens": 0,
                            "e2e_latency": (perf_counter_ns() - t_arrival_ns) / 1e9}
    if spec:
        info.update(spec_verify_ct=spec["num_spec_steps"], spec_draft_token_num=spec["num_draft_tokens"],
                    spec_accept_token_num=spec["num_accepted_draft_tokens"],
                    spec_accept_length=spec["mean_acceptance_length"],
                    spec_accept_histogram=spec["acceptance_histogram"])
    return info


def _counter(name: str, help_: str, samples: list[tuple[str, float]], created: float) -> list[str]:
    lines = [f"# HELP {name} {help_}", f"# TYPE {name} counter"]
    for labels, value in samples:
        lines += [f"{name}_total{{{labels}}} {float(value)}", f"{name}_created{{{labels}}} {created}"]
    return lines


def metrics_text(state: ServerState) -> str:
    """The Prometheus text of this shape, from the same counters as vLLM's (fake_state.py)."""
    cfg = state.config
    ranks = range(max(1, cfg.engines))
    labels = {e: f'dp_rank="{e}",model_name="{cfg.model}"' for e in ranks}
    lines = ["# HELP sglang:num_running_reqs The number of running requests.",
             "# TYPE sglang:num_running_reqs gauge",
             *(f"sglang:num_running_reqs{{{labels[e]}}} {float(state.active)}" for e in ranks)]
    if cfg.k <= 0:
        return "\n".join(lines) + "\n"
    counts = {e: state.counters.get(e, [0, 0, 0, []]) for e in ranks}
    lines += ["# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.",
              "# TYPE sglang:spec_accept_length gauge",
              *(f"sglang:spec_accept_length{{{labels[e]}}} {1.0 + c[2] / c[0] if c[0] else 0.0}"
                for e, c in counts.items())]
    for name, idx, help_ in (("spec_verify_ct", 0, "Verify steps."), ("spec_draft_token_num", 1, "Draft tokens."),
                             ("spec_accept_token_num", 2, "Accepted draft tokens.")):
        lines += _counter(f"sglang:{name}", help_, [(labels[e], c[idx]) for e, c in counts.items()], state.created)
    per_pos = [(f'{labels[e]},position="{pos}"', c[3][pos] if pos < len(c[3]) else 0)
               for e, c in counts.items() for pos in range(cfg.k)]
    lines += _counter("sglang:spec_accept_token_num_per_pos", "Accepted draft tokens per position.", per_pos,
                      state.created)
    return "\n".join(lines) + "\n"
