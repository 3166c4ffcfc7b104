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


@pytest.mark.parametrize("joined", [False, True])
def test_fake_writes_like_vllm(joined):
    # a 300 ms first token: headers and token arrive in reads of their own unless the
    # probe stalls that long (the fake runs in this process, a busy host can stall it 30 ms)
    with fake_server(ttft_s=0.3, t_step_s=0.005, output_tokens=8, role_with_first=joined) as srv:
        exchanges = asyncio.run(probe(srv.base_url, _requests()))
    assert len(exchanges) == 4  # all over one kept-alive connection
    for ex in exchanges:
        assert ex.chunked and ex.headers_alone
        assert ex.header_read < ex.first_token_read  # headers long before the first token
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
