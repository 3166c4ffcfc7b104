"""The streaming HTTP client: one request in, one :class:`RequestRecord` out.

The hot path stores raw ``perf_counter_ns`` stamps and token counts and nothing else;
every derived number is computed later by :mod:`speedbench.metrics`. Errors are
recorded on the record (``rec.error``, one of ``records.ERROR_KINDS``), never raised,
except ``asyncio.CancelledError``, which is recorded as "cancelled" and re-raised so
that cancellation keeps its asyncio meaning.

Tokens per chunk: a chunk's ``token_ids`` list (asked for by the engine's token-ids
request field, client/extensions.py) when the server sends one; otherwise 1 for every chunk whose delta has
non-empty text (content, reasoning or tool-call arguments). The fallback undercounts
when a server packs several tokens into one text delta (speculative decoding does);
``RequestRecord.n_output`` then still comes from the usage chunk.

SSE handling: each ``data:`` line is one event (vLLM never splits an event over
several ``data:`` lines); blank lines, ``:`` comments and the ``event:``/``id:``/
``retry:`` fields are ignored; any other line is malformed. A chunk's time is when
the event loop received the bytes of the read that delivered it (see :func:`_consume`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

from speedbench.records import RequestRecord
from speedbench.client.stamps import StampingHandler, Arrivals
from speedbench.client.extensions import PLAIN, StreamExtensions, ask_token_ids, read_usage, refuses_token_ids

try:  # msgspec parses bytes straight to dicts, ~2x faster than json (benchmarks/README.md)
    import msgspec

    _loads = msgspec.json.Decoder().decode  # raises a ValueError subclass, also for trailing data
except ImportError:  # pragma: no cover -- msgspec comes with vLLM; a bare install may lack it
    _raw_decode = json.JSONDecoder().raw_decode

    def _loads(data: bytes) -> Any:  # type: ignore[misc]  # msgspec's decoder takes str too
        # json's own parser without json.loads' wrappers (encoding sniffing, whitespace
        # regexes): the data is stripped, so "parsed to the end" is the same check.
        s = data.decode()
        obj, end = _raw_decode(s)
        if end != len(s):
            raise ValueError("trailing data")
        return obj

if sys.version_info >= (3, 11):
    from asyncio import timeout as deadline
else:  # Python 3.10: aiohttp itself depends on async-timeout there
    from async_timeout import timeout as deadline

_RAW_LIMIT = 2048  # bytes of an offending fragment kept on the record
_BODY_LIMIT = 500  # bytes of a non-200 body kept in error_detail
_IGNORED_FIELDS = (b"event:", b"id:", b"retry:")
_DRAIN_S = 1.0  # how long to wait for the end of the HTTP body after [DONE]
_MAX_LINE = 16 << 20  # a "line" this long without a newline is not SSE


@dataclass
class ClientConfig:
    base_url: str
    api_key: str | None = None
    request_timeout_s: float = 600  # whole-request deadline, send -> end of stream
    idle_timeout_s: float = 60  # no bytes at all for this long = a stalled stream
    # The engine's additions to the stream (the run passes its Engine); plain OpenAI by default.
    stream: StreamExtensions = PLAIN
    # Ask for per-chunk token ids (exact tokens per chunk without a tokenizer) where the
    # engine has a request field for them.
    token_ids: bool = True


def make_session(cfg: ClientConfig, concurrency: int) -> aiohttp.ClientSession:
    """One session per point; the pool is sized to the concurrency so no request
    ever waits for a connection inside aiohttp (that wait would look like TTFT)."""
    connector = aiohttp.TCPConnector(limit=max(1, concurrency), limit_per_host=0, ttl_dns_cache=300)
    factory = getattr(connector, "_factory", None)
    # A private hook of aiohttp's connector; when a future aiohttp changes it, stamps
    # quietly fall back to the time the reading coroutine resumes.
    if isinstance(factory, functools.partial) and factory.func is ResponseHandler:
        connector._factory = functools.partial(  # type: ignore[assignment]  # a ResponseHandler subclass
            StampingHandler, *factory.args, **factory.keywords)
    headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else None
    # total=None: aiohttp's default 300 s total would cut long generations; our own
    # deadline and idle timeout apply per request in stream_request.
    return aiohttp.ClientSession(
        connector=connector,
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=None),
        read_bufsize=1 << 18,
    )


def _fragment(raw: bytes) -> str:
    return raw[:_RAW_LIMIT].decode("utf-8", errors="replace")


async def stream_request(
    session: aiohttp.ClientSession, cfg: ClientConfig, path: str, body: dict, rec: RequestRecord
) -> RequestRecord:
    """Send one streaming request and fill ``rec`` in place (also returned)."""
    url = cfg.base_url.rstrip("/") + path
    payload = stream_payload(body, cfg.stream)
    # sock_read is aiohttp's per-read timer, re-armed on every received packet: one
    # timer re-arm per read, and it fires only when the stream really stalls.
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(30.0, cfg.request_timeout_s),
                                    sock_read=cfg.idle_timeout_s)
    progress = _Progress()
    try:
        async with deadline(cfg.request_timeout_s):
            await _send(session, _Request(url, payload, timeout, cfg.stream, cfg.token_ids), rec, progress)
    except asyncio.CancelledError:
        _fail(rec, "cancelled", "the request was cancelled")
        raise
    except aiohttp.ConnectionTimeoutError as e:
        _fail(rec, "connection", f"connect timeout: {e}")
    except aiohttp.ServerTimeoutError as e:
        # SocketTimeoutError (sock_read): no bytes for idle_timeout_s.
        _fail(rec, "idle_timeout", f"no data for {cfg.idle_timeout_s} s ({e})")
    except asyncio.TimeoutError:  # the builtin TimeoutError on 3.11+
        if not progress.complete:  # a deadline hit while draining after [DONE] is no error
            _fail(rec, "timeout", f"request exceeded {cfg.request_timeout_s} s")
    except aiohttp.ClientPayloadError as e:
        # The connection dropped inside the HTTP body (e.g. mid chunked-encoding).
        _fail(rec, "truncated", f"stream broken: {e}")
    except (aiohttp.ClientError, OSError) as e:
        _fail(rec, "truncated" if progress.started else "connection", f"{type(e).__name__}: {e}")
    except ValueError as e:
        # a protocol-level parse failure inside aiohttp (bad chunked encoding, ...)
        _fail(rec, "malformed_sse", f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 -- the contract: a request never raises into the runner
        _fail(rec, "connection", f"unexpected {type(e).__name__}: {e}")
    return rec


def stream_payload(body: dict, stream: StreamExtensions) -> dict:
    """``body`` as a streaming request: usage once, in the last event (one per chunk
    would be parsed on the hot path for nothing), in whatever fields the engine says so."""
    payload = dict(body)
    payload["stream"] = True
    payload["stream_options"] = {"include_usage": True, **stream.usage_options(per_chunk=False)}
    return payload


@dataclass
class _Request:
    url: str
    payload: dict
    timeout: aiohttp.ClientTimeout
    stream: StreamExtensions
    want_ids: bool  # ask for per-chunk token ids (dropped once a server refuses them)


@dataclass
class _Progress:
    """How far a request got, for naming its error."""

    started: bool = False  # a 200 response began streaming
    complete: bool = False  # [DONE] was seen (only the body's tail remained)


async def _send(session: aiohttp.ClientSession, req: _Request, rec: RequestRecord, progress: _Progress) -> None:
    """POST until a response is read: once more without token ids if the server refuses them."""
    while True:
        ask_token_ids(req.payload, req.stream.token_ids_field, req.want_ids)
        rec.t_sent_ns = perf_counter_ns()
        async with session.post(req.url, json=req.payload, timeout=req.timeout) as resp:
            if resp.status != 200:
                head = await resp.content.read(_BODY_LIMIT)
                # Servers without the engine's extension may reject the field; the count
                # then falls back to text deltas (see module docstring).
                if req.want_ids and refuses_token_ids(resp.status, head, req.stream.token_ids_field):
                    req.want_ids = False
                    continue
                rec.t_end_ns = perf_counter_ns()
                rec.error = "http_status"
                rec.error_detail = f"HTTP {resp.status}: {head.decode('utf-8', errors='replace')}"
                return
            progress.started = True
            await _consume(resp.content, rec, resp.connection.protocol if resp.connection else None, req.stream)
            if rec.error is None:
                progress.complete = True
                await _drain(resp.content)
            return


async def _drain(content: aiohttp.StreamReader) -> None:
    """Read to the end of the HTTP body after ``[DONE]``. aiohttp only puts a
    connection back in the pool when its body was read to the end; without this every
    request would open a new TCP connection, which at high concurrency costs more
    than everything else the client does. Bounded: a server that keeps the body open
    after ``[DONE]`` costs one short wait, not an idle timeout."""
    if content.at_eof():
        return
    try:
        async with deadline(_DRAIN_S):
            while await content.readany():
                pass
    except (asyncio.TimeoutError, aiohttp.ClientError):
        pass  # the record is complete; the connection is simply not reused


def _fail(rec: RequestRecord, kind: str, detail: str) -> None:
    rec.t_end_ns = perf_counter_ns()
    if rec.error is None:  # keep the first (most specific) cause
        rec.error = kind
        rec.error_detail = detail


async def _consume(content: aiohttp.StreamReader, rec: RequestRecord, proto: Any = None,
                   stream: StreamExtensions = PLAIN) -> None:
    """Read SSE events until ``[DONE]``.

    Reads whatever bytes have arrived (``iter_any``) and splits lines here: aiohttp's
    per-line ``readline`` costs more than the JSON parse. An event's time is the
    arrival of the read that delivered its last byte (``StampingHandler`` marks),
    else the time this coroutine resumed; never the time after parsing earlier events,
    which would add our own parse time to the arrival times. Several reads buffered
    before this coroutine runs keep their own times.
    """
    arrivals = Arrivals(proto, content)
    text: list[str] = []
    last = b""
    pending = b""  # an incomplete line carried over to the next read
    taken = 0  # body bytes taken so far, on the same scale as the marks
    try:
        async for piece_bytes in content.iter_any():
            resumed = perf_counter_ns()
            # body offset just past the newline of the line being looked at
            pos = taken - len(pending)
            taken += len(piece_bytes)
            lines = (pending + piece_bytes if pending else piece_bytes).split(b"\n")
            pending = lines.pop()
            if len(pending) > _MAX_LINE:
                _malformed(rec, "an SSE line over 16 MiB", pending)
                return
            for line in lines:
                pos += len(line) + 1
                if line.startswith(b"data:"):
                    last = line
                    # the stamp is looked up for every event, used only by one that carries
                    # tokens: marks before an earlier offset are never needed again
                    if _event(line, rec, text, arrivals.at(pos, resumed), stream):
                        return
                elif line.strip() and not line.startswith(b":") and not line.startswith(_IGNORED_FIELDS):
                    _malformed(rec, "not an SSE data line", line)
                    return
        # EOF without [DONE]
        rec.error, rec.error_detail = "truncated", "the stream ended before [DONE]"
        _keep_tail(rec, pending, last)
    except aiohttp.ClientPayloadError:
        # The connection broke inside the body: keep the last bytes that did arrive,
        # as for a clean EOF (the caller records the error kind).
        _keep_tail(rec, pending, last)
        raise
    finally:
        if not rec.t_end_ns:
            rec.t_end_ns = perf_counter_ns()
        rec.output_text = "".join(text)


def _keep_tail(rec: RequestRecord, pending: bytes, last: bytes) -> None:
    tail = pending if pending.strip() else last
    rec.raw_fragment = _fragment(tail) if tail else None


def _malformed(rec: RequestRecord, detail: str, raw: bytes) -> bool:
    rec.error, rec.error_detail = "malformed_sse", detail
    rec.raw_fragment = _fragment(raw)
    return True


def _event(line: bytes, rec: RequestRecord, text: list[str], at: int, stream: StreamExtensions) -> bool:
    """One ``data:`` line; True when the stream is over ([DONE], or an error set on
    ``rec``). ``at``: the arrival time of the line's last byte."""
    data = line[5:].strip()
    if data == b"[DONE]":
        rec.t_end_ns = perf_counter_ns()
        return True
    try:
        obj = _loads(data)
        choices = obj.get("choices")
    except (ValueError, AttributeError):
        return _malformed(rec, "event is not a JSON object", line)
    try:
        if choices:
            _choice(choices[0], rec, text, at)
            stream.read_choice(choices[0], rec)
        stream.read_event(obj, rec)
    except (AttributeError, TypeError, KeyError, IndexError, ValueError):
        # JSON, but not the OpenAI shape (choices not a list of objects, ...)
        return _malformed(rec, "event has an unexpected shape", line)
    usage = obj.get("usage")
    if usage:
        read_usage(obj, usage, rec, stream)
    if "error" in obj:
        # vLLM reports a failure after the 200 header as an error event.
        rec.error = "http_status"
        rec.error_detail = f"in-stream error: {json.dumps(obj['error'])[:_BODY_LIMIT]}"
        rec.raw_fragment = _fragment(line)
        return True
    return False


def _choice(c: Any, rec: RequestRecord, text: list[str], at: int) -> None:
    """One choice of an event: its text and its tokens (stamped ``at``)."""
    ids = c.get("token_ids")
    delta = c.get("delta")
    piece = delta.get("content") if delta is not None else c.get("text")
    if piece:
        if not isinstance(piece, str):
            raise TypeError("content is not text")
        text.append(piece)
    if ids is not None:
        n = len(ids)
        rec.output_ids.extend(ids)
    elif piece or (delta is not None and _has_other_text(delta)):
        n = 1
    elif c.get("finish_reason") is not None:
        # Without token ids, the last step often comes as an empty delta with
        # finish_reason (EOS detokenises to ""): it still carries the last token, and its
        # arrival ends the decode window.
        n = 1
    else:
        n = 0
    if n:
        rec.chunk_ns.append(at)
        rec.chunk_tokens.append(n)


def _has_other_text(delta: dict) -> bool:
    if delta.get("reasoning_content") or delta.get("reasoning"):
        return True
    calls = delta.get("tool_calls")
    return bool(calls)
