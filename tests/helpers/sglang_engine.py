"""A stand-in engine that shares none of vLLM's names: the fake server's SGLang shape
(speedbench/testing/fake_sglang.py, ``--shape sglang``) behind the Engine interface
(speedbench/engine/base.py), written here with nothing from engine/vllm/. A scenario picks
it with ``server.engine: tests.helpers.sglang_engine:Engine``.

Where tests/helpers/fake_engine.py reads a wire that copies vLLM's, this one's every name
differs: ``sglang:`` counters, per-chunk ``output_ids`` asked with ``return_output_ids``, no
``usage`` object (the counts and the spec stats come in the last event's ``meta_info``), an
exact length asked as ``sampling_params.ignore_eos``. The server refuses vLLM's request
fields, so a run through this engine fails wherever generic code still names one
(tests/integration/test_sglang_stand_in.py). Its provenance keeps its own version key
(``sglang_version``) and its doctor checks are its own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys
from collections.abc import Mapping
from typing import Any


from speedbench.client.scrape import SpecCounters, counters_of, parse_prometheus, scrape
from speedbench.engine.base import CheckFn, LaunchSpec, flag_value
from speedbench.engine.preflight import Check, Context, Facts, Installed, collapse
from speedbench.engine.provenance import Draft, Provenance
from speedbench.records import RequestRecord, SpecStats
from speedbench.scenario import ArmSpec, Scenario
from speedbench.secrets import redact_argv, secret_values
from speedbench.engine.shared_provenance import run_facts

NAME, LABEL, VERSION = "sglang-standin", "SGLang stand-in", "0.5.0+standin"
SERVER = "speedbench.testing.fake_server"
LAUNCH = [sys.executable, "-m", SERVER, "--shape", "sglang"]
# the shape's counter names (testing/fake_sglang.py) -> SpecCounters' fields
COUNTERS = {"sglang:spec_verify_ct": "drafts", "sglang:spec_draft_token_num": "draft_tokens",
            "sglang:spec_accept_token_num": "accepted", "sglang:spec_accept_token_num_per_pos": "per_position"}
# meta_info's spec figures -> SpecStats' fields
SPEC_FIGURES = {"spec_verify_ct": "num_spec_steps", "spec_draft_token_num": "num_draft_tokens",
                "spec_accept_token_num": "num_accepted_tokens"}
# what only this engine's provenance.json entry holds, handed on in Provenance.engine_part
OWN_KEYS = ("sglang_version", "server_info")


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def check_launch(ctx: Context) -> list[Check]:
    """The stand-in's own doctor check: its server importable, every arm launched in its shape."""
    if importlib.util.find_spec(SERVER) is None:
        return [Check(NAME, "fail", f"{SERVER} is not importable", "install speedbench with its testing package")]
    rows = []
    for arm in ctx.arms:
        shape = flag_value(ctx.argv[arm.name], "--shape")
        ok = shape == "sglang"
        rows.append(Check(NAME, "ok" if ok else "fail", f"{SERVER} --shape {shape} ({VERSION})",
                          "" if ok else "launch the fake server with --shape sglang", arm.name))
    return collapse(rows, len(ctx.arms))


def check_drafts(ctx: Context) -> list[Check]:
    """Drafts are names to the stand-in: one row per speculative arm says which, and its k."""
    return [Check("draft", "ok", f"the stand-in serves draft {a.speculative_config.model!r} by name, "
                                 f"k={a.speculative_config.k}", "", a.name)
            for a in ctx.arms if a.speculative_config is not None]


