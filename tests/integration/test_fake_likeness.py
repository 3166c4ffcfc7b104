"""The fake server's HTTP writes, read off the wire by the same probe that reads real
vLLM's (tests/e2e/test_engine_vllm.py::test_http_write_timing_of_vllm): headers
before the first token in reads of their own, no role chunk on completions, a chat role
chunk first, chunked encoding whose terminator follows [DONE], keep-alive."""

from __future__ import annotations

import asyncio

import pytest
from tests.helpers.fakes import fake_server

from speedbench.testing.probe import probe


def _requests(n: int = 2) -> list[tuple[str, dict]]:
    out = []
    for i in range(n):
        out.append(("/v1/completions", {"model": "fake-model", "prompt": f"p{i}", "max_tokens": 8}))
        out.append(("/v1/chat/completions", {"model": "fake-model", "max_tokens": 8,
                                             "messages": [{"role": "user", "content": f"c{i}"}]}))
    return out


TTFT_S = 0.3


def _prompt(ex) -> bool:
    """The read that completed the headers arrived before the first token was due.

    Only then does a joined read say something about the fake: a read that came later
    (the probe or the fake's thread stalled past the first token, as on a loaded CI
    host) holds whatever both writes left in the socket, however the fake wrote them."""
    return ex.reads[ex.header_read].t_ns - ex.t_sent_ns < TTFT_S * 1e9


def _judged(joined: bool, attempts: int = 5) -> list:
    """Exchanges whose header read was prompt, over as many probes as it takes to see
    each path at least once; a fake that held its headers back to the first token
    never gives a prompt header read, and runs out of attempts."""
    judged: list = []
    for _ in range(attempts):
        with fake_server(ttft_s=TTFT_S, t_step_s=0.005, output_tokens=8, role_with_first=joined) as srv:
            exchanges = asyncio.run(probe(srv.base_url, _requests()))
        assert len(exchanges) == 4  # all over one kept-alive connection
        for ex in exchanges:
            _check_body(ex, joined)
        judged += [ex for ex in exchanges if _prompt(ex)]
        if {ex.path for ex in judged} == {p for p, _ in _requests(1)}:
            return judged
    raise AssertionError(f"no prompt header read for every path in {attempts} probes: "
                         f"{[(ex.path, ex.headers_alone) for ex in judged]}")


def _check_body(ex, joined: bool) -> None:
    """What holds however late the probe read: chunked, the first token no sooner than
    its delay, [DONE] then the terminator, and the role chunk's place."""
    assert ex.chunked
    ttft_ms = (ex.reads[ex.first_token_read].t_ns - ex.t_sent_ns) / 1e6
    assert ttft_ms >= 250
    assert ex.done_read >= 0 and ex.terminator_read >= ex.done_read
    first = ex.first_event
    if ex.path.endswith("/chat/completions"):
        assert first["choices"][0]["delta"].get("role") == "assistant"  # role chunk first
        role_read = ex.events[0][0]
        assert (role_read == ex.first_token_read) if joined else (role_read <= ex.first_token_read)
    else:
        assert first["choices"][0].get("text")  # completions: the first event is a token


@pytest.mark.parametrize("joined", [False, True])
def test_fake_writes_like_vllm(joined):
    for ex in _judged(joined):
        assert ex.headers_alone, ex.path  # headers in reads of their own
        assert ex.header_read < ex.first_token_read  # headers long before the first token
