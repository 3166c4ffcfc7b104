"""The streaming HTTP client: one request in, one :class:`RequestRecord` out.

The hot path stores raw ``perf_counter_ns`` stamps and token counts and nothing else;
every derived number is computed later by :mod:`speedbench.metrics`. Errors are
recorded on the record (``rec.error``, one of ``records.ERROR_KINDS``), never raised,
except ``asyncio.CancelledError``, which is recorded as "cancelled" and re-raised so
that cancellation keeps its asyncio meaning.

Sending here: the streaming request's payload, the POST (once more without token ids when
the server refuses them), its deadline and idle timeout, and each failure named. Reading
the response is client/sse.py's; when each byte arrived, client/stamps.py's.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from dataclasses import dataclass
from time import perf_counter_ns

import aiohttp
from aiohttp.client_proto import ResponseHandler

from speedbench.records import RequestRecord
from speedbench.client.sse import BODY_LIMIT, consume
from speedbench.client.stamps import StampingHandler
from speedbench.client.extensions import PLAIN, StreamExtensions, ask_token_ids, refuses_token_ids

if sys.version_info >= (3, 11):
    from asyncio import timeout as deadline
else:  # Python 3.10: aiohttp itself depends on async-timeout there
    from async_timeout import timeout as deadline

_DRAIN_S = 1.0  # how long to wait for the end of the HTTP body after [DONE]


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
                head = await resp.content.read(BODY_LIMIT)
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
            await consume(resp.content, rec, resp.connection.protocol if resp.connection else None, req.stream)
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
