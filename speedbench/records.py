"""The data that flows between modules: prompts in, request records out.

These types are the contract between the workload loaders, the client, the runner,
the metrics and the results folder. They hold raw observations only: timestamps
in ``time.perf_counter_ns()`` nanoseconds and integer counts. Derived numbers
(TPS, TTFT, AL, ...) are computed later by :mod:`speedbench.metrics`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from collections.abc import Iterable
from typing import Any, NamedTuple


def rate_label(rate: float, workload: str = "") -> str:
    """A rate point's variant label: ``2rps``, or ``code@0.5rps`` on workload variant ``code``.
    Written into records and summaries as the point's variant; never parsed back."""
    tag = f"{float(rate):g}rps"
    return f"{workload}@{tag}" if workload else tag


class _PointId(NamedTuple):
    arm: str
    concurrency: int
    variant: str = ""


class PointKey(_PointId):
    """One measured point: an arm at one concurrency level on one workload variant
    ("" when the workload has no variants). A tuple, so ``(arm, c, v)`` compares equal.

    The tuple ``(arm, concurrency, variant)`` is the point's identity, as the run folder
    stores it: in rate mode ``variant`` is the label :func:`rate_label` writes and
    ``concurrency`` the most requests in flight. The point's load is in typed fields
    beside it, set where the point is made (the plan), never parsed from the label:
    ``workload`` (the workload variant whose prompts it sends) and ``rate`` (requests per
    second, None in a closed loop). A key read back from a run folder gets both again from
    the fields its round stored beside it (results/rounds.py); a folder written before
    ``workload`` was stored falls back here, to the variant."""

    # Not tuple items, so they take no part in equality, hashing or the stored identity.
    rate: float | None = None
    _workload: str | None = None

    def __new__(cls, arm: str, concurrency: int, variant: str = "", *,
                workload: str | None = None, rate: float | None = None) -> "PointKey":
        self = super().__new__(cls, arm, concurrency, variant)
        if rate is not None:
            self.rate = float(rate)
        if workload is not None:
            self._workload = workload
        return self

    @classmethod
    def at_rate(cls, arm: str, max_concurrency: int, workload: str, rate: float) -> "PointKey":
        """A rate-mode point: its variant is the label of (workload, rate)."""
        return cls(arm, max_concurrency, rate_label(rate, workload), workload=workload, rate=rate)

    @property
    def workload(self) -> str:
        return self.variant if self._workload is None else self._workload

    @property
    def stored_workload(self) -> str | None:
        """The workload as the plan or the run folder gave it; None where only the label is
        known (a rate point of a folder from before it was stored: its label is not one)."""
        return self._workload

    def _replace(self, **changes: Any) -> "PointKey":
        """The same point with some identity fields changed (``key._replace(arm=baseline)``);
        its load (workload, rate) goes with it."""
        d = {**self._asdict(), **changes}
        return PointKey(d["arm"], d["concurrency"], d["variant"], workload=self._workload, rate=self.rate)

    @property
    def label(self) -> str:
        return f"{self.arm} c={self.concurrency}" + (f" [{self.variant}]" if self.variant else "")


@dataclass(frozen=True)
class Prompt:
    """One workload row. ``turns`` holds the user turns; more than one means multi-turn."""

    id: str
    turns: tuple[str, ...]
    category: str = ""
    sub_category: str = ""
    source: str = ""
    # Extra labels (entropy tier, context bucket, ...) that reports may group by.
    tags: tuple[tuple[str, str], ...] = ()

    @property
    def multiturn(self) -> bool:
        return len(self.turns) > 1


