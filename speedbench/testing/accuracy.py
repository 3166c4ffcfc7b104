"""The timing-accuracy matrix: every request path against scripted emission times.

A test tool shared by tests/integration/test_timing_matrix.py (assertions) and
benchmarks/timing_accuracy.py (a printed table). The fake server (a child process, so
it shares no GIL with the client) writes like vLLM's HTTP stack: headers when the
request is accepted, no role chunk on /v1/completions, a chat role chunk alone or in
one TCP write with the first token, chunked encoding whose terminator comes in its own
write after [DONE], keep-alive. It logs when it wrote each token chunk; per-user TPS
and TTFT computed from those times are the truth.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from speedbench.client.http import ClientConfig
from speedbench.metrics.rows import PointInfo, summarize
from speedbench.records import PointKey, Prompt
from speedbench.loadgen import PointJob, Target, run_pass
from speedbench.client.scrape import delta
from speedbench.engine.vllm import VllmEngine
from speedbench.testing.hosting import FakeProcess
from speedbench.testing.script import FakeConfig, prompt_text, true_per_user_tps

# A TTFT of 50 ms makes a header-time stamp obvious: it stretches a ~0.8 s decode
# window by 6%; windows this long keep a few ms of scheduling noise under 0.1%.
# Per-prompt step times vary by up to 30% so CIs have real width.
BASE = FakeConfig(ttft_s=0.05, t_step_s=0.010, output_tokens=81)
SPEC = FakeConfig(ttft_s=0.05, t_step_s=0.013, output_tokens=81, k=3, acceptance=(3, 1, 2, 0))
LEVELS = (1, 4, 16)
VLLM = VllmEngine()  # the fake speaks vLLM's stream and counters; the matrix reads them as a run does
PATHS = {  # name -> (api, role chunk in the same write as the first token)
    "chat": ("chat", False),
    "chat-joined": ("chat", True),
    "completions": ("completions", False),
}
CONNS = ("fresh", "reused")


def _scale(i: int) -> float:
    return 1.0 + 0.3 * ((i * 7) % 5) / 4


class _Builder:
    """A one-turn request on either path, plus per-prompt fake-server settings (step
    time, write timing) in the body's ``fake`` field."""

    def __init__(self, api: str, base: FakeConfig, role_with_first: bool, conn: str) -> None:
        self.api, self.base, self.role_with_first, self.conn = api, base, role_with_first, conn

    def build(self, prompt: Prompt, turn: int, history: list[tuple[str, str]]) -> tuple[str, dict]:
        body: dict[str, Any] = {"model": "fake-model", "max_tokens": 4096, "temperature": 0.0}
        if self.api == "chat":
            path = "/v1/chat/completions"
            body["messages"] = [{"role": "user", "content": prompt.turns[turn]}]
        else:
            path = "/v1/completions"
            body["prompt"] = prompt.turns[turn]
        i = int(prompt.id.rsplit("-", 1)[-1].lstrip("p") or 0)
        body["fake"] = {
            "t_step_s": self.base.t_step_s * _scale(i),
            "role_with_first": self.role_with_first,
            "keep_alive": self.conn == "reused",
            # a terminator in its own read: the case that leaked a stale stamp
            "eof_gap_s": 0.002,
        }
        return path, body


@dataclass
class Point:
    key: tuple[str, str, int]  # (path, connection mode, concurrency)
    rows: dict  # arm -> summary row
    records: dict  # arm -> records
    truth_tps: dict  # (arm, prompt_index) -> per-user TPS from emission times
    truth_ttft_ms: dict  # (arm, prompt_index) -> first emission - client send
    ports: dict  # arm -> (client ports of warmup requests, of measured requests)


@contextmanager
def servers() -> Iterator[dict[str, FakeProcess]]:
    """One fake server process per arm, warmed up (a benchmark warms its server up; the
    fake's first-request costs would otherwise land on the first point)."""
    with FakeProcess(BASE) as base, FakeProcess(SPEC) as sd:
        srvs = {"base": base, "sd": sd}
        for srv in srvs.values():
            warm_builder = _Builder("chat", srv.config, False, "reused")
            asyncio.run(run_pass(Target(client=ClientConfig(base_url=srv.base_url, stream=VLLM), builder=warm_builder),
                                 PointJob(key=PointKey("warm", 4), prompts=_prompts(4, "warm-")), 0))
        yield srvs


def measure(srvs: dict[str, FakeProcess], key: tuple[str, str, int], attempt: int = 0) -> Point:
    """Both arms at one (path, connection mode, concurrency) point."""
    path_name, conn, c = key
    api, joined = PATHS[path_name]
    d: dict[str, dict] = {"records": {}, "prom": {}, "points": {}, "tps": {}, "ttft": {}, "ports": {}}
    for arm, srv in srvs.items():
        srv.reset()
        tag = f"{path_name}-{conn}-{c}-a{attempt}"
        ps = [Prompt(id=f"{tag}-p{i}", turns=(f"q {tag} {i}",), category="coding") for i in range(max(4, c))]
        warm = _prompts(c, f"w-{tag}-") if conn == "reused" else []
        builder = _Builder(api, srv.config, joined, conn)

        async def point(srv=srv, ps=ps, arm=arm, builder=builder, warm=warm):
            before = VLLM.spec_counters(await VLLM.scrape(srv.base_url))
            res = await run_pass(Target(client=ClientConfig(base_url=srv.base_url, stream=VLLM), builder=builder),
                                 PointJob(key=PointKey(arm, c), prompts=ps, warmup=warm), 0)
            after = VLLM.spec_counters(await VLLM.scrape(srv.base_url))
            return res, delta(before, after)

        res, prom = asyncio.run(point())
        emitted = srv.log()
        log = {prompt_text(e.body): e for e in emitted}
        measured = {p.turns[0] for p in ps}
        d["ports"][arm] = ([e.peer_port for e in emitted if prompt_text(e.body) not in measured],
                           [e.peer_port for e in emitted if prompt_text(e.body) in measured])
        d["records"][arm] = res.records
        d["prom"][(arm, c, "")] = prom
        d["points"][(arm, c, "")] = PointInfo.from_results([res])
        for r in res.records:
            em = log[ps[r.prompt_index].turns[0]]
            d["tps"][(arm, r.prompt_index)] = true_per_user_tps(em.emit_ns, em.tokens)
            d["ttft"][(arm, r.prompt_index)] = (em.emit_ns[0] - r.t_sent_ns) / 1e6
    rows = summarize(d["records"]["base"] + d["records"]["sd"], d["prom"], "base",
                     {"base": {}, "sd": {"speculative": True, "num_speculative_tokens": 3}}, d["points"])
    return Point(key=key, rows={r["arm"]: r for r in rows}, records=d["records"], truth_tps=d["tps"],
                 truth_ttft_ms=d["ttft"], ports=d["ports"])


KEYS = [(p, conn, c) for p in PATHS for conn in CONNS for c in LEVELS]


def run_matrix() -> dict[tuple[str, str, int], Point]:
    with servers() as srvs:
        return {key: measure(srvs, key) for key in KEYS}


def _prompts(n: int, prefix: str) -> list[Prompt]:
    return [Prompt(id=f"{prefix}p{i}", turns=(f"{prefix} question {i}",), category="coding") for i in range(n)]
