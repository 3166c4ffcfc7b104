"""The streaming client against the scripted fake server: happy paths and every fault kind."""

from __future__ import annotations

import asyncio
import itertools
import socket
import time

import pytest
from tests.helpers.fakes import VLLM, fake_server

from speedbench.client.sse import consume as _consume
from speedbench.client.http import (
    ClientConfig,
    make_session,
    stream_request,
)
from speedbench.engine.vllm.payload import parse_spec
from speedbench.records import RequestRecord
from speedbench.testing import FakeConfig

CHAT = "/v1/chat/completions"


def _rec() -> RequestRecord:
    return RequestRecord(arm="a", concurrency=1, prompt_index=0, prompt_id="p0")


def _body(fake: dict | None = None, **kw) -> dict:
    b = {"model": "fake-model", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 64, **kw}
    if fake:
        b["fake"] = fake
    return b


def _send(url: str, body: dict, path: str = CHAT, **cfg_kw) -> RequestRecord:
    cfg = ClientConfig(url, **{"stream": VLLM, **cfg_kw})

    async def go() -> RequestRecord:
        async with make_session(cfg, 1) as s:
            return await stream_request(s, cfg, path, body, _rec())

    return asyncio.run(go())


@pytest.fixture(scope="module")
def srv():
    with fake_server(t_step_s=0.002, output_tokens=10, k=3, acceptance=(3, 1, 0)) as s:
        yield s


@pytest.fixture(autouse=True)
def _default_config(srv):
    srv.config = FakeConfig(t_step_s=0.002, output_tokens=10, k=3, acceptance=(3, 1, 0))


def test_chat_stream_with_token_ids_and_spec_metrics(srv):
    rec = _send(srv.base_url, _body())
    assert rec.ok, rec.error_detail
    em = srv.log[-1]
    assert em.body["stream"] is True and em.body["return_token_ids"] is True
    assert em.body["stream_options"] == {"include_usage": True, "continuous_usage_stats": False}
    # the role chunk carries no token, so chunks line up with the server's token chunks
    assert rec.chunk_tokens == em.tokens == [1, 4, 2, 1, 2]
    assert rec.output_tokens == 10 and rec.prompt_tokens > 0
    assert rec.t_sent_ns < rec.chunk_ns[0] <= rec.chunk_ns[-1] <= rec.t_end_ns
    assert rec.chunk_ns == sorted(rec.chunk_ns)
    assert rec.spec.num_spec_steps == 4 and rec.spec.num_accepted_tokens == 5
    assert rec.spec.num_draft_tokens == 12 and rec.spec.acceptance_histogram == [1, 2, 0, 1]
    assert rec.spec.mean_acceptance_length == pytest.approx(2.25)
    assert rec.output_text == "".join(f" w{i}" for i in range(100, 110))


def test_arrival_stamps_come_from_the_connection_protocol(srv):
    # make_session swaps in a protocol that stamps data_received; if an aiohttp upgrade
    # removes the hook, stamps silently fall back to coroutine time: catch it here.
    from speedbench.client.stamps import StampingHandler as _StampingHandler

    cfg = ClientConfig(srv.base_url, stream=VLLM)

    async def go():
        # The first token is 10 s away, so the connection is still held when it is read. A
        # 10-token answer could end first on a busy host, its connection back in the pool
        # (r.connection None): it did, at load 5.
        body = _body({"ttft_s": 10.0}, stream=True)
        async with make_session(cfg, 1) as s, s.post(srv.base_url + CHAT, json=body) as r:
            protocol = r.connection.protocol
            r.close()  # not waiting out the answer
            return protocol

    assert isinstance(asyncio.run(go()), _StampingHandler)


def test_completions_stream(srv):
    body = {"model": "fake-model", "prompt": "hello", "max_tokens": 6}
    rec = _send(srv.base_url, body, path="/v1/completions")
    assert rec.ok and sum(rec.chunk_tokens) == 6 == rec.output_tokens
    assert rec.output_text.startswith(" w100")


def test_legacy_sparse_spec_shape(srv):
    rec = _send(srv.base_url, _body({"spec_shape": "legacy"}))
    assert rec.ok
    assert rec.spec.num_spec_steps == 4 and rec.spec.num_accepted_tokens == 5
    assert rec.spec.acceptance_histogram == [1, 2, 0, 1]


