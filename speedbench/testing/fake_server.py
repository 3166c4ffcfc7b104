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
import json
import os
import time
from dataclasses import asdict, dataclass, field
from time import perf_counter_ns
from typing import Any

from aiohttp import web

from speedbench.testing import fake_sglang as sglang
from speedbench.testing.fake_args import config_from_argv
from speedbench.testing.fake_state import Emission, ServerState
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


def _last_text(body: dict) -> str:
    if body.get("messages"):
        content = body["messages"][-1].get("content", "")
        return content if isinstance(content, str) else json.dumps(content)
    prompt = body.get("prompt", "")
    return prompt if isinstance(prompt, str) else json.dumps(prompt)


def _prompt_tokens(body: dict) -> int:
    if "messages" in body:
        return sum(len(str(m.get("content", "")).split()) + 4 for m in body["messages"])
    return len(str(body.get("prompt", "")).split())


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
        # Prompt markers script what a measured (streamed) request does; a plain request
        # (speedbench's readiness probe sends the first warmup prompt) is served plainly.
        over = dict(marker_overrides(_last_text(body))) if streamed else {}
        if isinstance(body.get("fake"), dict):
            over.update(body["fake"])
        cfg = with_noise(s.config.with_overrides(over), _last_text(body))
        fault = fault_from(over) or s.config.faults.get(seq)
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
            return await self._stream(request, body, cfg, fault, em, chat, seq)
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
        affected = diverges(cfg, _last_text(body))
        text = "".join(f" w{output_id(cfg, t, affected)}" for t in range(n))
        choice: dict = {"index": 0, "message": {"role": "assistant", "content": text}} if chat else {"index": 0,
                                                                                                  "text": text}
        choice.update({"logprobs": None, "finish_reason": "length"})
        pt = _prompt_tokens(body)
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

    async def _stream(self, request, body, cfg: FakeConfig, fault: Fault | None, em: Emission, chat: bool, seq: int):
        p: Plan = plan(cfg, body.get("max_tokens", body.get("max_completion_tokens")))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        if not cfg.keep_alive:
            resp.force_close()
        # StreamResponse sends its headers now, as uvicorn does for vLLM's streaming
        # responses: the client sees them long before the first token.
        await resp.prepare(request)
        ids_request, ids_field = sglang.ids_fields(cfg.shape)
        ids_on = bool(body.get(ids_request))
        st = _Stream(resp=resp, cfg=cfg, em=em, p=p, chat=chat, ids_on=ids_on, ids_field=ids_field,
                     prompt_ids=prompt_ids(body) if ids_on and cfg.shape != sglang.SHAPE else None,
                     affected=diverges(cfg, _last_text(body)),
                     head={"id": f"{'chatcmpl' if chat else 'cmpl'}-{seq}",
                           "object": "chat.completion.chunk" if chat else "text_completion",
                           "created": int(time.time()), "model": cfg.model},
                     engine=seq % max(1, self.s.config.engines))
        # vLLM's chat role chunk (no output token) goes out when the first token is ready;
        # /v1/completions has none.
        # With return_token_ids vLLM sends the prompt's ids once: chat at the role chunk's top
        # level, completions in the first choice.
        first = {"prompt_token_ids": st.prompt_ids} if st.prompt_ids is not None else {}
        st.role = _event({**st.head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                  "logprobs": None, "finish_reason": None}], **first}) if chat else b""
        for i, step in enumerate(st.p.steps):
            if fault and i == fault.at and fault.kind != "http_500" and await self._fault(request, st, fault):
                return resp
            await self._step(st, i, step)
        await self._finish(st, body)
        # returning lets aiohttp write the chunked terminator in its own write, after
        # [DONE], as uvicorn does at the end of a StreamingResponse
        return resp

    async def _fault(self, request, st: _Stream, fault: Fault) -> bool:
        """The scripted fault at this step; True when it ended the response."""
        resp = st.resp
        if fault.kind == "stall":
            await asyncio.sleep(fault.stall_s)
            st.shift_ns += int(fault.stall_s * 1e9)
            return False
        if fault.kind == "malformed":
            await resp.write(b'data: {"choices": [{"index": 0, "delta": {"content": "oops"\n\n')
        elif fault.kind == "truncate":
            pass  # a clean end of the HTTP body without [DONE]
        elif fault.kind in ("disconnect", "die"):
            if fault.kind == "die" and self.s.allow_exit:
                os._exit(3)
            request.transport.abort()
        elif fault.kind == "error_event":
            await resp.write(_event({"error": {"object": "error", "message": "injected generation error",
                                               "type": "InternalServerError", "code": 500}}))
            await resp.write(b"data: [DONE]\n\n")
        else:
            return False
        return True

    async def _step(self, st: _Stream, i: int, step: Any) -> None:
        """One decode step: wait until it is due, then write its chunk (or hold it)."""
        cfg, em = st.cfg, st.em
        if cfg.cost_model and i > 0:
            # the step's cost depends on the batch running when it starts
            st.sched_ns += int(cfg.step_s(self.s.active) * 1e9)
        due_ns = em.t_arrival_ns + st.shift_ns + (int(cfg.ttft_s * 1e9) + st.sched_ns if cfg.cost_model
                                                  else int(step.t_s * 1e9))
        delay = (due_ns - perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        data = _event({**st.head, "choices": [st.choice(i, step)]})
        # With a step-cost model the engine is the model: a step is ready when its schedule
        # says, however late a loaded machine lets this loop write it (vLLM's engine
        # clock likewise keeps its own time when the API server falls behind).
        em.produced_ns.append(due_ns if cfg.cost_model else perf_counter_ns())
        if st.role:
            if cfg.role_with_first or cfg.buffer_output:
                data = st.role + data  # one TCP write
            else:
                await st.resp.write(st.role)
            st.role = b""
        em.tokens.append(step.tokens)
        if cfg.buffer_output:
            st.held.append(data)
        else:
            em.emit_ns.append(perf_counter_ns())
            await st.resp.write(data)
        st.tok += step.tokens
        if i > 0 and st.p.k > 0:
            self.s.count_step(st.engine, st.p.k, step.reported)

    async def _finish(self, st: _Stream, body: dict) -> None:
        """The held chunks (buffer_output), the usage chunk, [DONE]."""
        cfg, em, resp, tok = st.cfg, st.em, st.resp, st.tok
        if st.held:
            now = perf_counter_ns()
            em.emit_ns.extend([now] * len(st.held))
            await resp.write(b"".join(st.held))
        em.spec = st.p.spec_payload()
        if cfg.shape == sglang.SHAPE:  # its last event always carries the request's meta_info
            info = sglang.meta_info(st.head["id"], _prompt_tokens(body), tok, em.spec, em.t_arrival_ns)
            await resp.write(_event({**st.head, "choices": [], "meta_info": info}))
        elif (body.get("stream_options") or {}).get("include_usage"):
            pt = _prompt_tokens(body)
            usage: dict[str, Any] = {**st.head, "choices": [], "usage": {"prompt_tokens": pt, "total_tokens": pt + tok,
                                                         "completion_tokens": tok}}
            metrics: dict = _timing(em, tok) if cfg.per_request_metrics else {}
            if em.spec and cfg.spec_shape == "current":
                metrics["speculative_decoding"] = em.spec
            if metrics:
                usage["metrics"] = metrics
            await resp.write(_event(usage))
        await resp.write(b"data: [DONE]\n\n")
        if cfg.eof_gap_s > 0:
            await asyncio.sleep(cfg.eof_gap_s)


@dataclass
class _Stream:
    """One streamed response while it is written."""

    resp: web.StreamResponse
    cfg: FakeConfig
    em: Emission
    p: Plan
    chat: bool
    ids_on: bool  # the request asked for token ids
    ids_field: str  # the choice's field that holds them (token_ids; output_ids in the SGLang shape)
    prompt_ids: list[int] | None  # sent once, when the request asked for token ids
    affected: bool  # wrong_after / tie_after touch this prompt
    head: dict
    engine: int  # which of the fake's engines counts this request's steps
    role: bytes = b""  # the chat role chunk, until it is written
    shift_ns: int = 0  # a stall delays everything after it
    held: list[bytes] = field(default_factory=list)  # buffer_output: everything waits for the last step
    tok: int = 0
    sched_ns: int = 0  # with a step-cost model: the decode steps so far, from the first token

    def choice(self, i: int, step: Any) -> dict:
        ids = [output_id(self.cfg, pos, self.affected) for pos in range(self.tok, self.tok + step.tokens)]
        text = "".join(f" w{t}" for t in ids)
        last = i == len(self.p.steps) - 1
        choice: dict = {"index": 0}
        if self.chat:
            choice["delta"] = {"content": text}
        else:
            choice["text"] = text
        choice.update({"logprobs": None, "finish_reason": "length" if last else None})
        if self.ids_on:
            choice[self.ids_field] = ids
            if i == 0 and not self.chat and self.prompt_ids is not None:
                choice["prompt_token_ids"] = self.prompt_ids
        if last and self.cfg.spec_shape == "legacy" and self.p.legacy_payload():
            choice["speculative_decoding_stats"] = self.p.legacy_payload()
        return choice


def _timing(em: Emission, tokens: int) -> dict:
    """vLLM's per-request timing fields, exact for this fake: its "engine" produced step i
    at ``produced_ns[i]`` (scheduling is the arrival; there is no queue)."""
    p = em.produced_ns
    if not p:
        return {}
    gen_ms = (p[-1] - p[0]) / 1e6
    out = {"time_to_first_token_ms": (p[0] - em.t_arrival_ns) / 1e6, "generation_time_ms": gen_ms,
           "queue_time_ms": 0.0}
    if tokens > 1:
        out["mean_itl_ms"] = gen_ms / (tokens - 1)
    if p[-1] > em.t_arrival_ns:  # vLLM: all tokens over scheduled -> last token
        out["tokens_per_second"] = tokens / ((p[-1] - em.t_arrival_ns) / 1e9)
    return out


def _event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


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
