"""CI gates: absolute, noise-aware relative, missing/failed arms, exit codes, JUnit, summaries."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import xmlschema
import yaml
from tests.helpers.runfactory import DEFAULT_ARMS, make_run

from speedbench.cli import main
from speedbench.errors import UsageError
from speedbench.report.gate import evaluate_gates, exit_code, load_gates
from speedbench.report.gate_files import junit_xml
from speedbench.results import SCHEMA_VERSION
from speedbench.results.loader import load_run
from speedbench.scenario import GateSpec

XSD = Path(__file__).resolve().parents[2] / "data" / "junit.xsd"
GOOD_GATES = [
    {"metric": "speedup", "arm": "eagle3.1", "concurrency": 1, "min": 1.5},
    {"metric": "acceptance_length", "min": 2.5},
    {"metric": "error_rate", "max": 0.0},
    {"metric": "per_user_tps", "arm": "baseline", "min": 10},
    {"metric": "output_tps", "max": 1e6},
]


def scaled_arms(factor: float, al_delta: float = 0.0) -> list[dict]:
    """The default arms with eagle3.1 slower by ``factor``; same seed = same noise draws."""
    arms = copy.deepcopy(DEFAULT_ARMS)
    arms[2]["speedup"] = {c: s * factor for c, s in arms[2]["speedup"].items()}
    arms[2]["al"] += al_delta
    return arms


def write_gates(path: Path, gates: list[dict]) -> str:
    path.write_text(yaml.safe_dump(gates))
    return str(path)


def statuses(results) -> list[str]:
    return [r.status for r in results]


def test_absolute_pass(tmp_path):
    rd = make_run(tmp_path, gates=GOOD_GATES)
    results = evaluate_gates(load_run(rd.path), load_gates(load_run(rd.path)))
    # one row for the named arm/concurrency, 6 speculative rows for AL, 9 rows each for the rest
    assert len(results) == 1 + 6 + 9 + 3 + 9
    assert set(statuses(results)) == {"pass"} and exit_code(results) == 0
    assert main(["gate", str(rd.path)]) == 0


def test_absolute_fail(tmp_path, capsys):
    rd = make_run(tmp_path, error_arms={"eagle3": 1})
    gates = write_gates(tmp_path / "g.yaml", [{"metric": "speedup", "arm": "eagle3.1", "concurrency": 1, "min": 2.5},
                                             {"metric": "error_rate", "max": 0.01}])
    assert main(["gate", str(rd.path), "--gates", gates]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "< min 2.5" in out
    results = evaluate_gates(load_run(rd.path), load_gates(load_run(rd.path), gates))
    failed = [(r.gate.metric, r.arm, r.concurrency) for r in results if r.status == "fail"]
    assert failed == [("speedup", "eagle3.1", 1), ("error_rate", "eagle3", 1), ("error_rate", "eagle3", 4),
                      ("error_rate", "eagle3", 16)]


def test_relative_drop_within_noise_passes(tmp_path):
    base = load_run(make_run(tmp_path / "a", seed=3).path)
    cur = load_run(make_run(tmp_path / "b", seed=3, arms=scaled_arms(0.97)).path)
    gates = [GateSpec(metric="speedup", arm="eagle3.1", max_regression=0.02),
             GateSpec(metric="per_user_tps", arm="eagle3.1", max_regression=0.02)]
    results = evaluate_gates(cur, gates, base)
    for r in results:
        b, c = base.row(r.arm, r.concurrency), cur.row(r.arm, r.concurrency)
        key = "speedup_mean" if r.gate.metric == "speedup" else "per_user_tps_mean"
        assert c.cell(key) < b.cell(key) * 0.98  # the point estimate did drop by more than 2% ...
        assert r.status == "pass", r.message  # ... but the CI says it may be noise
        assert "within noise" in r.message
    assert exit_code(results) == 0


def test_relative_real_drop_fails(tmp_path):
    base_rd = make_run(tmp_path / "a", seed=3)
    cur_rd = make_run(tmp_path / "b", seed=3, arms=scaled_arms(0.8, al_delta=-0.6))
    gates = write_gates(tmp_path / "g.yaml", [
        {"metric": "speedup", "arm": "eagle3.1", "max_regression": 0.05},
        {"metric": "acceptance_length", "arm": "eagle3.1", "max_regression": 0.05},
        {"metric": "speedup", "arm": "eagle3", "max_regression": 0.05},  # unchanged arm: passes
    ])
    results = evaluate_gates(load_run(cur_rd.path), load_gates(load_run(cur_rd.path), gates), load_run(base_rd.path))
    assert [r.status for r in results if r.arm == "eagle3.1"] == ["fail"] * 6
    assert [r.status for r in results if r.arm == "eagle3"] == ["pass"] * 3
    assert "regression" in results[0].message and "below the limit" in results[0].message
    assert main(["gate", str(cur_rd.path), "--gates", gates, "--baseline-run", str(base_rd.path)]) == 1


def test_relative_error_rate_uses_wilson(tmp_path):
    base = load_run(make_run(tmp_path / "a", seed=1).path)
    few = load_run(make_run(tmp_path / "b", seed=1, error_arms={"eagle3": 1}).path)  # 1/12 errors
    many = load_run(make_run(tmp_path / "c", seed=1, error_arms={"eagle3": 6}).path)  # 6/12 errors
    gate = [GateSpec(metric="error_rate", arm="eagle3", concurrency=1, max_regression=0.05)]
    assert statuses(evaluate_gates(few, gate, base)) == ["pass"]
    assert statuses(evaluate_gates(many, gate, base)) == ["fail"]


def test_relative_without_baseline_is_skipped(tmp_path):
    rd = make_run(tmp_path, gates=[{"metric": "speedup", "arm": "eagle3.1", "max_regression": 0.05}])
    results = evaluate_gates(load_run(rd.path), load_gates(load_run(rd.path)))
    assert statuses(results) == ["skip"] * 3
    # beside a check that was made, a skip does not fail the gate
    both = write_gates(tmp_path / "g.yaml", [{"metric": "speedup", "arm": "eagle3.1", "max_regression": 0.05},
                                            {"metric": "speedup", "arm": "eagle3.1", "min": 1.0}])
    assert main(["gate", str(rd.path), "--gates", both]) == 0


def test_every_check_skipped_is_nothing_checked(tmp_path, capsys):
    """Relative gates alone, without a baseline run that has their points, check nothing:
    never "gates passed" (docs/gates.md: a gate never passes for want of data)."""
    rd = make_run(tmp_path / "a", gates=[{"metric": "speedup", "arm": "eagle3", "max_regression": 0.05}])
    md = tmp_path / "gate.md"
    assert main(["gate", str(rd.path), "--summary-md", str(md)]) == 2
    out, err = capsys.readouterr()
    assert "gates passed" not in out and "NOTHING CHECKED" in out
    assert "nothing was checked: all 3 checks were skipped" in err and "no --baseline-run was given" in err
    assert "fix: pass --baseline-run" in err
    assert md.read_text().startswith("## speedbench gate NOTHING CHECKED")  # written all the same
    other = make_run(tmp_path / "b", arms=[DEFAULT_ARMS[0], DEFAULT_ARMS[2]])  # no eagle3 rows
    assert main(["gate", str(rd.path), "--baseline-run", str(other.path)]) == 2
    err = capsys.readouterr().err
    assert f"baseline run {other.path} has no usable row for any gated point" in err


@pytest.mark.parametrize(("text", "line", "says"), [
    ("- {metric: speedup, arm: eagle3, mni: 1.5}\n", 1, "[0].mni: unknown key 'mni' (did you mean 'min'?)"),
    ("- {metric: speedup, min: 1}\n- {metric: speedpu, min: 1.5}\n", 2, "(did you mean 'speedup'?)"),
    ("gates:\n  - {metric: speedup, min: 1}\n  - {metric: speedup, arm: eagle31, min: 1}\n", 3,
     "gates[1].arm: no arm named 'eagle31' (did you mean 'eagle3.1'?)"),
    ("gate:\n  - {metric: speedup, min: 1}\n", 1, "unknown key 'gate' (did you mean 'gates'?)"),
    ("- {metric: speedup}\n", 1, "a gate needs 'min', 'max' or 'max_regression'"),
    ("- {metric: speedup, min: 1}\n- {metric: speedup, min: 1, min: 2}\n", 2, "duplicate key 'min'"),
])
def test_gates_file_errors_read_like_a_scenarios(tmp_path, capsys, text, line, says):
    rd = make_run(tmp_path)
    gates = tmp_path / "g.yaml"
    gates.write_text(text)
    assert main(["gate", str(rd.path), "--gates", str(gates)]) == 2
    err = capsys.readouterr().err
    assert f"{gates}:{line}" in err and says in err and "fix:" in err, err
    assert "errors.pydantic.dev" not in err and "type=" not in err  # never pydantic's own text


def test_missing_and_failed_arms_fail(tmp_path):
    rd = make_run(tmp_path, failed_arms=("eagle3",))
    run = load_run(rd.path)
    results = evaluate_gates(run, [GateSpec(metric="speedup", min=1.0)])
    assert [r.status for r in results if r.arm == "eagle3"] == ["fail"] * 3
    assert "arm failed" in next(r.message for r in results if r.arm == "eagle3")
    results = evaluate_gates(run, [GateSpec(metric="speedup", arm="medusa", min=1.0)])
    assert statuses(results) == ["fail"] and "medusa has no results" in results[0].message
    results = evaluate_gates(run, [GateSpec(metric="speedup", arm="eagle3.1", concurrency=64, min=1.0)])
    assert statuses(results) == ["fail"] and "concurrency 64" in results[0].message
    # an arm of the scenario that never made it into the summary
    summary = json.loads(rd.summary_path.read_text())
    summary["rows"] = [r for r in summary["rows"] if r["arm"] != "eagle3"]
    rd.write_summary(summary)
    results = evaluate_gates(load_run(rd.path), [GateSpec(metric="acceptance_length", min=1.0)])
    assert any(r.status == "fail" and "eagle3 has no results" in r.message for r in results)


def test_usage_errors_exit_2(tmp_path):
    rd = make_run(tmp_path)
    bad = write_gates(tmp_path / "bad.yaml", [{"metric": "latency", "min": 1}])
    assert main(["gate", str(rd.path), "--gates", bad]) == 2
    nobound = write_gates(tmp_path / "nobound.yaml", [{"metric": "speedup"}])
    assert main(["gate", str(rd.path), "--gates", nobound]) == 2
    assert main(["gate", str(rd.path)]) == 2  # the scenario has no gates
    assert main(["gate", str(tmp_path / "nope"), "--gates", bad]) == 2
    good = write_gates(tmp_path / "good.yaml", [{"metric": "speedup", "min": 1}])
    assert main(["gate", str(rd.path), "--gates", str(tmp_path / "missing.yaml")]) == 2
    summary = json.loads(rd.summary_path.read_text())
    summary["schema_version"] = SCHEMA_VERSION + 1
    rd.summary_path.write_text(json.dumps(summary))
    assert main(["gate", str(rd.path), "--gates", good]) == 2
    with pytest.raises(UsageError, match="newer"):
        load_run(rd.path)


def test_junit_xml_validates_and_summaries(tmp_path, monkeypatch):
    base = make_run(tmp_path / "a", seed=3)
    cur = make_run(tmp_path / "b", seed=3, arms=scaled_arms(0.8), failed_arms=())
    gates = write_gates(tmp_path / "g.yaml", [
        {"metric": "speedup", "arm": "eagle3.1", "concurrency": 1, "min": 1.5},  # pass
        {"metric": "speedup", "arm": "eagle3.1", "max_regression": 0.05},  # fail
        # fail, hostile text (in a variant: an unknown arm is a gates-file error, exit 2)
        {"metric": "speedup", "arm": "eagle3.1", "variant": "ghost\x01<&>", "min": 1.0},
    ])
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    step = tmp_path / "step.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    code = main(["gate", str(cur.path), "--gates", gates, "--baseline-run", str(base.path), "--junit", str(junit),
                 "--summary-md", str(summary)])
    assert code == 1
    schema = xmlschema.XMLSchema(str(XSD))
    schema.validate(str(junit))
    doc = schema.to_dict(str(junit))
    assert doc["@tests"] == 5 and doc["@failures"] == 4 and doc["@skipped"] == 0
    cases = doc["testsuite"][0]["testcase"]
    assert sum("failure" in c for c in cases) == 4
    assert any("ghost" in c["@name"] for c in cases)
    md = summary.read_text()
    assert md.startswith("## speedbench gate FAILED")
    assert "ghost" in md and "\\<&>" in md  # plain Markdown: "<" backslash-escaped, no entities
    assert step.read_text().startswith("earlier step\n## speedbench gate FAILED")


def test_junit_skipped_validates(tmp_path):
    rd = make_run(tmp_path)
    run = load_run(rd.path)
    results = evaluate_gates(run, [GateSpec(metric="speedup", max_regression=0.1), GateSpec(metric="speedup", min=1)])
    xml = junit_xml(results, run, 0.25)
    xmlschema.XMLSchema(str(XSD)).validate(xml)
    assert xml.count("<skipped") == 6
