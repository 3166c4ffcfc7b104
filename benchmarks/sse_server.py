"""A minimal, fast OpenAI-style SSE server for client benchmarks (not a test fake).

Raw asyncio protocol (uvloop when installed), HTTP/1.1 keep-alive, chunked bodies,
vLLM-shaped chat chunks of ~230 bytes. Two modes:

* ``burst``: the whole response (N chunks) is pre-rendered and written at once, so the
  server costs almost nothing and the client's ingest rate is what gets measured.
* ``paced``: each stream sends one chunk every ``--interval-ms`` (random phase per
  stream, so streams do not all fire at once) and puts ``time.perf_counter_ns()``,
  taken just before the write, in the chunk's content. On Linux perf_counter is
  CLOCK_MONOTONIC, shared by every process on the machine, so a client can subtract
  it from its own arrival stamps to get the one-way delay it added.

Prints ``listening on URL`` once ready. Run: ``python benchmarks/sse_server.py --mode paced``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time

_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
_PRE = b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench","choices":[{"index":0,"delta":{"content":"'
_POST = b'"},"logprobs":null,"finish_reason":%s,"token_ids":[%d]}]}\n\n'
_USAGE = b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench","choices":[],"usage":{"prompt_tokens":8,"total_tokens":%d,"completion_tokens":%d}}\n\n'


def _chunked(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(i: int, n: int, content: bytes) -> bytes:
    return _PRE + content + _POST % (b'"length"' if i == n - 1 else b"null", 1000 + i % 1000)


def _tail(n: int) -> bytes:
    return _chunked(_USAGE % (n + 8, n)) + _chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n"


class _Conn(asyncio.Protocol):
    def __init__(self, args: argparse.Namespace, cache: dict[int, bytes]) -> None:
        self.args, self.cache = args, cache
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.busy = False

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._next()

    def _next(self) -> None:
        if self.busy:
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buf[:end].decode("latin-1")
        length = 0
        for line in head.split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == "content-length":
                length = int(v)
        if len(self.buf) < end + 4 + length:
            return
        body = self.buf[end + 4 : end + 4 + length]
        self.buf = self.buf[end + 4 + length :]
        method, path = head.split(" ", 2)[:2]
        if method == "GET":
            self._plain(b'{"object":"list","data":[{"id":"bench","object":"model"}]}' if "models" in path else b"{}")
            return self._next()
        req = json.loads(body or b"{}")
        n = int(req.get("max_completion_tokens") or req.get("max_tokens") or self.args.chunks)
        self.busy = True
        self.transport.write(_HEAD)
        if self.args.mode == "burst":
            if n not in self.cache:
                self.cache[n] = b"".join(_chunked(_event(i, n, b"x")) for i in range(n)) + _tail(n)
            self.transport.write(self.cache[n])
            self._done()
        else:
            loop = asyncio.get_running_loop()
            iv = self.args.interval_ms / 1000
            t0 = loop.time() + random.uniform(0, iv)
            for i in range(n):
                loop.call_at(t0 + i * iv, self._send, i, n)

    def _send(self, i: int, n: int) -> None:
        if self.transport.is_closing():
            return
        # the stamp is the last thing before the write syscall
        self.transport.write(_chunked(_event(i, n, b"%d " % time.perf_counter_ns())))
        if i == n - 1:
            self.transport.write(_tail(n))
            self._done()

    def _done(self) -> None:
        self.busy = False
        self._next()

    def _plain(self, body: bytes) -> None:
        self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--mode", choices=["burst", "paced"], default="burst")
    ap.add_argument("--interval-ms", type=float, default=10.0)
    ap.add_argument("--chunks", type=int, default=1000, help="when the request has no max_tokens")
    args = ap.parse_args()
    try:
        import uvloop  # a faster server keeps the server out of the client's numbers

        uvloop.install()
    except ImportError:
        pass
    cache: dict[int, bytes] = {}

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Conn(args, cache), args.host, args.port, backlog=4096)
        port = server.sockets[0].getsockname()[1]
        print(f"listening on http://{args.host}:{port}", flush=True)
        await server.serve_forever()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
