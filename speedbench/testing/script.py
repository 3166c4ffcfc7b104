"""Scripted ground truth for the fake server: what each request emits, when, and which fault.

Pure data and arithmetic, no I/O, so tests can compute the expected answers from
the same script the server plays. Times are seconds from the request's arrival.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any

# "die": the server process exits mid-stream (script mode; in-process it only drops
# the connection, since exiting would take the test runner down with it).
FAULT_KINDS = ("http_500", "stall", "malformed", "truncate", "disconnect", "error_event", "die")


@dataclass(frozen=True)
class Fault:
    """An injected failure. ``at`` counts token chunks sent before the fault fires."""

    kind: str
    at: int = 0
    stall_s: float = 0.0  # for "stall": silence before the stream resumes
    status: int = 500  # for "http_500"

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {FAULT_KINDS}")


@dataclass(frozen=True)
class FakeConfig:
    model: str = "fake-model"
    ttft_s: float = 0.0  # arrival -> first token
    t_step_s: float = 0.001  # one decode step (with speculation: one verify step)
    output_tokens: int = 16  # capped by the request's max_tokens
    k: int = 0  # num_speculative_tokens; 0 = no speculation (no spec metrics at all)
    # Accepted drafts per decode step, cycled; empty = all k accepted every step.
    acceptance: tuple[int, ...] = ()
    spec_shape: str = "current"  # "current" (vLLM 0.32), "legacy" (per-choice, sparse) or "none"
    engines: int = 1  # Prometheus series per engine (data parallel); requests round-robin
    accept_token_ids: bool = True  # False: answer 400 to bodies with return_token_ids
    faults: dict[int, Fault] = field(default_factory=dict)  # by arrival sequence number
    die_after: int | None = None  # script mode only: the process exits after N requests began
    # HTTP write timing, as vLLM's stack (uvicorn + starlette) does it: headers when the
    # request is accepted, a chat role chunk when the first token is ready (in the same
    # TCP write as that token, or in its own write just before it), chunked encoding
    # whose terminator follows [DONE] in a write of its own, keep-alive.
    role_with_first: bool = False
    eof_gap_s: float = 0.0  # extra delay before the chunked terminator (0 = back to back)
    keep_alive: bool = True  # False: "Connection: close" on every response
    # vLLM counts every accepted draft of a step, also those EOS or max_tokens cut off;
    # True reproduces that in the per-request metrics and the counters.
    count_truncated: bool = False
    # vLLM's --enable-per-request-metrics: per-request engine timing in the final usage
    # chunk (metrics.generation_time_ms, ...), from when each step was produced.
    per_request_metrics: bool = True
    # An API server that falls behind the engine: steps are produced on schedule but
    # buffered, and the whole output goes out in one write after the last step.
    buffer_output: bool = False
    # vLLM's --api-key: every /v1 path wants "Authorization: Bearer KEY" and answers 401
    # {"error": "Unauthorized"} without it; /health, /metrics and /version stay open.
    api_key: str | None = None
    # Per-request speed noise: each request's decode steps take ``t_step_s / g`` with g
    # lognormal of mean 1 and this sigma, so its per-user TPS is the exact TPS times g and
    # the mean TPS stays exact. g is drawn from (noise_seed, the prompt's text): the same
    # prompt gets the same g on one server, and two servers with different seeds differ
    # independently, as two arms do (sequential-stopping coverage tests).
    tps_noise: float = 0.0
    noise_seed: int = 0
    # A known step-cost model (docs/metrics.md, "Calibration"): one decode step of a batch of
    # B running requests takes t_step_s + token_cost_s * B * (k + 1) + draft_cost_s * k:
    # a fixed cost, the verify pass over every request's k + 1 positions, and drafting.
    # Both 0 (the default) keeps t_step_s per step whatever runs beside it.
    token_cost_s: float = 0.0
    draft_cost_s: float = 0.0
    # vLLM 0.32's synthetic acceptance (rejection_sample_method: synthetic): accept drafts
    # so that the mean tokens per step is this AL, spread evenly over the steps.
    synthetic_al: float | None = None
    # The output check's departures (testing/fake_tokens.py): from this output position on,
    # the prompts they touch get wrong ids (a lossy speculative path: acceptance and AL stay
    # as scripted) or a near-tie's alternative, which this server's check answer lists just
    # below the top token. diverge_share: the share of prompts touched, by prompt hash.
    wrong_after: int | None = None
    tie_after: int | None = None
    diverge_share: float = 1.0
    # The wire the fake speaks: "vllm" (vLLM 0.32's names, above) or "sglang", a shape that
    # shares none of them (testing/fake_sglang.py), for a stand-in engine that is not vLLM.
    shape: str = "vllm"

    @property
    def cost_model(self) -> bool:
        return self.token_cost_s > 0 or self.draft_cost_s > 0

    def step_s(self, batch: int) -> float:
        """One decode step's duration with ``batch`` requests running."""
        k = max(0, self.k)
        return self.t_step_s + self.token_cost_s * max(1, batch) * (k + 1) + self.draft_cost_s * k

    def with_overrides(self, over: dict[str, Any]) -> FakeConfig:
        known = {f.name for f in fields(self)} - {"faults", "die_after", "engines"}
        clean = {k: v for k, v in over.items() if k in known}
        if "acceptance" in clean:
            clean["acceptance"] = tuple(int(a) for a in clean["acceptance"])
        return replace(self, **clean)


