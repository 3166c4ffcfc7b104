"""The scenario model: the bad-input table, overrides, and the published command."""

from __future__ import annotations

import json
import shlex
import textwrap
from pathlib import Path

import pytest
import yaml

from speedbench.cli import main
from speedbench.engine.vllm.command import args_to_argv, launch_spec
from speedbench.errors import ScenarioError
from speedbench.run.plan import build_plan
from speedbench.scenario import load_scenario, select_arms, validate_data

ROOT = Path(__file__).resolve().parents[3]

GOOD = """\
name: t
server:
  model: m
arms:
  - name: baseline
  - name: spec
    speculative_config: {method: eagle3, model: d, num_speculative_tokens: 3}
concurrency: [1, 4]
"""

# (case, yaml text, fragments the error must contain)
BAD = [
    ("yaml syntax", "name: t\narms: [\n  - name: x\n", ["YAML syntax error", ":3"]),
    ("unknown key", GOOD.replace("concurrency:", "concurency:"), ["unknown key 'concurency'", ":8", "fix"]),
    ("nested unknown key", GOOD.replace("  model: m", "  model: m\n  modle: x"), ["server.modle", ":4"]),
    ("wrong type", GOOD.replace("concurrency: [1, 4]", "concurrency: fast"), ["concurrency", "list", ":8"]),
    ("missing arm name", GOOD.replace("  - name: spec\n", "  - description: nameless\n"),
     ["arms[1].name", "Field required"]),
    ("duplicate arm names", GOOD.replace("name: spec", "name: baseline"), ["duplicate arm names", "baseline"]),
    ("concurrency zero", GOOD.replace("[1, 4]", "[0, 4]"), ["concurrency", "positive", "[0]"]),
    ("concurrency negative", GOOD.replace("[1, 4]", "[-2]"), ["concurrency", "positive"]),
    ("unknown launcher", GOOD.replace("  model: m", "  model: m\n  launcher: kubernetes"),
     ["server.launcher", "'local', 'docker' or 'external'"]),
    ("spec arm without model", GOOD.replace("model: d, ", ""), ["arms[1]", "needs a draft 'model'"]),
    ("spec arm without method", GOOD.replace("method: eagle3, ", ""), ["arms[1]", "method"]),
    ("top level not a mapping", "- a\n- b\n", ["top level must be a mapping"]),
    ("baseline not an arm", GOOD + "baseline: nope\n", ["baseline 'nope' is not an arm"]),
    ("duplicate top-level key", GOOD + "concurrency: [8]\n", ["duplicate key 'concurrency'", "line 8", "line 9", ":9"]),
    (
        "duplicate nested key",
        GOOD.replace("    speculative_config:", "    args: {a: 1}\n    args: {b: 2}\n    speculative_config:"),
        ["duplicate key 'args'", "line 7", "line 8", ":8"],
    ),
    ("duplicate flow key", GOOD.replace("method: eagle3,", "method: eagle3, method: ngram,"),
     ["duplicate key 'method'", "line 7"]),
]


@pytest.mark.parametrize("case,text,fragments", BAD, ids=[b[0] for b in BAD])
def test_bad_scenarios_exit_2_with_key_path(tmp_path, capsys, case, text, fragments):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    rc = main(["validate", str(f)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    assert str(f) in err
    for frag in fragments:
        assert frag in err, f"{case}: {frag!r} not in {err!r}"


def test_yaml_merge_keys_are_not_duplicates(tmp_path):
    f = tmp_path / "merge.yaml"
    f.write_text(
        "name: t\nserver: {model: m}\n"
        "x-common: &common {method: eagle3, model: d, num_speculative_tokens: 3}\n"
        "arms:\n  - name: baseline\n  - name: spec\n"
        "    speculative_config:\n      <<: *common\n      num_speculative_tokens: 5\n"
    )
    with pytest.raises(ScenarioError, match="x-common"):  # unknown top-level key, not a duplicate
        load_scenario(f)


def test_missing_file_exit_2(capsys):
    assert main(["validate", "nope/does-not-exist.yaml"]) == 2
    assert "scenario file not found" in capsys.readouterr().err


def test_good_scenario_validates(tmp_path, capsys):
    f = tmp_path / "good.yaml"
    f.write_text(GOOD)
    assert main(["validate", str(f)]) == 0
    assert "ok" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "scenarios").glob("*.yaml")))
