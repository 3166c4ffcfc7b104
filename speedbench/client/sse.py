"""Reading one streamed response: its SSE events, each chunk's text and tokens, and the
arrival stamp each chunk takes (client/stamps.py's Arrivals).

SSE handling: each ``data:`` line is one event (vLLM never splits an event over
several ``data:`` lines); blank lines, ``:`` comments and the ``event:``/``id:``/
``retry:`` fields are ignored; any other line is malformed. A chunk's time is when
the event loop received the bytes of the read that delivered it (see :func:`consume`).

Tokens per chunk: a chunk's token ids (asked for by the engine's token-ids request field,
and read from the choice's field the engine names, client/extensions.py) when the server
sends them; otherwise 1 for every chunk whose delta has non-empty text (content, reasoning
or tool-call arguments). The fallback undercounts when a server packs several tokens into
one text delta (speculative decoding does); ``RequestRecord.n_output`` then still comes
from the usage chunk (or the engine's own counts).
"""

from __future__ import annotations

import json
from time import perf_counter_ns
from typing import Any

import aiohttp

from speedbench.client.extensions import PLAIN, StreamExtensions, read_usage
from speedbench.client.stamps import Arrivals
from speedbench.records import RequestRecord

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

RAW_LIMIT = 2048  # bytes of an offending fragment kept on the record
BODY_LIMIT = 500  # bytes of a non-200 body (or an in-stream error) kept in error_detail
_IGNORED_FIELDS = (b"event:", b"id:", b"retry:")
_MAX_LINE = 16 << 20  # a "line" this long without a newline is not SSE


def fragment(raw: bytes) -> str:
    return raw[:RAW_LIMIT].decode("utf-8", errors="replace")


async def consume(content: aiohttp.StreamReader, rec: RequestRecord, proto: Any = None,
                   stream: StreamExtensions = PLAIN) -> None:
    """Read SSE events until ``[DONE]``.

    Reads whatever bytes have arrived (``iter_any``) and splits lines here: aiohttp's
    per-line ``readline`` costs more than the JSON parse. An event's time is the
    arrival of the read that delivered its last byte (``StampingHandler`` marks),
    else the time this coroutine resumed; never the time after parsing earlier events,
    which would add our own parse time to the arrival times. Several reads buffered
    before this coroutine runs keep their own times.
    """
    reader = _Lines(rec, Arrivals(proto, content), stream)
    try:
        async for piece_bytes in content.iter_any():
            if reader.feed(piece_bytes, perf_counter_ns()):
                return
        # EOF without [DONE]
        rec.error, rec.error_detail = "truncated", "the stream ended before [DONE]"
        _keep_tail(rec, reader.pending, reader.last)
    except aiohttp.ClientPayloadError:
        # The connection broke inside the body: keep the last bytes that did arrive,
        # as for a clean EOF (the caller records the error kind).
        _keep_tail(rec, reader.pending, reader.last)
        raise
    finally:
        if not rec.t_end_ns:
            rec.t_end_ns = perf_counter_ns()
        rec.output_text = "".join(reader.text)


class _Lines:
    """The body split into lines across reads: each complete ``data:`` line handed to
    ``_event`` with the arrival of its last byte; an incomplete one kept for the next read."""

    def __init__(self, rec: RequestRecord, arrivals: Arrivals, stream: StreamExtensions) -> None:
        self.rec, self.arrivals, self.stream = rec, arrivals, stream
        self.text: list[str] = []
        self.last = b""
        self.pending = b""  # an incomplete line carried over to the next read
        self.taken = 0  # body bytes taken so far, on the same scale as the marks

    def feed(self, piece_bytes: bytes, resumed: int) -> bool:
        """One read (``resumed``: when this coroutine got it); True when the stream is over."""
        rec, text, arrivals, stream = self.rec, self.text, self.arrivals, self.stream  # locals: read per line
        # body offset just past the newline of the line being looked at
        pos = self.taken - len(self.pending)
        self.taken += len(piece_bytes)
        lines = (self.pending + piece_bytes if self.pending else piece_bytes).split(b"\n")
        self.pending = lines.pop()
        if len(self.pending) > _MAX_LINE:
            return _malformed(rec, "an SSE line over 16 MiB", self.pending)
        for line in lines:
            pos += len(line) + 1
            if line.startswith(b"data:"):
                self.last = line
                # the stamp is looked up for every event, used only by one that carries
                # tokens: marks before an earlier offset are never needed again
                if _event(line, rec, text, arrivals.at(pos, resumed), stream):
                    return True
            elif line.strip() and not line.startswith(b":") and not line.startswith(_IGNORED_FIELDS):
                return _malformed(rec, "not an SSE data line", line)
        return False


def _keep_tail(rec: RequestRecord, pending: bytes, last: bytes) -> None:
    tail = pending if pending.strip() else last
    rec.raw_fragment = fragment(tail) if tail else None


def _malformed(rec: RequestRecord, detail: str, raw: bytes) -> bool:
    rec.error, rec.error_detail = "malformed_sse", detail
    rec.raw_fragment = fragment(raw)
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
            _choice(choices[0], rec, text, at, stream.chunk_ids_field)
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
        rec.error_detail = f"in-stream error: {json.dumps(obj['error'])[:BODY_LIMIT]}"
        rec.raw_fragment = fragment(line)
        return True
    return False


def _choice(c: Any, rec: RequestRecord, text: list[str], at: int, ids_field: str) -> None:
    """One choice of an event: its text and its tokens (stamped ``at``; their ids in
    ``ids_field``, the engine's, when it has one)."""
    ids = c.get(ids_field) if ids_field else None
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