class Engine:
    """The fake server's SGLang shape as an engine: every member of ``Engine``."""

    name = NAME
    token_ids_field = "return_output_ids"
    chunk_ids_field = "output_ids"
    settle_prefixes = ("sglang:spec_",)
    speculative_flag = "--speculative-config"
    not_system_args = frozenset({"speculative-config", "host", "port"})
    doctor_checks: tuple[tuple[str, CheckFn], ...] = ((NAME, check_launch),)
    draft_checks: CheckFn = staticmethod(check_drafts)  # type: ignore[assignment]

    def launch_spec(self, sc: Scenario, arm: ArmSpec, gpus: list[int] | None = None) -> LaunchSpec:
        model = sc.server.model or "fake-model"
        argv = [*LAUNCH, "--model", model]
        for key, value in {**sc.server.args, **arm.args}.items():
            argv += [f"--{key}", str(value)]
        if arm.speculative_config is not None:
            argv += self.speculative_args(arm.speculative_config.to_dict())
        return LaunchSpec(arm=arm.name, argv=argv, host=sc.server.host, gpus=gpus, base_url=arm.base_url,
                          served_model=None if arm.base_url else model)

    def provenance(self, sc: Scenario, arm: ArmSpec, launch: LaunchSpec, argv: list[str],
                   env: Mapping[str, str], base_url: str | None = None) -> Provenance:
        spec = arm.speculative_config
        clean = redact_argv(list(argv), secret_values({**os.environ, **env}))
        return self.read_provenance({
            "engine": NAME, "sglang_version": VERSION, "arm": arm.name,
            "launcher": "external" if launch.base_url else sc.server.launcher, "target": sc.server.model or "",
            "argv": clean, "command": shlex.join(clean), "base_url": base_url or launch.base_url or "",
            "speculative_config": spec.to_dict() if spec else None, "hardware": self.hardware(),
            **run_facts(sc), "server_info": {"shape": "sglang", "server": SERVER}})

    def read_provenance(self, saved: Mapping[str, Any]) -> Provenance:
        spec = saved.get("speculative_config") if isinstance(saved.get("speculative_config"), dict) else None
        hardware, data = saved.get("hardware"), saved.get("data")
        info = saved.get("server_info") if isinstance(saved.get("server_info"), dict) else {}
        return Provenance(
            engine=NAME, engine_label=LABEL, engine_version=str(saved.get("sglang_version") or ""),
            arm=str(saved.get("arm") or ""), launcher=str(saved.get("launcher") or ""),
            target=str(saved.get("target") or ""), argv=tuple(saved.get("argv") or ()),
            command=str(saved.get("command") or ""), base_url=str(saved.get("base_url") or ""),
            speculative=spec is not None, speculative_config=spec, method=str((spec or {}).get("method") or ""),
            k=(spec or {}).get("num_speculative_tokens"),
            draft=Draft(model=str(spec.get("model") or ""), method=str(spec.get("method") or "")) if spec else None,
            hardware=hardware if isinstance(hardware, dict) else {}, data=data if isinstance(data, dict) else {},
            speedbench_version=str(saved.get("speedbench_version") or ""),
            facts=(("serving shape", info.get("shape")),),
            notes=(("served by", f"{info.get('server')} (SGLang shape)"),),
            engine_part={k: saved[k] for k in OWN_KEYS if k in saved}, saved=dict(saved))

    def hardware(self) -> dict[str, Any]:
        return {"kind": "cpu", "summary": "the SGLang stand-in's host"}

    def gpus_per_server(self, argv: list[str], env: Mapping[str, str]) -> int:
        return 0  # the fake runs on the CPU

    def request_fields(self, exact_length: bool, templated: bool) -> dict[str, Any]:
        fields: dict[str, Any] = {"raw_prompt": True} if templated else {}
        return {**fields, "sampling_params": {"ignore_eos": True}} if exact_length else fields

    def usage_options(self, per_chunk: bool) -> dict[str, Any]:
        return {}  # meta_info comes with the last event, however asked

    def read_usage(self, obj: dict, usage: dict, rec: RequestRecord) -> None:
        return None  # the shape has no usage object: read_event reads meta_info

    def read_choice(self, choice: dict, rec: RequestRecord) -> None:
        return None  # a choice carries only text and output_ids (chunk_ids_field)

    def read_event(self, obj: dict, rec: RequestRecord) -> None:
        """The last event's ``meta_info``: the token counts, then the spec figures."""
        info = obj.get("meta_info")
        if not isinstance(info, dict):
            return
        for key, attr in (("prompt_tokens", "prompt_tokens"), ("completion_tokens", "output_tokens")):
            if _count(info.get(key)) is not None:
                setattr(rec, attr, info[key])
        figures = {attr: _count(info.get(key)) for key, attr in SPEC_FIGURES.items()}
        if all(v is not None for v in figures.values()):
            hist = info.get("spec_accept_histogram")
            mal = info.get("spec_accept_length")
            rec.spec = SpecStats(**figures,  # type: ignore[arg-type]  # all counts, checked above
                                 acceptance_histogram=[int(v) for v in hist] if isinstance(hist, list) else [],
                                 mean_acceptance_length=float(mal) if isinstance(mal, (int, float)) else None)

    def margin_request(self, model: str, prompt_ids: list[int], prefix: list[int], top: int) -> None:
        return None  # no check request: its points' divergences stay "not checked"

    def read_top(self, body: object) -> None:
        return None

    async def scrape(self, base_url: str) -> str:
        return await scrape(base_url)

    def spec_counters(self, text: str) -> SpecCounters:
        return counters_of(parse_prometheus(text, keep_created=True), COUNTERS)

    def speculative_args(self, config: dict[str, Any]) -> list[str]:
        return [self.speculative_flag, json.dumps(config)]

    def installed(self, sc: Scenario, facts: Facts) -> Installed:
        return Installed(launcher=sc.server.launcher, kind="cpu", dist=None, version=VERSION,
                         origin=f"the SGLang stand-in {VERSION}")