def test_shipped_scenarios_validate(name):
    load_scenario(ROOT / "scenarios" / name)


def test_args_to_argv_conventions():
    argv = args_to_argv({"a-flag": True, "off": False, "none": None, "n": 4, "cfg": {"x": 1}, "many": [1, 2]})
    assert argv == ["--a-flag", "--n", "4", "--cfg", '{"x":1}', "--many", "1", "2"]


PUBLISHED = (
    "vllm serve nvidia/Kimi-K2.6-NVFP4 --trust-remote-code --tensor-parallel-size 4 "
    "--tool-call-parser kimi_k2 --enable-auto-tool-choice --reasoning-parser kimi_k2 "
    "--attention-backend tokenspeed_mla "
    "--speculative-config "
    """'{"model":"lightseekorg/kimi-k2.6-eagle3.1-mla","method":"eagle3","num_speculative_tokens":3}' """
    "--language-model-only"
)


def _flags(argv: list[str]) -> tuple[list[str], dict[str, object]]:
    """Split an argv into its positional prefix and a flag -> value mapping (JSON decoded)."""
    pos, flags, i = [], {}, 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--"):
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                val = argv[i + 1]
                try:
                    val = json.loads(val) if val.startswith("{") else val
                except ValueError:
                    pass
                flags[tok] = val
                i += 2
            else:
                flags[tok] = True
                i += 1
        else:
            pos.append(tok)
            i += 1
    return pos, flags