def test_without_token_ids_counts_one_per_text_delta(srv):
    rec = _send(srv.base_url, _body(), token_ids=False)
    assert rec.ok and "return_token_ids" not in srv.log[-1].body
    assert rec.chunk_tokens == [1] * 5  # the documented fallback undercounts packed chunks
    assert rec.n_output == 10  # ... but the usage chunk still gives the true count


def test_rejected_token_ids_retries_once_without(srv):
    srv.config = FakeConfig(output_tokens=5, accept_token_ids=False)
    rec = _send(srv.base_url, _body())
    assert rec.ok, rec.error_detail
    assert srv.log[-2].fault == "reject_token_ids" and "return_token_ids" not in srv.log[-1].body
    assert rec.chunk_tokens == [1] * 5


def test_http_500_keeps_status_and_body(srv):
    rec = _send(srv.base_url, _body({"fault": "http_500"}))
    assert rec.error == "http_status"
    assert rec.error_detail.startswith("HTTP 500") and "injected failure" in rec.error_detail
    assert rec.chunk_ns == [] and rec.t_end_ns >= rec.t_sent_ns


def test_stall_is_idle_timeout(srv):
    # a 1 s idle limit against a 5 s stall: the tokens before the stall arrive well inside
    # it however busy the host, and the cut comes long before the stall ends
    rec = _send(srv.base_url, _body({"fault": "stall", "at": 2, "stall_s": 5}), idle_timeout_s=1.0)
    assert rec.error == "idle_timeout"
    assert len(rec.chunk_ns) == 2
    assert 0.95 < (rec.t_end_ns - rec.chunk_ns[-1]) / 1e9 < 4.5


def test_whole_request_deadline_is_timeout(srv):
    # a 1 s deadline on a 4 s answer: "timeout" and fewer than 40 tokens show the cut (an
    # upper bound on the wall time would measure the host, not the client)
    rec = _send(srv.base_url, _body({"t_step_s": 0.1, "output_tokens": 40}), request_timeout_s=1.0)
    assert rec.error == "timeout"
    assert (rec.t_end_ns - rec.t_sent_ns) / 1e9 > 0.95
    assert len(rec.chunk_ns) < 40


def test_malformed_event_keeps_raw_fragment(srv):
    rec = _send(srv.base_url, _body({"fault": "malformed", "at": 1}))
    assert rec.error == "malformed_sse"
    assert rec.raw_fragment.startswith('data: {"choices"') and "oops" in rec.raw_fragment
    assert rec.chunk_tokens == [1]


def test_truncated_stream_without_done(srv):
    rec = _send(srv.base_url, _body({"fault": "truncate", "at": 2}))
    assert rec.error == "truncated"
    assert "w104" in rec.raw_fragment  # the last event seen before EOF
    assert len(rec.chunk_ns) == 2


def test_abrupt_disconnect_is_truncated(srv):
    rec = _send(srv.base_url, _body({"fault": "disconnect", "at": 2}))
    assert rec.error == "truncated"
    assert len(rec.chunk_ns) == 2


def test_in_stream_error_event(srv):
    rec = _send(srv.base_url, _body({"fault": "error_event", "at": 1}))
    assert rec.error == "http_status" and "in-stream error" in rec.error_detail
    assert "injected generation error" in rec.raw_fragment


def test_prompt_marker_drives_faults(srv):
    body = _body()
    body["messages"][0]["content"] = "hi [[fake:fault=http_500,status=503]]"
    rec = _send(srv.base_url, body)
    assert rec.error == "http_status" and rec.error_detail.startswith("HTTP 503")


def test_connection_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rec = _send(f"http://127.0.0.1:{port}", _body())
    assert rec.error == "connection" and rec.t_end_ns > 0


def test_cancellation_records_and_reraises(srv):
    cfg = ClientConfig(srv.base_url, stream=VLLM)
    rec = _rec()

    async def go() -> None:
        async with make_session(cfg, 1) as s:
            body = _body({"t_step_s": 0.05, "output_tokens": 50})
            task = asyncio.create_task(stream_request(s, cfg, CHAT, body, rec))
            deadline = time.monotonic() + 30
            while not rec.chunk_ns and time.monotonic() < deadline:  # cancel mid-stream
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(go())
    assert rec.error == "cancelled" and rec.t_end_ns > 0 and len(rec.chunk_ns) >= 1


class _Reads:
    """Stands in for aiohttp's StreamReader: yields the stream in arbitrary pieces."""

    def __init__(self, data: bytes, cuts: list[int]) -> None:
        bounds = [0, *sorted(cuts), len(data)]
        self.pieces = [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]

    async def iter_any(self):
        for p in self.pieces:
            yield p


