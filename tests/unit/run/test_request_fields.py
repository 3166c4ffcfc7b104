"""The run builds its requests with its engine's fields (issue 57): on vLLM the timed
request and the readiness request hold ``ignore_eos`` and ``add_special_tokens: false``
and ask for usage once, as before; on an engine with no such fields they hold none."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from speedbench.client.extensions import PLAIN
from speedbench.client.http import stream_payload
from speedbench.engine.vllm import VllmEngine
from speedbench.loadgen import PointJob
from speedbench.records import PointKey, Prompt
from speedbench.run.context import Prepared
from speedbench.run.point import client_side, readiness_request
from speedbench.scenario import load_scenario
from speedbench.workload.base import Workload

ROOT = Path(__file__).resolve().parents[3]
PROMPT = Prompt(id="p0", turns=("Write a sort function.",))


class _Tokenizer:
    """Renders any conversation to one fixed, BOS-led text (what a chat template does)."""

    def apply_chat_template(self, messages, **kw) -> str:
        return "<s><|user|>\n" + messages[-1]["content"] + "\n<|assistant|>\n"


def _context(engine) -> SimpleNamespace:
    """What run/point.py reads of a RunContext to build requests."""
    sc = load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml",
                       ["workload.ignore_eos=true", "workload.chat_template=client"])
    return SimpleNamespace(scenario=sc, plan=SimpleNamespace(engine=engine),
                           prepared=Prepared({"": Workload(measured=[PROMPT], warmup=[])}, _Tokenizer()))


def _timed(engine) -> str:
    """The timed request's path and bytes, as the client sends them."""
    ctx, key = _context(engine), PointKey("baseline", 1, "")
    server = SimpleNamespace(model_name="m", base_url="http://127.0.0.1:1", api_key=None)
    builder, cfg = client_side(ctx, server, key, PointJob(key, [PROMPT]))
    path, body = builder.build(PROMPT, 0, [])
    return path + " " + json.dumps(stream_payload(body, cfg.stream))


def test_vllm_requests_are_as_before():
    w = _context(VllmEngine()).scenario.workload
    # the body's fields in the order the builder and the client wrote them before
    before = {"model": "m", "prompt": "<s><|user|>\nWrite a sort function.\n<|assistant|>\n",
              "add_special_tokens": False, "max_tokens": w.max_tokens, "temperature": w.temperature,
              "seed": w.seed, **({"top_p": w.top_p} if w.top_p is not None else {}), "ignore_eos": True,
              "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": False}}
    assert _timed(VllmEngine()) == "/v1/completions " + json.dumps(before)
    path, body = readiness_request(_context(VllmEngine()), "m")
    assert path == "/v1/completions" and body["add_special_tokens"] is False and body["ignore_eos"] is True


def test_a_plain_engine_adds_no_field():
    sent = json.loads(_timed(PLAIN).split(" ", 1)[1])
    assert not {"add_special_tokens", "ignore_eos"} & set(sent)
    assert sent["stream_options"] == {"include_usage": True}
    _, body = readiness_request(_context(PLAIN), "m")
    assert not {"add_special_tokens", "ignore_eos"} & set(body)
