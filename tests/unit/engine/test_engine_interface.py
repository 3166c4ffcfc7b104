"""The Engine interface against a stand-in engine: the doctor, the plan and provenance
reach the engine through speedbench.engine.engine_for, so a second engine is one package
and one entry in ENGINES. vLLM itself must satisfy the same interface."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import speedbench.engine as engine
from speedbench.client.scrape import SpecCounters
from speedbench.doctor import base as doctor_base
from speedbench.engine.base import Engine, LaunchSpec
from speedbench.engine.vllm import VllmEngine
from speedbench.records import SpecStats
from speedbench.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]


class ToyEngine:
    """An engine that starts `toy-serve MODEL` and reports one fixed counter."""

    name = "toy"
    spec_metrics: tuple[str, ...] = ("toy:accepted",)
    settle_prefixes: tuple[str, ...] = ("toy:",)
    token_ids_field = ""

    def launch_spec(self, sc, arm, gpus=None) -> LaunchSpec:
        return LaunchSpec(arm=arm.name, argv=["toy-serve", sc.server.model or ""], gpus=gpus)

    def measurement_args(self, server, arm):
        return {}

    async def scrape(self, base_url: str) -> str:
        return "toy:accepted 3\n"

    def spec_counters(self, text: str) -> SpecCounters:
        return SpecCounters(accepted=float(text.split()[-1]))

    def read_spec(self, payload):
        return SpecStats(num_spec_steps=1, num_draft_tokens=2, num_accepted_tokens=int(payload["accepted"]))

    def provenance(self, sc, arm, launch, argv, env, base_url=None):
        return {"arm": arm.name, "engine": self.name, "argv": list(argv)}

    def hardware(self):
        return {"kind": "toy"}


def _uses(engine_obj: Engine) -> dict:
    """What a caller does with any engine, through the interface only."""
    sc = load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml")
    arm = sc.arms[0]
    launch = engine_obj.launch_spec(sc, arm, gpus=None)
    return {
        "launch": launch,
        "counters": engine_obj.spec_counters(asyncio.run(engine_obj.scrape("http://127.0.0.1:1"))),
        "provenance": engine_obj.provenance(sc, arm, launch, launch.argv, {}),
    }


def test_a_stand_in_engine_serves_every_caller(monkeypatch):
    toy = ToyEngine()
    monkeypatch.setattr(engine, "engine_for", lambda sc: toy)
    monkeypatch.setattr(doctor_base, "engine_for", lambda sc: toy)
    got = _uses(toy)
    assert got["launch"].argv[0] == "toy-serve" and got["counters"].accepted == 3
    assert got["provenance"]["engine"] == "toy"
    assert toy.read_spec({"accepted": 2}) == SpecStats(num_spec_steps=1, num_draft_tokens=2, num_accepted_tokens=2)
    sc = load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml")
    assert doctor_base.arm_argv(sc, sc.arms[0])[0] == "toy-serve"  # the doctor asks the engine


def test_vllm_is_the_engine_of_every_scenario():
    sc = load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml")
    eng = engine.engine_for(sc)
    assert isinstance(eng, VllmEngine) and engine.ENGINES["vllm"] is eng and eng.name == "vllm"
    launch = eng.launch_spec(sc, sc.arms[0])
    assert launch.argv[:2] == list(sc.server.command[:2])
    assert eng.token_ids_field == "return_token_ids"
    assert all(m.startswith("vllm:") for m in eng.spec_metrics)
    text = "vllm:spec_decode_num_drafts_total 4\nvllm:spec_decode_num_accepted_tokens_total 6\n"
    assert eng.spec_counters(text).accepted == 6


@pytest.mark.parametrize("payload", [{"num_drafts": 2, "num_draft_tokens": 6, "num_accepted_tokens": 5}])
def test_vllm_reads_its_own_spec_payload(payload):
    got = VllmEngine().read_spec(payload)
    assert got is not None and got.num_accepted_tokens == 5