def _consume_lines(lines: list[bytes], cuts: list[int] | None = None) -> RequestRecord:
    """Feed ``lines`` in one read, or cut at the given byte offsets (events split
    across reads must parse the same)."""
    rec = _rec()
    data = b"".join(lines)
    asyncio.run(_consume(_Reads(data, cuts or []), rec, stream=VLLM))
    return rec


SSE_LINES = [
    b": keep-alive\n", b"event: message\n", b"\r\n",
    b'data: {"choices":[{"index":0,"delta":{"content":"ab"}}]}\r\n', b"\r\n",
    b'data:{"choices":[{"index":0,"delta":{"content":""}}]}\n',  # empty delta: no token
    b'data: {"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}\n',
    (b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,'
     b'"speculative_decoding":{"num_spec_steps":1,"num_accepted_draft_tokens":0,"acceptance_histogram":[1,0]}}}\n'),
    b"data: [DONE]\n",
]


@pytest.mark.parametrize("cuts", [[], [1, 7, 30, 31, 90, 200], list(range(1, 400, 3))])
def test_sse_comments_fields_and_crlf_are_ignored(cuts):
    rec = _consume_lines(SSE_LINES, cuts)
    assert rec.ok and rec.chunk_tokens == [1, 1] and rec.output_text == "ab"
    assert (rec.prompt_tokens, rec.output_tokens) == (3, 2)
    assert rec.spec.num_spec_steps == 1 and rec.spec.acceptance_histogram == [1, 0]


def test_non_sse_line_is_malformed():
    rec = _consume_lines([b"garbage here\n", b"data: [DONE]\n"])
    assert rec.error == "malformed_sse" and rec.raw_fragment == "garbage here"


@pytest.mark.parametrize("event", [b'data: {"choices": []} trailing\n', b"data: 42\n", b"data: [1, 2]\n"])
def test_non_object_or_trailing_garbage_is_malformed(event):
    rec = _consume_lines([event, b"data: [DONE]\n"])
    assert rec.error == "malformed_sse" and rec.raw_fragment == event.decode().rstrip("\n")


