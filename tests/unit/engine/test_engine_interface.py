"""The Engine interface with real code on both sides: vLLM's engine reading a real vLLM
0.32 scrape (tests/data/prometheus/) and a stream in vLLM 0.32's shape through the
client, the run folder's counter deltas read through it, the plan, the doctor and the
drift report asking the engine a scenario names, and every member of the interface
called by product code outside engine/ (the whole run through a stand-in engine is
tests/integration/test_stand_in_engine.py)."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

import pytest
from tests.helpers.fake_engine import FakeEngine

from speedbench.client.extensions import PLAIN
from speedbench.client.sse import consume as _consume
from speedbench.doctor import Host, run_checks
from speedbench.engine import engine_for, engine_for_saved
from speedbench.engine.vllm import VllmEngine
from speedbench.errors import ScenarioError
from speedbench.records import PointKey, RequestRecord
from speedbench.results import RunDir
from speedbench.run.plan import build_plan
from speedbench.scenario import load_scenario, resolved_dict


def checks_of(sc, *args, **kw):
    """The doctor's checks of the run ``sc`` plans (the doctor reads the plan)."""
    return run_checks(build_plan(sc), *args, **kw)

ROOT = Path(__file__).resolve().parents[3]
REAL_SCRAPE = (ROOT / "tests" / "data" / "prometheus" / "vllm-0.32-cpu-eagle3.txt").read_text()
CPU_TINY = ROOT / "scenarios" / "cpu_tiny.yaml"
STAND_IN = "server.engine=tests.helpers.fake_engine:FakeEngine"


def test_vllm_reads_a_real_vllm_scrape():
    c = VllmEngine().spec_counters(REAL_SCRAPE)
    assert (c.drafts, c.draft_tokens, c.accepted, c.per_position) == (434.0, 1302.0, 850.0, [325.0, 280.0, 245.0])
    # every series is kept with its _created time, so a delta can tell a restart from a count
    assert all(created is not None for _, created, _, _ in c.series.values())
    settled = [ln for ln in REAL_SCRAPE.splitlines() if ln.startswith(VllmEngine().settle_prefixes)]
    assert any(ln.startswith("vllm:spec_decode_num_drafts_total") for ln in settled)


def _grown(text: str, by: float) -> str:
    """The same scrape later: every spec-decode counter ``by`` higher."""
    return re.sub(r"^(vllm:spec_decode_\w+_total\{[^}]*\}) (\S+)$", lambda m: f"{m[1]} {float(m[2]) + by}",
                  text, flags=re.M)


def test_a_run_folders_counter_deltas_are_read_through_the_engine(tmp_path):
    rd = RunDir.create(tmp_path, "s")
    key = PointKey("eagle3", 1, "")
    rd.save_prometheus(key, REAL_SCRAPE, _grown(REAL_SCRAPE, 10.0), 0)
    d = rd.prometheus_delta(key, VllmEngine().spec_counters)
    assert d is not None and (d.drafts, d.draft_tokens, d.accepted) == (10.0, 10.0, 10.0)
    assert d.per_position == [10.0, 10.0, 10.0] and not d.warnings


VLLM_STREAM = [  # vLLM 0.32's shape: token ids per chunk, metrics beside the final usage
    b'data: {"choices":[{"index":0,"delta":{"content":"ab"},"token_ids":[5,6]}]}\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"cde"},"token_ids":[7,8,9]}]}\n',
    (b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5},"metrics":{'
     b'"generation_time_ms":12.5,"time_to_first_token_ms":4.0,"speculative_decoding":{"num_spec_steps":2,'
     b'"num_accepted_draft_tokens":3,"num_draft_tokens":6,"acceptance_histogram":[0,1,1,0]}}}\n'),
    b"data: [DONE]\n",
]


class _Reads:
    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines

    async def iter_any(self):
        for line in self.lines:
            yield line