def with_noise(cfg: FakeConfig, text: str) -> FakeConfig:
    """``cfg`` with this request's step time under the per-request speed noise."""
    if cfg.tps_noise <= 0:
        return cfg
    sigma = cfg.tps_noise
    g = random.Random(f"{cfg.noise_seed}:{text}").lognormvariate(-sigma * sigma / 2, sigma)
    return replace(cfg, t_step_s=cfg.t_step_s / g)


@dataclass(frozen=True)
class Step:
    t_s: float  # emission time from arrival, before any stall
    tokens: int
    accepted: int  # drafts accepted in this step (0 for the prefill token / no spec)
    counted: int = -1  # accepted drafts the server reports (-1: the same as accepted)

    @property
    def reported(self) -> int:
        return self.accepted if self.counted < 0 else self.counted


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]  # steps[0] is the prefill token; the rest are decode steps
    k: int

    @property
    def n_tokens(self) -> int:
        return sum(s.tokens for s in self.steps)

    def spec_payload(self) -> dict[str, Any] | None:
        """The per-request metrics vLLM 0.32 reports (``metrics.speculative_decoding``)."""
        if self.k <= 0:
            return None
        decode = self.steps[1:]
        hist = [0] * (self.k + 1)
        for s in decode:
            hist[s.reported] += 1
        n_steps = len(decode)
        accepted = sum(s.reported for s in decode)
        drafts = n_steps * self.k
        return {
            "mean_acceptance_length": 1.0 + accepted / n_steps if n_steps else 1.0,
            "draft_acceptance_rate": accepted / drafts if drafts else 0.0,
            "acceptance_histogram": hist,
            "num_spec_steps": n_steps,
            "num_accepted_draft_tokens": accepted,
            "num_draft_tokens": drafts,
            "num_spec_tokens": self.k,
        }

    def legacy_payload(self) -> dict[str, Any] | None:
        """An older per-choice shape with a sparse histogram, for parser tests."""
        cur = self.spec_payload()
        if cur is None:
            return None
        sparse = {str(j): c for j, c in enumerate(cur["acceptance_histogram"]) if c}
        return {
            "num_drafts": cur["num_spec_steps"],
            "num_draft_tokens": cur["num_draft_tokens"],
            "num_accepted_tokens": cur["num_accepted_draft_tokens"],
            "acceptance_histogram": sparse,
        }


