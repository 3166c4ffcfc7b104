"""One streamed answer of the fake server, written as vLLM writes it: the headers at once,
the chat role chunk with the first token, each decode step's chunk when its schedule says
(or the scripted fault there), held chunks (buffer_output), the usage chunk with vLLM's
per-request timing and spec-decode fields, then [DONE]. And what the fake reads of a
request's body (its prompt text and length), which the plain answer reads too."""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

from aiohttp import web

from speedbench.testing import fake_sglang as sglang
from speedbench.testing.fake_state import Emission, ServerState
from speedbench.testing.fake_tokens import diverges, output_id, prompt_ids
from speedbench.testing.script import FakeConfig, Fault, Plan, plan


def last_text(body: dict) -> str:
    """The prompt's text (a chat's last message), where prompt markers and divergence are read."""
    if body.get("messages"):
        content = body["messages"][-1].get("content", "")
        return content if isinstance(content, str) else json.dumps(content)
    prompt = body.get("prompt", "")
    return prompt if isinstance(prompt, str) else json.dumps(prompt)


def prompt_tokens(body: dict) -> int:
    """The prompt's length as the fake counts it (words; a chat message adds 4)."""
    if "messages" in body:
        return sum(len(str(m.get("content", "")).split()) + 4 for m in body["messages"])
    return len(str(body.get("prompt", "")).split())


async def stream(s: ServerState, request: web.Request, body: dict, cfg: FakeConfig, fault: Fault | None,
                 em: Emission, chat: bool, seq: int) -> web.StreamResponse:
    """A streamed answer (``stream: true``) as vLLM writes it: the headers at once, the chat
    role chunk, each step's chunk when it is due (or the scripted fault), the usage chunk, [DONE]."""
    p: Plan = plan(cfg, body.get("max_tokens", body.get("max_completion_tokens")))
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    if not cfg.keep_alive:
        resp.force_close()
    # StreamResponse sends its headers now, as uvicorn does for vLLM's streaming
    # responses: the client sees them long before the first token.
    await resp.prepare(request)
    ids_request, ids_field = sglang.ids_fields(cfg.shape)
    ids_on = bool(body.get(ids_request))
    st = Stream(resp=resp, cfg=cfg, em=em, p=p, chat=chat, ids_on=ids_on, ids_field=ids_field,
                prompt_ids=prompt_ids(body) if ids_on and cfg.shape != sglang.SHAPE else None,
                affected=diverges(cfg, last_text(body)),
                head={"id": f"{'chatcmpl' if chat else 'cmpl'}-{seq}",
                      "object": "chat.completion.chunk" if chat else "text_completion",
                      "created": int(time.time()), "model": cfg.model},
                engine=seq % max(1, s.config.engines))
    # vLLM's chat role chunk (no output token) goes out when the first token is ready;
    # /v1/completions has none.
    # With return_token_ids vLLM sends the prompt's ids once: chat at the role chunk's top
    # level, completions in the first choice.
    first = {"prompt_token_ids": st.prompt_ids} if st.prompt_ids is not None else {}
    st.role = _event({**st.head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                              "logprobs": None, "finish_reason": None}], **first}) if chat else b""
    for i, step in enumerate(st.p.steps):
        if fault and i == fault.at and fault.kind != "http_500" and await _fault(s, request, st, fault):
            return resp
        await _step(s, st, i, step)
    await _finish(st, body)
    # returning lets aiohttp write the chunked terminator in its own write, after
    # [DONE], as uvicorn does at the end of a StreamingResponse
    return resp


async def _fault(s: ServerState, request: Any, st: Stream, fault: Fault) -> bool:
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
        if fault.kind == "die" and s.allow_exit:
            os._exit(3)
        request.transport.abort()
    elif fault.kind == "error_event":
        await resp.write(_event({"error": {"object": "error", "message": "injected generation error",
                                           "type": "InternalServerError", "code": 500}}))
        await resp.write(b"data: [DONE]\n\n")
    else:
        return False
    return True


async def _step(s: ServerState, st: Stream, i: int, step: Any) -> None:
    """One decode step: wait until it is due, then write its chunk (or hold it)."""
    cfg, em = st.cfg, st.em
    if cfg.cost_model and i > 0:
        # the step's cost depends on the batch running when it starts
        st.sched_ns += int(cfg.step_s(s.active) * 1e9)
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
        s.count_step(st.engine, st.p.k, step.reported)


async def _finish(st: Stream, body: dict) -> None:
    """The held chunks (buffer_output), the usage chunk, [DONE]."""
    cfg, em, resp, tok = st.cfg, st.em, st.resp, st.tok
    if st.held:
        now = perf_counter_ns()
        em.emit_ns.extend([now] * len(st.held))
        await resp.write(b"".join(st.held))
    em.spec = st.p.spec_payload()
    if cfg.shape == sglang.SHAPE:  # its last event always carries the request's meta_info
        info = sglang.meta_info(st.head["id"], prompt_tokens(body), tok, em.spec, em.t_arrival_ns)
        await resp.write(_event({**st.head, "choices": [], "meta_info": info}))
    elif (body.get("stream_options") or {}).get("include_usage"):
        pt = prompt_tokens(body)
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
class Stream:
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
