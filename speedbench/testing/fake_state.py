"""The fake server's state: what it did for each request (the truth tests compare
against), its live counters, and the Prometheus text they make."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from speedbench.testing.script import FakeConfig


@dataclass
class Emission:
    """What the server really did for one request (``perf_counter_ns`` clock, which on
    Linux is CLOCK_MONOTONIC and so comparable across processes on one machine)."""

    seq: int
    path: str
    body: dict
    t_arrival_ns: int
    emit_ns: list[int] = field(default_factory=list)  # just before each token chunk's write
    produced_ns: list[int] = field(default_factory=list)  # when each step was ready (the engine's clock)
    tokens: list[int] = field(default_factory=list)
    spec: dict | None = None
    fault: str | None = None
    t_done_ns: int = 0
    peer_port: int = 0  # the client's port: equal ports = one keep-alive connection


class ServerState:
    """Everything the handlers share; owned by one FakeServer (no module globals)."""

    def __init__(self, config: FakeConfig, allow_exit: bool = False) -> None:
        self.config = config
        self.allow_exit = allow_exit  # only the script may honour die_after (never pytest)
        self.log: list[Emission] = []
        self.active = 0
        self.max_concurrent = 0
        self.seq = 0
        self.created = time.time()
        # per engine: drafts, draft tokens, accepted, accepted per position
        self.counters: dict[int, list] = {}

    def reset(self) -> None:
        self.log.clear()
        self.max_concurrent = self.active
        self.seq = 0
        self.counters.clear()

    def count_step(self, engine: int, k: int, accepted: int) -> None:
        c = self.counters.setdefault(engine, [0, 0, 0, [0] * k])
        if len(c[3]) < k:
            c[3].extend([0] * (k - len(c[3])))
        c[0] += 1
        c[1] += k
        c[2] += accepted
        for i in range(accepted):
            c[3][i] += 1

    def metrics_text(self) -> str:
        model = self.config.model
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
        ]
        for e in range(max(1, self.config.engines)):
            lines.append(f'vllm:num_requests_running{{engine="{e}",model_name="{model}"}} {float(self.active)}')
        names = [("num_drafts", 0), ("num_draft_tokens", 1), ("num_accepted_tokens", 2)]
        if self.config.k > 0:
            for name, idx in names:
                full = f"vllm:spec_decode_{name}"
                lines += [f"# HELP {full} Speculative decoding counter.", f"# TYPE {full} counter"]
                for e in range(max(1, self.config.engines)):
                    c = self.counters.get(e, [0, 0, 0, []])
                    lab = f'engine="{e}",model_name="{model}"'
                    lines.append(f"{full}_total{{{lab}}} {float(c[idx])}")
                    lines.append(f"{full}_created{{{lab}}} {self.created}")
            full = "vllm:spec_decode_num_accepted_tokens_per_pos"
            lines += [f"# HELP {full} Accepted tokens per draft position.", f"# TYPE {full} counter"]
            for e in range(max(1, self.config.engines)):
                per = self.counters.get(e, [0, 0, 0, []])[3]
                for pos in range(self.config.k):
                    v = per[pos] if pos < len(per) else 0
                    lab = f'engine="{e}",model_name="{model}",position="{pos}"'
                    lines.append(f"{full}_total{{{lab}}} {float(v)}")
                    lines.append(f"{full}_created{{{lab}}} {self.created}")
        return "\n".join(lines) + "\n"