def plan(cfg: FakeConfig, max_tokens: int | None = None) -> Plan:
    """The schedule one request follows: a prefill token at ``ttft_s``, then one chunk
    per decode step of ``accepted + 1`` tokens every ``t_step_s``. The last step is cut
    to the output cap, and its accepted count is cut with it (so AL stays exact), unless
    ``count_truncated``: then it reports the drafts it accepted before the cut, as vLLM does."""
    n = cfg.output_tokens if max_tokens is None else max(1, min(cfg.output_tokens, max_tokens))
    pattern = cfg.acceptance or ((cfg.k,) if cfg.k > 0 else (0,))
    if cfg.k <= 0:
        pattern = (0,)
    steps = [Step(cfg.ttft_s, 1, 0)]
    left = n - 1
    i = 0
    while left > 0:
        want = min(max(0, pattern[i % len(pattern)]), cfg.k)
        if cfg.synthetic_al is not None and cfg.k > 0:
            want = synthetic_accepted(cfg.synthetic_al, cfg.k, i)
        acc = min(want, left - 1)
        counted = want if cfg.count_truncated and want != acc else -1
        steps.append(Step(cfg.ttft_s + (i + 1) * cfg.t_step_s, acc + 1, acc, counted))
        left -= acc + 1
        i += 1
    return Plan(tuple(steps), max(0, cfg.k))


def synthetic_accepted(al: float, k: int, i: int) -> int:
    """Drafts accepted at decode step ``i`` so that steps 0..i together accept as close to
    ``(i + 1) * (al - 1)`` as whole drafts allow: the running mean hits AL exactly."""
    a = min(max(al - 1.0, 0.0), float(k))
    return int(math.floor((i + 1) * a + 1e-9) - math.floor(i * a + 1e-9))


def synthetic_al_of(spec: dict[str, Any]) -> float | None:
    """The AL a vLLM ``speculative_config`` asks synthetic acceptance for: the length
    itself, or from per-position rates (position i accepted given 0..i-1 were), the
    expected ``1 + sum of the running products``; None when not synthetic."""
    if spec.get("rejection_sample_method") != "synthetic":
        return None
    if spec.get("synthetic_acceptance_length") is not None:
        return float(spec["synthetic_acceptance_length"])
    al, joint = 1.0, 1.0
    for r in spec.get("synthetic_acceptance_rates") or []:
        joint *= float(r)
        al += joint
    return al


_MARKER = re.compile(r"\[\[fake:([^\]]*)\]\]")


def marker_overrides(text: str) -> dict[str, Any]:
    """``[[fake:fault=stall,at=3,stall_s=2,output_tokens=8]]`` inside a prompt text, so
    fault tests can drive the fake through the real request builder."""
    m = _MARKER.search(text or "")
    if not m:
        return {}
    out: dict[str, Any] = {}
    for part in m.group(1).split(","):
        if "=" not in part:
            continue
        k, v = (s.strip() for s in part.split("=", 1))
        if k == "acceptance":
            out[k] = [int(x) for x in v.split("/") if x]
        else:
            out[k] = _num(v)
    return out


def _num(v: str) -> Any:
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def fault_from(over: dict[str, Any]) -> Fault | None:
    """A fault described by per-request overrides: ``{"fault": "stall", "at": 2, ...}``
    or ``{"fault": {"kind": "stall", ...}}``."""
    f = over.get("fault")
    if f is None:
        return None
    if isinstance(f, dict):
        return Fault(**f)
    return Fault(kind=str(f), at=int(over.get("at", 0)), stall_s=float(over.get("stall_s", 0.0)),
                 status=int(over.get("status", 500)))


def true_per_user_tps(emit_ns: list[int], tokens: list[int]) -> float:
    """SPEED-Bench per-user TPS from the server's own emission times (the truth)."""
    n = sum(tokens)
    if n < 2 or len(emit_ns) < 2 or emit_ns[-1] == emit_ns[0]:
        return float("nan")
    return (n - 1) / ((emit_ns[-1] - emit_ns[0]) / 1e9)


def prompt_text(body: dict) -> str:
    """The prompt a logged request body carried: its last chat message, or its prompt."""
    return body["messages"][-1]["content"] if "messages" in body else body["prompt"]
