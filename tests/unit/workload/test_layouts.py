"""Prepared SPEED-Bench copies as the public prepare scripts write them, and their provenance hash.

* Model-Optimizer examples/specdec_bench/prepare_data.py: OUT/speed/<config>/test.parquet,
  OUT defaulting to data/; SPEED-Bench's columns with `turns`.
* NeMo-Skills nemo_skills/dataset/speed-bench/prepare.py: OUT/<config>.jsonl, every column
  except `turns`, which becomes `messages: [{role: user, content}, ...]`.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from speedbench.errors import ScenarioError
from speedbench.scenario import VariantSpec, WorkloadSpec
from speedbench.workload import filter_prompts, load_workload, read_source, source_fingerprint, tag
from speedbench.workload.speed_bench import LAYOUTS, PLACEHOLDER_PREFIX, locate
from speedbench.workload.speed_bench_rows import ENTROPY_TIERS


def rows(config: str) -> list[dict]:
    groups = ENTROPY_TIERS if config.startswith("throughput") else ("coding", "math")
    out = []
    for g in groups:
        for i in range(2):
            turns = [f"{config} {g} q{i}"] + ([f"{g} follow-up"] if i == 1 and g == "coding" else [])
            out.append({
                "question_id": f"{config}-{g}-{i}", "category": g, "sub_category": f"{g}-sub",
                "turns": turns, "source": "open-src", "src_id": str(i), "difficulty": "medium",
                "multiturn": len(turns) > 1,
            })
    return out


def specdec_bench_out(out, config: str) -> None:
    """What prepare_data.py --output_dir OUT --config C writes."""
    d = out / "speed" / config
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows(config)), d / "test.parquet")


def nemo_skills_row(row: dict) -> dict:
    r = {k: v for k, v in row.items() if k != "turns"}
    r["messages"] = [{"role": "user", "content": t} for t in row["turns"]]
    return r


def nemo_skills_out(out, config: str) -> None:
    """What prepare.py --output_dir OUT --config C writes (datasets' to_json: JSON lines)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{config}.jsonl").write_text("".join(json.dumps(nemo_skills_row(r)) + "\n" for r in rows(config)))


def sb(path, config="qualitative", **kw) -> WorkloadSpec:
    return WorkloadSpec(source="speed_bench", path=str(path), config=config, warmup=0, **kw)


# ---- specdec_bench -------------------------------------------------------------------


@pytest.mark.parametrize("config", ["qualitative", "throughput_8k"])
@pytest.mark.parametrize("point_at", ["data", "data/speed"])
def test_specdec_bench_layout_from_out_or_speed_folder(tmp_path, config, point_at):
    specdec_bench_out(tmp_path / "data", "qualitative")
    specdec_bench_out(tmp_path / "data", "throughput_8k")
    prompts, _ = read_source(sb(tmp_path / point_at, config))
    assert len(prompts) == len(rows(config))
    assert {tag(p, "config") for p in prompts} == {config}
    if config.startswith("throughput"):
        assert {tag(p, "entropy_tier") for p in prompts} == set(ENTROPY_TIERS)
        assert len(filter_prompts(prompts, entropy_tiers=["low"])) == 2
    else:
        assert sum(p.multiturn for p in prompts) == 1
    want = "specdec_bench" if point_at == "data" else "hub"
    assert locate(tmp_path / point_at, config).layout == want


def test_specdec_bench_relative_default_data_folder(tmp_path):
    specdec_bench_out(tmp_path / "data", "qualitative")
    assert len(load_workload(sb("data/"), base_dir=tmp_path).measured) == len(rows("qualitative"))


def test_specdec_bench_missing_config_names_what_is_there(tmp_path):
    specdec_bench_out(tmp_path / "data", "throughput_1k")
    with pytest.raises(ScenarioError, match="configs found there: throughput_1k") as e:
        read_source(sb(tmp_path / "data", "throughput_32k"))
    assert "PATH/speed/throughput_32k/*.parquet" in str(e.value)


# ---- NeMo-Skills ----------------------------------------------------------------------


@pytest.mark.parametrize("config", ["qualitative", "throughput_2k"])
def test_nemo_skills_messages_layout(tmp_path, config):
    nemo_skills_out(tmp_path / "speed-bench", "qualitative")
    nemo_skills_out(tmp_path / "speed-bench", "throughput_2k")
    spec = sb(tmp_path / "speed-bench", config)
    assert locate(tmp_path / "speed-bench", config).layout == "file_per_config"
    prompts, _ = read_source(spec)
    by_id = {p.id: p for p in prompts}
    assert set(by_id) == {r["question_id"] for r in rows(config)}
    for r in rows(config):
        p = by_id[r["question_id"]]
        assert p.turns == tuple(r["turns"])  # user messages -> turns, multi-turn kept
        assert p.category == r["category"] and p.source == "open-src"
        assert tag(p, "config") == config
    if config.startswith("throughput"):
        # the tier is the `category` value in the throughput configs
        assert {tag(p, "entropy_tier") for p in prompts} == set(ENTROPY_TIERS)
        assert [p.category for p in filter_prompts(prompts, entropy_tiers=["high_entropy"])] == ["high_entropy"] * 2


def test_nemo_skills_placeholders_are_still_refused(tmp_path):
    nemo_skills_out(tmp_path, "qualitative")
    f = tmp_path / "qualitative.jsonl"
    lines = f.read_text().splitlines()
    row = json.loads(lines[0])
    # NeMo-Skills' own placeholder text extends SPEED-Bench's prefix
    row["messages"] = [{"role": "user", "content": PLACEHOLDER_PREFIX + " USING SPECDEC_BENCH\n\n{question}"}]
    f.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n")
    with pytest.raises(ScenarioError, match="placeholders"):
        load_workload(sb(tmp_path))


def test_messages_without_a_user_turn_is_located(tmp_path):
    r = nemo_skills_row(rows("qualitative")[0])
    r["messages"] = [{"role": "assistant", "content": "hi"}]
    (tmp_path / "qualitative.jsonl").write_text(json.dumps(r) + "\n")
    with pytest.raises(ScenarioError, match=r"qualitative.jsonl:1: 'messages' has no user message"):
        read_source(sb(tmp_path))


# ---- unrecognised layouts ----------------------------------------------------------------


def test_unrecognised_layout_lists_every_recognised_one(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here")
    (tmp_path / "other").mkdir()
    with pytest.raises(ScenarioError) as e:
        read_source(sb(tmp_path, "throughput_16k"))
    msg = str(e.value)
    assert "not a recognised layout for config 'throughput_16k'" in msg
    for pattern in ("/throughput_16k/**/*.parquet", "/speed/throughput_16k/*.parquet",
                    "/throughput_16k.parquet or PATH/throughput_16k.jsonl", "specdec_bench", "NeMo-Skills"):
        assert pattern in msg, pattern
    assert len(LAYOUTS) == 5


def test_a_file_of_another_format_is_refused(tmp_path):
    f = tmp_path / "qualitative.csv"
    f.write_text("question_id,category\n")
    with pytest.raises(ScenarioError, match="neither .parquet nor .jsonl"):
        read_source(sb(f))


# ---- provenance: a content hash of the prepared data ----------------------------------------


def test_fingerprint_hashes_the_files_each_config_reads(tmp_path):
    specdec_bench_out(tmp_path / "data", "qualitative")
    specdec_bench_out(tmp_path / "data", "throughput_8k")
    spec = sb(tmp_path / "data", variants=[VariantSpec(name="long", config="throughput_8k")])
    fp = source_fingerprint(spec)
    assert fp["configs"] == {"qualitative": "specdec_bench", "throughput_8k": "specdec_bench"}
    assert [f["path"] for f in fp["files"]] == ["speed/qualitative/test.parquet", "speed/throughput_8k/test.parquet"]
    assert len(fp["sha256"]) == 64
    # same bytes elsewhere -> same hash; one changed row -> another hash
    specdec_bench_out(tmp_path / "copy", "qualitative")
    specdec_bench_out(tmp_path / "copy", "throughput_8k")
    assert source_fingerprint(sb(tmp_path / "copy", variants=spec.variants))["sha256"] == fp["sha256"]
    changed = rows("throughput_8k")
    changed[0]["turns"] = ["edited"]
    pq.write_table(pa.Table.from_pylist(changed), tmp_path / "copy" / "speed" / "throughput_8k" / "test.parquet")
    assert source_fingerprint(sb(tmp_path / "copy", variants=spec.variants))["sha256"] != fp["sha256"]


def test_fingerprint_of_other_sources_never_raises(tmp_path):
    assert len(source_fingerprint(WorkloadSpec(source="sample"))["sha256"]) == 64
    nemo_skills_out(tmp_path, "qualitative")
    assert source_fingerprint(WorkloadSpec(source="jsonl", path=str(tmp_path / "qualitative.jsonl")))["sha256"]
    assert source_fingerprint(WorkloadSpec(source="speed_bench"))["sha256"] == ""  # hub: nothing local
    missing = source_fingerprint(sb(tmp_path / "nope"))
    assert missing["sha256"] == "" and "does not exist" in missing["error"]


def test_provenance_records_the_data_hash(tmp_path):
    from speedbench.engine.vllm.command import launch_spec
    from speedbench.engine.vllm.provenance import collect_provenance
    from speedbench.scenario import validate_data

    nemo_skills_out(tmp_path, "qualitative")
    sc = validate_data({"name": "t", "server": {"model": "m"}, "arms": [{"name": "base"}],
                        "workload": {"source": "speed_bench", "path": str(tmp_path)}})
    prov = collect_provenance(sc, sc.arms[0], launch_spec(sc, sc.arms[0]), ["vllm", "serve", "m"], {})
    assert prov["data"]["configs"] == {"qualitative": "file_per_config"}
    assert prov["data"]["files"][0]["path"] == "qualitative.jsonl"
    assert prov["data"]["sha256"] == source_fingerprint(sc.workload)["sha256"] != ""
