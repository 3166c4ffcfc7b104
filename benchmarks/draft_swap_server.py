"""A vLLM server whose draft gets worse halfway through its life: real AL drift on a CPU.

speedbench launches this as an arm's local server command, exactly as it launches vLLM,
with vLLM's own argv (the scenario's args plus speedbench's measurement flags, --host and
--port). It starts vLLM with that argv on a free port of its own and relays HTTP to it
(streams included, so the client reads vLLM's chunks as vLLM writes them). Before
relaying streamed request number ``--swap-after`` + 1 it stops that vLLM and starts a
second one whose ``--speculative-config`` names ``--swap-draft`` instead, holding the
request until the new server answers. From the client's side it is one server whose
acceptance falls mid-run, which is what analysis/al_trend.py looks for (a long-running
server that loses acceptance), produced by real vLLM and real drafts rather than by a
simulation.

Used by benchmarks/induced_al_drift.py; not part of the product.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time

import aiohttp
import psutil
from aiohttp import web

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _with_draft(argv: list[str], draft: str) -> list[str]:
    out = list(argv)
    i = out.index("--speculative-config")
    cfg = json.loads(out[i + 1])
    out[i + 1] = json.dumps({**cfg, "model": draft})
    return out


class Backend:
    """One vLLM API server and its engine processes. They stay in our process group, so
    speedbench's stop (or its watchdog's SIGKILL of the group) takes them down with us."""

    def __init__(self, argv: list[str]) -> None:
        self.port = _free_port()
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", *argv, "--host", "127.0.0.1",
               "--port", str(self.port)]
        print("draft-swap: starting", " ".join(cmd), flush=True)
        self.proc = subprocess.Popen(cmd)
        self.url = f"http://127.0.0.1:{self.port}"

    async def ready(self, session: aiohttp.ClientSession, timeout_s: float = 600) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"draft-swap: vLLM exited with code {self.proc.returncode}")
            try:
                async with session.get(self.url + "/v1/models") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.25)
        raise SystemExit("draft-swap: vLLM did not become ready")

    def stop(self) -> None:
        """SIGTERM to the API server and its children, SIGKILL to whatever is left at 30 s."""
        if self.proc.poll() is not None:
            return
        procs = [psutil.Process(self.proc.pid)]
        procs += procs[0].children(recursive=True)
        for p in procs:
            try:
                p.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(procs, timeout=30)
        for p in alive:
            p.kill()
        self.proc.wait()


class Swapper:
    def __init__(self, argv: list[str], swap_draft: str, swap_after: int) -> None:
        self.argv, self.swap_draft, self.swap_after = argv, swap_draft, swap_after
        self.streamed = 0
        self.swapped = False
        self.lock = asyncio.Lock()
        self.backend = Backend(argv)
        self.session: aiohttp.ClientSession | None = None

    async def start(self, app: web.Application) -> None:
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        # speedbench's readiness probe reaches vLLM through us, so answer only once it can
        await self.backend.ready(self.session)

    async def close(self, app: web.Application) -> None:
        self.backend.stop()
        if self.session is not None:
            await self.session.close()

    async def _maybe_swap(self, body: bytes) -> None:
        try:
            streamed = bool(json.loads(body or b"{}").get("stream"))
        except ValueError:
            streamed = False
        if not streamed:
            return
        async with self.lock:  # requests arriving during the swap wait for the new server
            self.streamed += 1
            if self.swapped or self.streamed <= self.swap_after:
                return
            print(f"draft-swap: streamed request {self.streamed}: swapping the draft to {self.swap_draft}",
                  flush=True)
            self.backend.stop()
            self.backend = Backend(_with_draft(self.argv, self.swap_draft))
            assert self.session is not None
            await self.backend.ready(self.session)
            self.swapped = True
            print("draft-swap: the new draft is serving", flush=True)

    async def relay(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.method == "POST":
            await self._maybe_swap(body)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        assert self.session is not None
        async with self.session.request(request.method, self.backend.url + request.rel_url.path_qs,
                                        data=body, headers=headers) as up:
            out = web.StreamResponse(status=up.status,
                                     headers={k: v for k, v in up.headers.items() if k.lower() not in HOP})
            await out.prepare(request)
            async for chunk in up.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--swap-draft", required=True, help="the draft the second server uses")
    ap.add_argument("--swap-after", type=int, required=True, help="streamed requests served by the first")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ours, vllm_argv = ap.parse_known_args()
    swapper = Swapper(vllm_argv, ours.swap_draft, ours.swap_after)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", swapper.relay)
    app.on_startup.append(swapper.start)
    app.on_cleanup.append(swapper.close)
    try:  # run_app turns SIGTERM/SIGINT into a clean exit, which runs close()
        web.run_app(app, host=ours.host, port=ours.port, print=None)
    finally:
        swapper.backend.stop()


if __name__ == "__main__":
    main()