@dataclass
class SpecStats:
    """Per-request speculative-decoding counters, normalised from either server shape."""

    num_spec_steps: int = 0  # drafting steps (vLLM "num_drafts")
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    # histogram[j] = steps that accepted exactly j drafts; may be empty if unknown.
    acceptance_histogram: list[int] = field(default_factory=list)
    mean_acceptance_length: float | None = None  # as reported by the server, for cross-checks

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "SpecStats | None":
        if d is None:
            return None
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class EngineTiming:
    """Per-request timing from the engine core's own clock (vLLM 0.32's
    ``--enable-per-request-metrics``, in the final usage chunk), in milliseconds. The
    second source of per-user TPS: ``generation_ms`` spans first to last output token as
    the engine produced them, whatever the API server and the network did afterwards."""

    generation_ms: float | None = None  # first -> last output token (decode only)
    ttft_ms: float | None = None  # scheduled -> first token
    queue_ms: float | None = None  # queued -> scheduled
    mean_itl_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "EngineTiming | None":
        if d is None:
            return None
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class RequestRecord:
    """One request (one turn of one prompt) as observed by the client.

    All ``t_*`` fields are ``perf_counter_ns`` values from the same process, so only
    their differences mean anything. ``chunk_ns[i]`` is the arrival time of the i-th
    SSE chunk that carried output tokens and ``chunk_tokens[i]`` how many it carried.
    """

    arm: str
    concurrency: int
    prompt_index: int  # position in the workload order; the pairing key across arms
    prompt_id: str
    variant: str = ""  # workload variant name ("" when the scenario has none)
    repeat: int = 0
    turn: int = 0
    category: str = ""
    warmup: bool = False
    t_queued_ns: int = 0  # when the runner took the prompt off its queue
    t_sent_ns: int = 0  # when the HTTP request was dispatched (the request's clock starts here)
    t_end_ns: int = 0  # when the stream ended (or the error was observed)
    chunk_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    prompt_tokens: int | None = None  # from the usage chunk
    output_tokens: int | None = None  # from the usage chunk; falls back to sum(chunk_tokens)
    spec: SpecStats | None = None
    engine: EngineTiming | None = None  # the engine's own timing, when the server sends it
    # The server's per-request spec metrics were present but unusable (e.g. a null
    # inside acceptance_histogram): the request stays ok, without spec stats.
    spec_error: str | None = None
    # The worst lateness of the client's own event loop while the request was in flight
    # (the loop-lag probe, speedbench/loadgen/lag.py): any stamp of it may be this late.
    # None where nothing measured it (warmup; records written before it existed).
    loop_lag_ns: int | None = None
    error: str | None = None  # None on success; else a short kind, see ERROR_KINDS
    error_detail: str | None = None
    raw_fragment: str | None = None  # offending bytes for malformed/truncated streams
    output_text: str = ""  # kept for multi-turn replay and debugging
    tags: dict[str, str] = field(default_factory=dict)
    # The token ids the stream carried (the engine's token-ids field), and the prompt's as the
    # server tokenised it. Not record-line fields: the output ids go to the round's outputs
    # file (results/outputs.py), the prompt ids only to the check pass (run/output_check.py).
    output_ids: list[int] = field(default_factory=list)
    prompt_ids: list[int] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def n_output(self) -> int:
        if self.output_tokens is not None:
            return self.output_tokens
        return sum(self.chunk_tokens)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["output_ids"], d["prompt_ids"]  # side files, never record lines (see above)
        d["spec"] = self.spec.to_dict() if self.spec else None
        d["engine"] = self.engine.to_dict() if self.engine else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RequestRecord":
        d = dict(d)
        d["spec"] = SpecStats.from_dict(d.get("spec"))
        d["engine"] = EngineTiming.from_dict(d.get("engine"))
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def wall_s(records: Iterable[RequestRecord]) -> float:
    """Measured wall time: first send -> last end within each repeat (each round is its
    own server start), summed over repeats in order; 0 without a send or an end."""
    by_repeat: dict[int, list[RequestRecord]] = {}
    for r in records:
        by_repeat.setdefault(r.repeat, []).append(r)
    total = 0.0
    for rep in sorted(by_repeat):
        sent = [r.t_sent_ns for r in by_repeat[rep] if r.t_sent_ns]
        ends = [r.t_end_ns for r in by_repeat[rep] if r.t_end_ns]
        if sent and ends:
            total += (max(ends) - min(sent)) / 1e9
    return total


# Error kinds the client may record. Kept short and stable: reports group by them.
ERROR_KINDS = (
    "http_status",  # non-200 answer; error_detail holds the status and body head
    "timeout",  # the whole request exceeded its deadline
    "idle_timeout",  # no bytes for longer than the idle timeout (a stalled stream)
    "malformed_sse",  # an event that is not valid JSON / not an SSE data line
    "truncated",  # the stream closed before [DONE]
    "connection",  # connect / reset errors
    "server_died",  # the server process exited while the request was in flight
    "cancelled",  # the run was interrupted
)
