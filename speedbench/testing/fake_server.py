"""An OpenAI-style streaming server with scripted timings, scripted acceptance and faults.

A test tool, never a measurement: it knows the truth (when each token left, how many
drafts each step accepted) so tests can check what the client and metrics report.
It speaks the vLLM 0.32 streaming shapes (chat + completions, ``return_token_ids``,
the final usage chunk with ``metrics.speculative_decoding``) and serves ``/health``,
``/v1/models``, ``/version`` and Prometheus ``/metrics`` whose spec-decode counters
match the per-request numbers. Test-only endpoints: ``GET /fake/log``,
``GET /fake/stats``, ``POST /fake/reset``. ``--shape sglang`` speaks a wire with none of
vLLM's names instead (fake_sglang.py).

In tests use :class:`speedbench.testing.FakeServer` (a background thread) or
:class:`speedbench.testing.FakeProcess` (a child process); see ``hosting.py``. As a
process by hand: ``python -m speedbench.testing.fake_server --port 0 --t-step 0.01 --k 3
--acceptance 3,1 --fault 2:stall:3:5`` prints ``listening on URL``.

Per-request overrides: a ``"fake": {...}`` body field or a ``[[fake:...]]`` marker in
the prompt (see :func:`script.marker_overrides`), e.g. ``{"fault": "truncate", "at": 2}``.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import asdict
from time import perf_counter_ns
from typing import Any

from aiohttp import web

from speedbench.testing import fake_sglang as sglang
from speedbench.testing.fake_args import config_from_argv
from speedbench.testing.fake_state import Emission, ServerState
from speedbench.testing.fake_stream import last_text, prompt_tokens, stream
from speedbench.testing.fake_tokens import check_logprobs, diverges, output_id, prompt_ids
from speedbench.testing.script import (
    FakeConfig,
    Fault,
    Plan,
    fault_from,
    marker_overrides,
    plan,
    with_noise,
)


def _scripted(config: FakeConfig, body: dict, streamed: bool, seq: int) -> tuple[FakeConfig, Fault | None]:
    """What this request is scripted to do: the server's config with the request's own
    overrides (prompt markers, the body's ``fake`` field) and noise, and its fault."""
    # Prompt markers script what a measured (streamed) request does; a plain request
    # (speedbench's readiness probe sends the first warmup prompt) is served plainly.
    over = dict(marker_overrides(last_text(body))) if streamed else {}
    if isinstance(body.get("fake"), dict):
        over.update(body["fake"])
    cfg = with_noise(config.with_overrides(over), last_text(body))
    return cfg, fault_from(over) or config.faults.get(seq)


class _Handlers:
    def __init__(self, state: ServerState) -> None:
        self.s = state

    async def health(self, request: web.Request) -> web.Response:
        return web.Response()

    async def models(self, request: web.Request) -> web.Response:
        m = self.s.config.model
        return web.json_response({"object": "list", "data": [{"id": m, "object": "model", "owned_by": "fake",
                                                              "max_model_len": 65536}]})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.32.0+fake"})

    async def metrics(self, request: web.Request) -> web.Response:
        text = sglang.metrics_text(self.s) if self.s.config.shape == sglang.SHAPE else self.s.metrics_text()
        return web.Response(text=text, content_type="text/plain")

    async def fake_log(self, request: web.Request) -> web.Response:
        return web.json_response([asdict(e) for e in self.s.log])

    async def fake_stats(self, request: web.Request) -> web.Response:
        return web.json_response({"active": self.s.active, "max_concurrent": self.s.max_concurrent,
                                  "requests": self.s.seq})

    async def fake_reset(self, request: web.Request) -> web.Response:
        self.s.reset()
        return web.Response()

    async def generate(self, request: web.Request) -> web.StreamResponse:
        t_arrival = perf_counter_ns()
        body = await request.json()
        s = self.s
        seq = s.seq
        s.seq += 1
        chat = request.path.endswith("/chat/completions")
        streamed = bool(body.get("stream"))
        cfg, fault = _scripted(s.config, body, streamed, seq)
        em = Emission(seq=seq, path=request.path, body=body, t_arrival_ns=t_arrival,
                      fault=fault.kind if fault else None)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        em.peer_port = int(peer[1]) if peer else 0
        s.log.append(em)
        if s.allow_exit and s.config.die_after is not None and seq >= s.config.die_after:
            os._exit(3)  # script mode only (see main): a server crash, for crash tests
        refused = sglang.refusal(cfg, body)
        if refused:
            em.fault, answer = refused
            return web.json_response(answer, status=400)
        if fault and fault.kind == "http_500":
            return web.json_response({"error": {"message": "injected failure", "code": fault.status}},
                                     status=fault.status)
        s.active += 1
        s.max_concurrent = max(s.max_concurrent, s.active)
        try:
            if not streamed:
                return await self._complete(body, cfg, em, chat, seq)
            return await stream(s, request, body, cfg, fault, em, chat, seq)
        except (ConnectionResetError, ConnectionError):
            em.fault = em.fault or "client_gone"
            return web.Response()
        finally:
            s.active -= 1
            em.t_done_ns = perf_counter_ns()

    async def _complete(self, body: dict, cfg: FakeConfig, em: Emission, chat: bool, seq: int) -> web.Response:
        """``stream: false``, as vLLM answers it: one JSON body once the last step is done."""
        p: Plan = plan(cfg, body.get("max_tokens", body.get("max_completion_tokens")))
        if p.steps:
            delay = (em.t_arrival_ns + int(p.steps[-1].t_s * 1e9) - perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
        n = sum(st.tokens for st in p.steps)
        em.tokens.append(n)
        affected = diverges(cfg, last_text(body))
        text = "".join(f" w{output_id(cfg, t, affected)}" for t in range(n))
        choice: dict = {"index": 0, "message": {"role": "assistant", "content": text}} if chat else {"index": 0,
                                                                                                  "text": text}
        choice.update({"logprobs": None, "finish_reason": "length"})
        pt = prompt_tokens(body)
        if not chat and body.get("logprobs") and isinstance(body.get("prompt"), list):
            # the output check's request: one token after a prefix given as ids, and the
            # target's top tokens there, in vLLM's shape for completions
            top, choice["logprobs"] = check_logprobs(cfg, prompt_ids(body), int(body["logprobs"]),
                                                     bool(body.get("return_tokens_as_token_ids")))
            choice["text"], pt, n = f" w{top}", len(body["prompt"]), 1
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{seq}"
        answer: dict[str, Any] = {"id": rid, "object": "chat.completion" if chat else "text_completion",
                                  "created": int(time.time()), "model": cfg.model, "choices": [choice]}
        if cfg.shape == sglang.SHAPE:
            answer["meta_info"] = sglang.meta_info(rid, pt, n, None, em.t_arrival_ns)
        else:
            answer["usage"] = {"prompt_tokens": pt, "total_tokens": pt + n, "completion_tokens": n}
        return web.json_response(answer)

def _auth(state: ServerState):
    @web.middleware
    async def check(request: web.Request, handler):
        key = state.config.api_key
        if key and request.path.startswith("/v1") and request.headers.get("Authorization") != f"Bearer {key}":
            return web.json_response({"error": "Unauthorized"}, status=401)  # vLLM's exact answer
        return await handler(request)

    return check


def build_app(state: ServerState) -> web.Application:
    h = _Handlers(state)
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[_auth(state)])
    app.router.add_get("/health", h.health)
    app.router.add_get("/v1/models", h.models)
    app.router.add_get("/version", h.version)
    app.router.add_get("/metrics", h.metrics)
    app.router.add_get("/fake/log", h.fake_log)
    app.router.add_get("/fake/stats", h.fake_stats)
    app.router.add_post("/fake/reset", h.fake_reset)
    app.router.add_post("/v1/chat/completions", h.generate)
    app.router.add_post("/v1/completions", h.generate)
    return app


def main(argv: list[str] | None = None) -> None:
    cfg, host, port = config_from_argv(argv)

    async def serve() -> None:
        runner = web.AppRunner(build_app(ServerState(cfg, allow_exit=True)), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        print(f"listening on http://{host}:{runner.addresses[0][1]}", flush=True)
        await asyncio.Event().wait()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