def _consumed(stream) -> RequestRecord:
    rec = RequestRecord(arm="a", concurrency=1, prompt_index=0, prompt_id="p0")
    asyncio.run(_consume(_Reads(VLLM_STREAM), rec, stream=stream))
    return rec


def test_the_client_reads_vllms_stream_through_the_engine():
    rec = _consumed(VllmEngine())
    assert rec.ok and rec.chunk_tokens == [2, 3] and rec.output_tokens == 5
    spec = rec.spec
    assert (spec.num_spec_steps, spec.num_accepted_tokens, spec.acceptance_histogram) == (2, 3, [0, 1, 1, 0])
    assert rec.engine is not None and rec.engine.generation_ms == 12.5
    plain = _consumed(PLAIN)
    assert plain.ok and plain.spec is None and plain.engine is None  # plain OpenAI knows none of vLLM's figures


def test_the_plan_holds_the_engine_the_scenario_names():
    sc = load_scenario(CPU_TINY)
    plan = build_plan(sc)
    assert isinstance(plan.engine, VllmEngine) and engine_for(sc) is plan.engine
    assert [ap.launch.argv for ap in plan.arms] == [plan.engine.launch_spec(sc, a).argv for a in sc.arms]
    assert "engine" not in resolved_dict(sc)["server"]  # the default stays unwritten
    stand_in = build_plan(load_scenario(CPU_TINY, [STAND_IN]))
    assert isinstance(stand_in.engine, FakeEngine)
    assert all("speedbench.testing.fake_server" in ap.launch.argv for ap in stand_in.arms)
    assert resolved_dict(stand_in.scenario)["server"]["engine"] == STAND_IN.split("=", 1)[1]


def test_an_engine_that_cannot_be_loaded_is_a_scenario_error():
    with pytest.raises(ScenarioError, match="server.engine"):
        engine_for(load_scenario(CPU_TINY, ["server.engine=tests.helpers.fake_engine:Nothing"]))


def test_the_doctor_runs_the_engines_checks():
    host = Host(gpus=[], packages={}, env={}, engine_source=None, cpu={})
    vllm = [c.name for c in checks_of(load_scenario(CPU_TINY), host)]
    assert vllm[0] == "vllm"  # vLLM's own checks open the table
    stand_in = [c.name for c in checks_of(load_scenario(CPU_TINY, [STAND_IN]), host)]
    assert stand_in and "vllm" not in stand_in and "launch command" not in stand_in
    # vLLM's hardware rules (its AMX kernel, its NVFP4 rule) are vLLM's rows: the stand-in, a CPU
    # engine, gets no "cpu kernel" row (vLLM's, here with no vLLM installed, has no kind to check)
    assert "quantization" in vllm and not {"cpu kernel", "quantization"} & set(stand_in)


def test_a_saved_scenario_names_its_engine():
    assert isinstance(engine_for_saved(None), VllmEngine)  # older run folders: vLLM
    assert isinstance(engine_for_saved({"server": {"engine": STAND_IN.split("=", 1)[1]}}), FakeEngine)


def _members() -> list[str]:
    tree = ast.parse((ROOT / "speedbench" / "engine" / "base.py").read_text())
    proto = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    return [n.name if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else n.target.id
            for n in proto.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.AnnAssign))]


def test_every_member_of_the_interface_has_a_production_caller():
    """Called as ``.member`` by a module outside the engines' own folders (engine/vllm/,
    engine/base.py), or by the client, the load generator or the results reading it
    through their own protocols (client/extensions.py, loadgen/job.py)."""
    engine = ROOT / "speedbench" / "engine"
    sources = {f: f.read_text() for f in (ROOT / "speedbench").rglob("*.py")
               if not f.is_relative_to(engine / "vllm") and f != engine / "base.py"}
    uncalled = [m for m in _members() if not any(re.search(rf"\.{m}\b", s) for s in sources.values())]
    assert len(_members()) >= 12 and not uncalled, f"Engine members no product code calls: {uncalled}"
