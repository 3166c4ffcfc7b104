"""What a streaming server's HTTP writes look like on the wire, read by a raw socket.

A test tool: it sends requests one after another over one keep-alive connection and
keeps every ``recv()`` with its arrival time, then says where the headers, each SSE
event, ``[DONE]`` and the chunked terminator arrived. The same probe runs against real
vLLM (end-to-end tier) and against the fake server (unit tier), so the fake's write
timing can be checked against vLLM's own HTTP stack rather than against our belief
about it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from time import perf_counter_ns
from urllib.parse import urlsplit

from speedbench.client.http import deadline


@dataclass
class Read:
    t_ns: int
    data: bytes


@dataclass
class Exchange:
    """One request/response over the probe's connection."""

    path: str
    t_sent_ns: int
    reads: list[Read] = field(default_factory=list)
    head_end: int = -1  # offset just past the header block in the joined bytes
    events: list[tuple[int, dict | str]] = field(default_factory=list)  # (read index, event)
    done_read: int = -1  # the read that completed "data: [DONE]"
    terminator_read: int = -1  # the read that completed "0\r\n\r\n"

    @property
    def header_read(self) -> int:
        """Index of the read that completed the headers."""
        return _read_at(self.reads, self.head_end)

    @property
    def headers_alone(self) -> bool:
        """The header block arrived in reads that carried no body byte."""
        end = sum(len(r.data) for r in self.reads[: self.header_read + 1])
        return end == self.head_end

    @property
    def first_token_read(self) -> int:
        for i, ev in self.events:
            if isinstance(ev, dict) and _has_token(ev):
                return i
        return -1

    @property
    def first_event(self) -> dict | str | None:
        return self.events[0][1] if self.events else None

    @property
    def chunked(self) -> bool:
        head = b"".join(r.data for r in self.reads)[: self.head_end].lower()
        return b"transfer-encoding: chunked" in head


async def _read_now(reader: asyncio.StreamReader) -> bytes:
    try:
        return await asyncio.wait_for(reader.read(1 << 16), 0.5)
    except asyncio.TimeoutError:
        return b""


def _read_at(reads: list[Read], offset: int) -> int:
    """Index of the read holding byte ``offset - 1`` (the read that completed it)."""
    total = 0
    for i, r in enumerate(reads):
        total += len(r.data)
        if total >= offset:
            return i
    return -1


def _has_token(ev: dict) -> bool:
    for c in ev.get("choices") or []:
        d = c.get("delta") or {}
        if c.get("text") or d.get("content") or c.get("token_ids"):
            return True
    return False


def _parse(ex: Exchange) -> None:
    raw = b"".join(r.data for r in ex.reads)
    ex.head_end = raw.index(b"\r\n\r\n") + 4
    pos = ex.head_end
    body = bytearray()
    ends: list[tuple[int, int]] = []  # (body length, raw offset just past each de-chunked body byte run
    while True:  # chunked transfer coding
        eol = raw.index(b"\r\n", pos)
        size = int(raw[pos:eol].split(b";")[0], 16)
        if size == 0:
            ex.terminator_read = _read_at(ex.reads, eol + 4)
            break
        start = eol + 2
        body += raw[start:start + size]
        ends.append((len(body), start + size))
        pos = start + size + 2
    at = 0
    for line in bytes(body).split(b"\n"):
        at += len(line) + 1
        if not line.startswith(b"data:"):
            continue
        raw_end = next(e for b_end, e in ends if b_end >= at) if ends else 0
        idx = _read_at(ex.reads, raw_end)
        data = line[5:].strip()
        if data == b"[DONE]":
            ex.done_read = idx
            ex.events.append((idx, "[DONE]"))
        else:
            ex.events.append((idx, json.loads(data)))


async def probe(base_url: str, requests: list[tuple[str, dict]], gap_s: float = 0.05,
                timeout_s: float = 120) -> list[Exchange]:
    """Send ``requests`` ([(path, body)], streamed) one after another over one connection."""
    u = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(u.hostname, u.port)
    out: list[Exchange] = []
    try:
        for path, body in requests:
            payload = json.dumps({**body, "stream": True}).encode()
            head = (f"POST {path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(payload)}\r\nConnection: keep-alive\r\n\r\n").encode()
            ex = Exchange(path=path, t_sent_ns=perf_counter_ns())
            writer.write(head + payload)
            await writer.drain()
            buf = b""
            async with deadline(timeout_s):
                # the body ends with the chunked terminator after the [DONE] event
                while not (b"[DONE]" in buf and buf.endswith(b"\r\n0\r\n\r\n")):
                    if buf.startswith(b"HTTP/") and b"\r\n\r\n" in buf and not buf.startswith(b"HTTP/1.1 200"):
                        await asyncio.sleep(0.2)  # let the error body arrive, then say what it was
                        buf += await _read_now(reader)
                        raise ConnectionError(f"{path} answered {buf[:600]!r}")
                    data = await reader.read(1 << 16)
                    if not data:
                        raise ConnectionError(f"the server closed the connection during {path} "
                                              f"after {len(buf)} bytes: {buf[:300]!r}")
                    ex.reads.append(Read(perf_counter_ns(), data))
                    buf += data
            _parse(ex)
            out.append(ex)
            await asyncio.sleep(gap_s)
    finally:
        writer.close()
    return out