def test_kimi_dry_run_matches_published_command(capsys):
    rc = main(["run", str(ROOT / "scenarios/kimi_coding.yaml"), "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 0
    lines = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("vllm serve")]
    assert len(lines) == 2
    pub_pos, pub_flags = _flags(shlex.split(PUBLISHED))
    printed = {}
    for line in lines:
        pos, flags = _flags(shlex.split(line))
        # host/port are speedbench's own additions for reaching the server
        flags.pop("--host"), flags.pop("--port")
        printed["spec" if "--speculative-config" in flags else "base"] = (pos, flags)
    assert printed["spec"] == (pub_pos, pub_flags)
    base_flags = dict(pub_flags)
    del base_flags["--speculative-config"]
    assert printed["base"] == (pub_pos, base_flags)


def test_override_recorded_in_plan(capsys):
    path = str(ROOT / "scenarios/kimi_coding.yaml")
    sc = load_scenario(path, ["workload.max_tokens=256", "arms.eagle3.1.speculative_config.num_speculative_tokens=5"])
    assert sc.workload.max_tokens == 256
    assert sc.arm("eagle3.1").speculative_config.k == 5
    assert main(["run", path, "--dry-run", "--set", "workload.max_tokens=256"]) == 0
    out = capsys.readouterr().out
    assert "overrides: workload.max_tokens=256" in out
    assert "max_tokens=256" in out


def test_override_errors_are_usage_errors():
    with pytest.raises(ScenarioError, match="KEY.PATH=VALUE"):
        load_scenario(ROOT / "scenarios/kimi_coding.yaml", ["workload.max_tokens"])
    with pytest.raises(ScenarioError, match="no list item"):
        load_scenario(ROOT / "scenarios/kimi_coding.yaml", ["arms.nope.args.x=1"])
    with pytest.raises(ScenarioError, match="max_tokens"):
        load_scenario(ROOT / "scenarios/kimi_coding.yaml", ["workload.max_tokens=-1"])


def test_cpu_scenario_uses_module_entry_point():
    sc = load_scenario(ROOT / "scenarios/cpu_tiny.yaml")
    spec = launch_spec(sc, sc.arm("baseline"))
    assert spec.argv[:4] == ["python", "-m", "vllm.entrypoints.openai.api_server", "--model"]
    plan = build_plan(sc)
    # 5 arms + the A/A twin of the baseline, 3 concurrencies, 3 rounds of fresh servers
    assert [a.arm.name for a in plan.arms][:2] == ["baseline", "baseline-aa"]
    assert plan.rounds == 3 and plan.n_points == 18 and plan.n_launches == 18
    # one enumeration, in run order: arm by arm, variant, then concurrency
    first = plan.arms[0].arm.name
    assert plan.points(first) == [(first, c, v) for v in sc.variant_names for c in sc.concurrency]
    assert plan.points()[:len(plan.points(first))] == plan.points(first)
    assert plan.points()[0].label.startswith(f"{first} c=")


def test_sweep_expansion_names_and_values(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(GOOD + textwrap.dedent("""\
        workload: {num_prompts: 4, warmup: 1}
        """).replace("workload", "workload") )
    text = f.read_text().replace(
        "    speculative_config: {method: eagle3, model: d, num_speculative_tokens: 3}",
        "    speculative_config: {method: eagle3, model: d, num_speculative_tokens: 3}\n"
        "    sweep: {num_speculative_tokens: [1, 2], draft_models: [org/a, /x/b]}",
    )
    f.write_text(text)
    sc = load_scenario(f)
    names = [a.name for a in sc.arms]
    assert names == ["baseline", "spec-a-k1", "spec-a-k2", "spec-b-k1", "spec-b-k2"]
    a = sc.arm("spec-b-k2")
    assert a.speculative_config.to_dict() == {"method": "eagle3", "model": "/x/b", "num_speculative_tokens": 2}
    assert a.template == "spec" and a.sweep_values == {"draft": "/x/b", "k": 2}
    plan = build_plan(sc)
    assert plan.n_launches == 5
    assert plan.n_requests() == 5 * 2 * (4 + 1)


def test_typed_speculative_config_and_dotted_sweep_keys(tmp_path):
    """speculative_config is typed (k, method, model) yet passes vLLM's other keys through
    in the order written; a sweep may name any dotted key, the named axes are shorthand."""
    from speedbench.scenario import SpeculativeConfig

    cfg = SpeculativeConfig.model_validate({"model": "d", "method": "ngram", "prompt_lookup_max": 4})
    assert cfg.k is None and cfg.to_dict() == {"model": "d", "method": "ngram", "prompt_lookup_max": 4}
    assert list(cfg.with_value("num_speculative_tokens", 2).to_dict()) == ["model", "method", "prompt_lookup_max",
                                                                          "num_speculative_tokens"]
    with pytest.raises(ValueError):
        SpeculativeConfig.model_validate({"method": "eagle3", "num_speculative_tokens": 0})
    f = tmp_path / "s.yaml"
    f.write_text(GOOD.replace(
        "    speculative_config: {method: eagle3, model: d, num_speculative_tokens: 3}",
        "    speculative_config: {method: eagle3, model: d, num_speculative_tokens: 3}\n"
        "    sweep: {speculative_config.num_speculative_tokens: [1, 2], args.max-num-seqs: [8]}"))
    sc = load_scenario(f)
    assert [a.name for a in sc.arms] == ["baseline", "spec-k1-max-num-seqs8", "spec-k2-max-num-seqs8"]
    a = sc.arm("spec-k2-max-num-seqs8")
    assert a.speculative_config.k == 2 and a.args["max-num-seqs"] == 8
    assert a.sweep_values == {"k": 2, "max-num-seqs": 8}
    argv = launch_spec(sc, a).argv
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {"method": "eagle3", "model": "d",
                                                                        "num_speculative_tokens": 2}
    with pytest.raises(ScenarioError, match="unknown sweep key"):
        f.write_text(GOOD.replace("    speculative_config: {method: eagle3, model: d, num_speculative_tokens: 3}",
                                  "    speculative_config: {method: eagle3, model: d}\n    sweep: {env.X: [1]}"))
        load_scenario(f)


def test_a_gate_on_no_arm_is_a_scenario_error_and_arms_takes_its_gates_along():
    sc = load_scenario(ROOT / "scenarios" / "cpu_drift.yaml")  # gates on the sweep's expanded self-draft-k1/-k3
    data = yaml.safe_load((ROOT / "scenarios" / "cpu_tiny.yaml").read_text())
    data["gates"].append({"metric": "acceptance_length", "arm": "eagle31", "min": 2})
    with pytest.raises(ScenarioError, match=r"gates\[3\]\.arm: no arm named 'eagle31' \(did you mean 'eagle3.1'\?\)"):
        validate_data(data, "cpu_tiny.yaml")
    tiny = load_scenario(ROOT / "scenarios" / "cpu_tiny.yaml")
    assert any(g.arm == "self-draft" for g in tiny.gates)
    kept = select_arms(tiny, ["baseline", "eagle3.1"])
    assert [g.arm for g in kept.gates] == [None]  # the error-rate gate stays; self-draft's AL gate went with it
    assert {g.arm for g in select_arms(sc, ["self-draft"]).gates} == {"self-draft-k1", "self-draft-k3", None}
