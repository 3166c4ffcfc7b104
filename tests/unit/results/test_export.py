"""speedbench export: vLLM bench-serve JSON checked against vLLM's own source, and our schema."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from speedbench.cli import main
from speedbench.engine.vllm import VllmEngine
from speedbench.results.exports import export_run, vllm_result
from speedbench.results.output_summary import OUTPUT_COLUMNS
from speedbench.records import RequestRecord, SpecStats
from speedbench.results.loader import load_run
from tests.helpers.runfactory import make_run


def _vllm_serve_source() -> Path:
    vllm = pytest.importorskip("importlib.util").find_spec("vllm")
    if vllm is None or not vllm.submodule_search_locations:
        pytest.skip("vLLM is not installed")
    path = Path(list(vllm.submodule_search_locations)[0]) / "benchmarks" / "serve.py"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return path


def vllm_fields() -> dict[str, set[str]]:
    """The keys ``vllm bench serve --save-result`` writes, read from vLLM's serve.py:

    always:   the result dict of a generation benchmark (minus what only --save-detailed
              keeps) and the result_json header keys (minus the ramp-up ones)
    optional: every other key the file may hold (spec_decode_*, ramp-up, ...)
    metrics:  names passed to process_one_metric (its keys are {mean,median,std,pNN}_<name>_ms)
    """
    tree = ast.parse(_vllm_serve_source().read_text())
    always, optional, metrics, detailed = set(), set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Name) and t.id == "result" and isinstance(node.value, ast.Dict):
                keys = {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
                (always if "failed" in keys else optional).update(keys)  # "failed": generation, not embedding
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and isinstance(t.slice, ast.Constant) \
                    and isinstance(t.slice.value, str):
                if t.value.id == "result_json":
                    (optional if t.slice.value.startswith("ramp_up") else always).add(t.slice.value)
                elif t.value.id == "result":
                    optional.add(t.slice.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "process_one_metric" \
                and node.args and isinstance(node.args[0], ast.Constant):
            metrics.add(node.args[0].value)
        if isinstance(node, ast.For) and isinstance(node.iter, ast.List) and isinstance(node.target, ast.Name) \
                and node.target.id == "field":
            detailed |= {e.value for e in node.iter.elts if isinstance(e, ast.Constant)}
    assert {"completed", "duration", "ttfts"} <= always and "spec_decode_acceptance_length" in optional
    assert {"ttft", "tpot", "itl", "e2el"} <= metrics
    return {"always": always - detailed, "optional": optional | detailed, "metrics": metrics}


def _stat_key(key: str, metrics: set[str]) -> bool:
    m = re.fullmatch(r"(mean|median|std|p\d+(?:\.\d+)?)_(.+)_ms", key)
    return bool(m and m.group(2) in metrics)


@pytest.fixture(scope="module")
def vllm_export(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    rd = make_run(root, concurrencies=(1, 4), n_prompts=6)
    out = root / "vllm"
    assert main([ "export", str(rd.path), "--format", "vllm", "--out", str(out)]) == 0
    return rd, out


def test_vllm_export_keys_are_vllm_serve_keys(vllm_export):
    fields = vllm_fields()
    rd, out = vllm_export
    files = sorted(out.glob("*.json"))
    assert len(files) == 3 * 2  # arms x concurrency levels
    for f in files:
        data = json.loads(f.read_text())
        # ours beside vLLM's: the outputs verdict, as `vllm bench serve --metadata KEY=VALUE` would add it
        assert set(OUTPUT_COLUMNS) <= set(data)
        unknown = [k for k in data if k not in fields["always"] | fields["optional"] | set(OUTPUT_COLUMNS)
                   and not _stat_key(k, fields["metrics"])]
        assert not unknown, f"{f.name}: keys vLLM does not write: {unknown}"
        missing = sorted(fields["always"] - set(data))
        assert not missing, f"{f.name}: vLLM keys missing: {missing}"
        for m in ("ttft", "tpot", "itl", "e2el"):
            for stat in ("mean", "median", "std", "p50", "p90", "p95", "p99"):
                assert isinstance(data[f"{stat}_{m}_ms"], float)
        speculative = not f.name.startswith("baseline")
        spec_keys = {k for k in fields["optional"] if k.startswith("spec_decode_")}
        assert (spec_keys <= set(data)) == speculative
        assert data["completed"] == 6 and data["failed"] == 0 and data["request_rate"] == "inf"
        assert data["max_concurrency"] in (1, 4) and data["model_id"] == "tiny/target"


def test_vllm_export_values(vllm_export):
    rd, out = vllm_export
    run = load_run(rd.path)
    data = json.loads((out / "eagle3__c4.json").read_text())
    row = run.row("eagle3", 4)
    # same definitions as ours: TTFT and E2E over completed requests; AL pooled over steps
    assert data["mean_ttft_ms"] == pytest.approx(row.ttft_ms_mean, rel=1e-9)
    assert data["duration"] == pytest.approx(3.0)  # the point's wall time (points.json)
    recs = [r for r in run.records if r.arm == "eagle3" and r.concurrency == 4]
    assert data["total_output_tokens"] == sum(r.n_output for r in recs)
    assert data["output_throughput"] == pytest.approx(data["total_output_tokens"] / 3.0)
    steps = sum(r.spec.num_spec_steps for r in recs)
    acc = sum(r.spec.num_accepted_tokens for r in recs)
    assert data["spec_decode_acceptance_length"] == pytest.approx(1 + acc / steps)
    assert data["spec_decode_acceptance_rate"] == pytest.approx(100 * acc / (3 * steps))  # a percent, as vLLM


def test_vllm_result_known_answer():
    # one request: sent at 0, tokens at 100 ms (1), 200 ms (2), 400 ms (1); [DONE] at 500 ms
    ms = 1_000_000
    r = RequestRecord(arm="a", concurrency=1, prompt_index=0, prompt_id="p", t_sent_ns=0, t_end_ns=500 * ms,
                      chunk_ns=[100 * ms, 200 * ms, 400 * ms], chunk_tokens=[1, 2, 1], prompt_tokens=10,
                      output_tokens=4, spec=SpecStats(2, 4, 2, [1, 0, 1]))
    bad = RequestRecord(arm="a", concurrency=1, prompt_index=1, prompt_id="q", t_sent_ns=0, t_end_ns=ms,
                        error="http_status")
    res = vllm_result([r, bad], wall_s=2.0, percentiles=[50, 99.9], header={"label": "a"})
    assert res["completed"] == 1 and res["failed"] == 1
    assert res["mean_ttft_ms"] == pytest.approx(100)
    assert res["mean_tpot_ms"] == pytest.approx((500 - 100) / 3)  # vLLM: (latency - ttft) / (n - 1)
    assert res["mean_itl_ms"] == pytest.approx(150)  # per chunk: gaps 100 and 200
    assert res["p99.9_e2el_ms"] == pytest.approx(500)  # vLLM spells 99.9 with its dot
    assert res["request_throughput"] == pytest.approx(0.5)
    assert res["total_token_throughput"] == pytest.approx(14 / 2.0)
    assert res["spec_decode_acceptance_length"] == pytest.approx(2.0)
    assert res["spec_decode_per_position_acceptance_rates"] == [0.5, 0.5]
    assert res["max_output_tokens_per_s"] == 4 and res["max_concurrent_requests"] == 1


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_own_schema_exports(tmp_path, fmt):
    rd = make_run(tmp_path, concurrencies=(1,), n_prompts=4)
    out = tmp_path / "out"
    files = export_run(load_run(rd.path), fmt, out, VllmEngine().spec_counters)
    names = {p.name for p in files}
    run = load_run(rd.path)
    if fmt == "json":
        assert names == {"summary.json"}
        assert json.loads((out / "summary.json").read_text())["rows"][0]["arm"] == "baseline"
        return
    assert {f"summary.{fmt}", f"categories.{fmt}"} <= names
    df = pd.read_csv(out / "summary.csv") if fmt == "csv" else pd.read_parquet(out / "summary.parquet")
    assert list(df["arm"]) == [r.arm for r in run.rows]
    assert df["per_user_tps_mean"].tolist() == pytest.approx([r.per_user_tps_mean for r in run.rows])
    if fmt == "parquet":
        assert len(pd.read_parquet(out / "records.parquet")) == len(run.records)


def test_export_default_folder_and_bad_run(tmp_path, capsys):
    rd = make_run(tmp_path, concurrencies=(1,), n_prompts=2)
    assert main(["export", str(rd.path), "--format", "json"]) == 0
    assert (rd.path / "export" / "json" / "summary.json").exists()
    assert main(["export", str(tmp_path / "nope"), "--format", "vllm"]) == 2


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_exports_carry_the_interval_the_report_shows(tmp_path, fmt):
    """One interval per point: an export's headline columns are the figures the report's
    table shows, for a run folder written before they existed too (derived on read)."""
    from speedbench.metrics.headline import HEADLINE_KEYS
    from speedbench.report import tables

    rd = make_run(tmp_path, concurrencies=(1,), n_prompts=4)
    summary = json.loads(rd.summary_path.read_text())
    for r in summary["rows"]:
        for k in HEADLINE_KEYS:
            r.pop(k, None)
    rd.write_summary(summary)
    out = tmp_path / "out"
    run = load_run(rd.path)
    export_run(run, fmt, out, VllmEngine().spec_counters)
    if fmt == "json":
        rows = json.loads((out / "summary.json").read_text())["rows"]
    else:
        df = pd.read_csv(out / "summary.csv") if fmt == "csv" else pd.read_parquet(out / "summary.parquet")
        rows = df.to_dict("records")
    shown = {t.arm: t.rows[0] for t in tables.speedup_tables(run)}
    for r in rows:
        if r["arm"] in shown:
            s = shown[r["arm"]]
            # summary.json keeps the registry's keys; the tables name the headline plainly (formats.table_rows)
            names = ("speedup_headline_mean", "speedup_headline_ci_low", "speedup_headline_ci_high",
                     "speedup_headline_clock") if fmt == "json" else ("speedup", "speedup_ci_low", "speedup_ci_high",
                                                                       "speedup_clock")
            assert tuple(r[k] for k in names[:3]) == pytest.approx((s.speedup, s.ci_low, s.ci_high))
            assert r[names[3]] == s.clock