def test_eof_inside_an_event_keeps_the_partial_line():
    rec = _consume_lines([b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n', b'data: {"choi'], [20])
    assert rec.error == "truncated" and rec.raw_fragment == 'data: {"choi' and rec.chunk_tokens == [1]


def test_raw_fragment_is_capped_at_2kb():
    rec = _consume_lines([b"data: {" + b"x" * 5000 + b"\n"], [100, 3000])
    assert rec.error == "malformed_sse" and len(rec.raw_fragment) == 2048


def test_parse_spec_shapes():
    cur = parse_spec({"mean_acceptance_length": 2.0, "draft_acceptance_rate": 0.5, "acceptance_histogram": [1, 0, 1],
                      "num_spec_steps": 2, "num_accepted_draft_tokens": 2, "num_draft_tokens": 4, "num_spec_tokens": 2})
    assert (cur.num_spec_steps, cur.num_accepted_tokens, cur.num_draft_tokens) == (2, 2, 4)
    sparse = parse_spec({"acceptance_histogram": {"0": 2, "3": 1}, "num_draft_tokens": 9})
    assert sparse.acceptance_histogram == [2, 0, 0, 1]
    assert (sparse.num_spec_steps, sparse.num_accepted_tokens) == (3, 3)
    assert parse_spec({"foo": 1}) is None and parse_spec(None) is None


def test_malformed_spec_metrics_keep_the_request_ok():
    # a null inside acceptance_histogram: tokens and timings are still good
    rec = _consume_lines([
        b'data: {"choices":[{"index":0,"delta":{"content":"ab"},"token_ids":[5,6]}]}\n',
        (b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2},"metrics":{"speculative_decoding":'
         b'{"num_spec_steps":1,"num_accepted_draft_tokens":1,"acceptance_histogram":[0,null]}}}\n'),
        b"data: [DONE]\n",
    ])
    assert rec.ok and rec.spec is None and rec.output_tokens == 2
    assert "TypeError" in rec.spec_error and "null" in rec.spec_error


@pytest.mark.parametrize("bad", [{"acceptance_histogram": [1, None]}, {"acceptance_histogram": "3"},
                                 {"acceptance_histogram": {"x": 1}}, {"num_spec_steps": "many"},
                                 {"acceptance_histogram": [2, -1]}])
def test_parse_spec_rejects_unusable_payloads(bad):
    with pytest.raises((TypeError, ValueError)):
        parse_spec(bad)


def test_without_token_ids_a_terminal_empty_delta_marks_the_last_token():
    # EOS detokenises to "": the last chunk has an empty delta and a finish_reason,
    # and its arrival is the last token's arrival.
    rec = _consume_lines([
        b'data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}\n',
        b'data: {"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":null}]}\n',
        b'data: {"choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}]}\n',
        b"data: [DONE]\n",
    ], [80, 160])
    assert rec.ok and rec.chunk_tokens == [1, 1, 1]
    rec = _consume_lines([b'data: {"choices":[{"index":0,"text":"","finish_reason":"length"}]}\n', b"data: [DONE]\n"])
    assert rec.chunk_tokens == [1]


class _ScriptedHTTP:
    """A raw HTTP/1.1 server whose writes are timed exactly like uvicorn's: headers at
    once, the first token ``ttft_s`` later, [DONE], then the chunked terminator
    ``gap_s`` after it, on a kept-alive connection."""

    def __init__(self, ttft_s: float, gap_s: float) -> None:
        self.ttft_s, self.gap_s = ttft_s, gap_s
        self.emitted: list[int] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from time import perf_counter_ns

        def chunk(b: bytes) -> bytes:
            return b"%x\r\n%s\r\n" % (len(b), b)

        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"transfer-encoding: chunked\r\n\r\n")
                await writer.drain()
                await asyncio.sleep(self.ttft_s)
                for i in range(3):
                    self.emitted.append(perf_counter_ns())
                    writer.write(chunk(b'data: {"choices":[{"index":0,"text":"x","token_ids":[%d]}]}\n\n' % i))
                    await writer.drain()
                    await asyncio.sleep(0.01)
                writer.write(chunk(b"data: [DONE]\n\n"))
                await writer.drain()
                await asyncio.sleep(self.gap_s)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


def test_headers_and_chunked_terminators_never_stand_for_a_token():
    """The bug of the first landing: bytes no event was made of (headers sent before
    prefill, the terminator of the previous response on a kept-alive connection) set
    the stamp of the next token. Two requests over one connection, 60 ms TTFT."""
    script = _ScriptedHTTP(ttft_s=0.06, gap_s=0.02)

    async def go():
        server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        cfg = ClientConfig(url, stream=VLLM)
        recs = []
        async with server, make_session(cfg, 1) as s:
            for _ in range(2):
                recs.append(await stream_request(s, cfg, "/v1/completions", {"model": "m", "prompt": "x"}, _rec()))
                await asyncio.sleep(0.05)  # the terminator arrives while the client is idle
        return recs

    recs = asyncio.run(go())
    for i, rec in enumerate(recs):
        assert rec.ok, rec.error_detail
        # The bug stamped a token with bytes that came before it (headers, the previous
        # response's terminator), so its stamp fell before the token was sent. Only that
        # is asserted: how late after its emission a stamp falls is the scheduler's (a
        # busy host once saw 126 ms for a 60 ms TTFT), not the client's.
        ttft_ms = (rec.chunk_ns[0] - rec.t_sent_ns) / 1e6
        assert ttft_ms > 50, f"request {i}: TTFT {ttft_ms:.1f} ms, before the server's 60 ms prefill"
        emitted = script.emitted[3 * i:3 * i + 3]
        assert len(rec.chunk_ns) == 3
        for t_emit, t_seen in zip(emitted, rec.chunk_ns):
            assert t_seen >= t_emit, f"request {i}: a token stamped {(t_emit - t_seen) / 1e6:.1f} ms before it was sent"


def test_counted_but_truncated_drafts_show_in_the_overcount(srv):
    """vLLM counts drafts a step accepted past EOS/max_tokens; the fake does too with
    count_truncated, and the per-request table sees the gap."""
    from speedbench.metrics.table import request_table

    srv.config = FakeConfig(t_step_s=0.002, output_tokens=10, k=3, acceptance=(3,), count_truncated=True)
    rec = _send(srv.base_url, _body())
    assert rec.ok and rec.output_tokens == 10
    assert (rec.spec.num_spec_steps, rec.spec.num_accepted_tokens) == (3, 9)  # the last step: 1 token, 3 counted
    assert request_table([rec]).spec_overcount.tolist() == [3]
