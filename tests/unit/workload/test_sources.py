"""Workload sources: SPEED-Bench (local layouts, hub, filters, placeholders), sample, JSONL, random."""

from __future__ import annotations

import json
import sys
import types

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from speedbench.cli import main
from speedbench.errors import ScenarioError
from speedbench.scenario import VariantSpec, WorkloadSpec
from speedbench.workload import (
    check_source, load_workload, read_source, tag,
)
from speedbench.workload.speed_bench import CATEGORIES, CONFIGS, PLACEHOLDER_PREFIX
from speedbench.workload.speed_bench_rows import ENTROPY_TIERS

# The published SPEED-Bench schema (dataset card): the same columns in every config.
SCHEMA = pa.schema([
    ("question_id", pa.string()), ("category", pa.string()), ("sub_category", pa.string()),
    ("turns", pa.list_(pa.string())), ("source", pa.string()), ("src_id", pa.string()),
    ("difficulty", pa.string()), ("multiturn", pa.bool_()),
])


def make_rows(config: str, per_group: int = 3, placeholders: dict[str, int] | None = None) -> list[dict]:
    """Rows like the real configs: 11 categories (qualitative) or 3 entropy tiers (throughput)."""
    groups = CATEGORIES if config == "qualitative" else ENTROPY_TIERS
    placeholders = placeholders or {}
    rows = []
    for g in groups:
        for i in range(per_group):
            ph = i < placeholders.get(g, 0)
            multi = config == "qualitative" and i == per_group - 1
            turns = [f"{PLACEHOLDER_PREFIX}. See the dataset card."] if ph else [f"{config} {g} question {i}?"]
            if multi:
                turns.append(f"{g} follow-up {i}")
            rows.append({
                "question_id": f"{config}-{g}-{i}", "category": g, "sub_category": f"{g}-sub",
                "turns": turns, "source": f"licensed-{g}" if ph else "open-src", "src_id": str(i),
                "difficulty": "medium", "multiturn": multi,
            })
    return rows


def write_parquet(path, rows, schema=SCHEMA):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def sb(path, **kw) -> WorkloadSpec:
    return WorkloadSpec(source="speed_bench", path=str(path), warmup=kw.pop("warmup", 0), **kw)


# ---- SPEED-Bench: layouts and configs ------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS)
def test_every_config_in_hub_layout(tmp_path, config):
    rows = make_rows(config)
    write_parquet(tmp_path / config / "test-00000-of-00001.parquet", rows)
    write_parquet(tmp_path / "other" / "x.parquet", rows[:1])  # never read
    prompts = load_workload(sb(tmp_path, config=config)).measured
    assert len(prompts) == len(rows)
    assert {tag(p, "config") for p in prompts} == {config}
    if config == "qualitative":
        assert {p.category for p in prompts} == set(CATEGORIES)
        assert not any(tag(p, "entropy_tier") for p in prompts)
        assert sum(p.multiturn for p in prompts) == len(CATEGORIES)
    else:
        # no entropy column in the published schema: the tier comes from `category`
        assert {tag(p, "entropy_tier") for p in prompts} == set(ENTROPY_TIERS)


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_config_file_layout(tmp_path, suffix):
    rows = make_rows("throughput_2k")
    writer = write_parquet if suffix == ".parquet" else write_jsonl
    writer(tmp_path / f"throughput_2k{suffix}", rows)
    writer(tmp_path / f"qualitative{suffix}", make_rows("qualitative"))
    prompts = load_workload(sb(tmp_path, config="throughput_2k")).measured
    assert len(prompts) == len(rows) and all(tag(p, "config") == "throughput_2k" for p in prompts)


def test_folder_holding_one_config_and_single_file(tmp_path):
    rows = make_rows("throughput_8k")
    d = tmp_path / "mycopy"
    write_jsonl(d / "part-1.jsonl", rows[:5])
    write_jsonl(d / "part-2.jsonl", rows[5:])
    assert len(load_workload(sb(d, config="throughput_8k")).measured) == len(rows)
    f = write_parquet(tmp_path / "one.parquet", rows)
    assert len(load_workload(sb(f, config="throughput_8k")).measured) == len(rows)


def test_folder_named_after_another_config_is_refused(tmp_path):
    write_parquet(tmp_path / "qualitative" / "test.parquet", make_rows("qualitative"))
    with pytest.raises(ScenarioError, match="holds config 'qualitative'"):
        load_workload(sb(tmp_path / "qualitative", config="throughput_1k"))


def test_relative_path_uses_base_dir(tmp_path):
    write_parquet(tmp_path / "data" / "qualitative.parquet", make_rows("qualitative", 1))
    assert len(load_workload(sb("data"), base_dir=tmp_path).measured) == len(CATEGORIES)


def test_missing_folder_names_the_key_and_fix(tmp_path):
    with pytest.raises(ScenarioError) as e:
        load_workload(sb(tmp_path / "nope"))
    msg = str(e.value)
    assert "workload.path" in msg and "does not exist" in msg and "docs/workloads.md" in msg


def test_folder_without_the_config_lists_what_is_there(tmp_path):
    write_parquet(tmp_path / "throughput_1k" / "t.parquet", make_rows("throughput_1k", 1))
    with pytest.raises(ScenarioError, match="configs found there: throughput_1k"):
        load_workload(sb(tmp_path, config="throughput_32k"))


def test_unknown_config_and_missing_columns(tmp_path):
    with pytest.raises(ScenarioError, match="unknown SPEED-Bench config"):
        load_workload(sb(tmp_path, config="throughput_4k"))
    write_jsonl(tmp_path / "qualitative.jsonl", [{"question_id": "a", "category": "qa"}])
    with pytest.raises(ScenarioError, match=r"qualitative.jsonl:1: missing column\(s\) \['turns'\]"):
        load_workload(sb(tmp_path))


def test_bad_json_line_is_located(tmp_path):
    (tmp_path / "qualitative.jsonl").write_text(json.dumps(make_rows("qualitative", 1)[0]) + "\n{oops\n")
    with pytest.raises(ScenarioError, match=r"qualitative.jsonl:2: invalid JSON"):
        load_workload(sb(tmp_path))


# ---- filters -----------------------------------------------------------------------


def test_category_filter(tmp_path):
    write_parquet(tmp_path / "qualitative.parquet", make_rows("qualitative"))
    prompts = load_workload(sb(tmp_path, categories=["coding", "Math"])).measured
    assert {p.category for p in prompts} == {"coding", "math"} and len(prompts) == 6
    with pytest.raises(ScenarioError, match=r"no rows in \['codng'\].*coding, humanities"):
        load_workload(sb(tmp_path, categories=["codng"]))


def test_entropy_filter_from_category_and_aliases(tmp_path):
    write_parquet(tmp_path / "throughput_16k.parquet", make_rows("throughput_16k"))
    spec = sb(tmp_path, config="throughput_16k", entropy_tiers=["low", "High-Entropy"])
    prompts = load_workload(spec).measured
    assert {tag(p, "entropy_tier") for p in prompts} == {"low_entropy", "high_entropy"} and len(prompts) == 6
    with pytest.raises(ScenarioError, match="no rows in tier"):
        load_workload(sb(tmp_path, config="throughput_16k", entropy_tiers=["medium_rare"]))


def test_entropy_column_with_real_categories(tmp_path):
    rows = make_rows("throughput_1k")
    for r in rows:
        r["entropy_tier"] = r["category"].replace("_", "-").upper()  # tolerant of spelling
        r["category"] = "coding" if r["src_id"] != "0" else "math"
    schema = SCHEMA.append(pa.field("entropy_tier", pa.string()))
    write_parquet(tmp_path / "throughput_1k" / "t.parquet", rows, schema)
    spec = sb(tmp_path, config="throughput_1k", categories=["coding"], entropy_tiers=["mixed"])
    prompts = load_workload(spec).measured
    assert len(prompts) == 2 and all(p.category == "coding" and tag(p, "entropy_tier") == "mixed" for p in prompts)


def test_entropy_filter_on_qualitative_is_refused(tmp_path):
    write_parquet(tmp_path / "qualitative.parquet", make_rows("qualitative", 1))
    with pytest.raises(ScenarioError, match="only in SPEED-Bench's throughput_"):
        load_workload(sb(tmp_path, entropy_tiers=["mixed"]))


# ---- placeholders ------------------------------------------------------------------


def test_placeholders_are_refused_with_counts_and_sources(tmp_path):
    write_parquet(tmp_path / "qualitative.parquet", make_rows("qualitative", 4, {"coding": 3, "rag": 1}))
    with pytest.raises(ScenarioError) as e:
        load_workload(sb(tmp_path, categories=["coding", "math"]))
    msg = str(e.value)
    assert "3 of 8 selected rows" in msg and "licensed-coding (3)" in msg
    assert "docs/workloads.md" in msg and "licensed-rag" not in msg
    # categories without placeholders are fine
    assert len(load_workload(sb(tmp_path, categories=["math", "qa"])).measured) == 8
    check = check_source(sb(tmp_path))
    assert (check.ok, check.n_rows, check.n_placeholder) == (False, 44, 4)
    assert "placeholders" in check.message


def test_placeholders_in_jsonl_source_too(tmp_path):
    f = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "ok"}, {"prompt": PLACEHOLDER_PREFIX + " x"}])
    with pytest.raises(ScenarioError, match="1 of 2 selected rows"):
        load_workload(WorkloadSpec(source="jsonl", path=str(f)))


# ---- the hub -------------------------------------------------------------------------


def test_hub_used_when_no_path_and_datasets_importable(monkeypatch):
    calls = []

    def load_dataset(name, config, split):
        calls.append((name, config, split))
        return make_rows(config, 2)

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    prompts = load_workload(WorkloadSpec(source="speed_bench", config="throughput_32k")).measured
    assert calls == [("nvidia/SPEED-Bench", "throughput_32k", "test")] and len(prompts) == 6


def test_hub_errors_become_scenario_errors(monkeypatch):
    def load_dataset(*a, **k):
        raise ConnectionError("no network")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    with pytest.raises(ScenarioError, match="ConnectionError: no network.*workload.path"):
        load_workload(WorkloadSpec(source="speed_bench"))


def test_without_datasets_and_path(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails
    with pytest.raises(ScenarioError, match="'datasets' package is not installed"):
        load_workload(WorkloadSpec(source="speed_bench"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    check = check_source(WorkloadSpec(source="speed_bench"))
    assert not check.ok and check.n_rows == 0 and "datasets" in check.message


def test_check_source_never_contacts_the_hub(monkeypatch):
    def load_dataset(*a, **k):
        raise AssertionError("doctor must not download")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object())
    check = check_source(WorkloadSpec(source="speed_bench"))
    assert check.ok and "not checked" in check.message


# ---- sample, JSONL, random -------------------------------------------------------------


def test_bundled_sample():
    rows, _ = read_source(WorkloadSpec(source="sample"))
    coding = [p for p in rows if p.category == "coding"]
    assert len(coding) == 36 and len(rows) - len(coding) >= 8
    assert sum(p.multiturn for p in coding) == 4
    assert all(2 <= len(p.turns) <= 3 for p in rows if p.multiturn)
    assert len({p.id for p in rows}) == len(rows)
    assert {p.source for p in rows} == {"speedbench-sample"}
    assert len({p.sub_category for p in coding}) >= 8
    assert max(len("".join(p.turns)) for p in rows) < 1200  # fits a 1024-token CPU model
    assert not any(tag(p, "config") for p in rows)
    check = check_source(WorkloadSpec(source="sample", categories=["coding"]))
    assert check.ok and check.n_rows == 36 and check.n_placeholder == 0


def test_jsonl_shapes(tmp_path):
    f = write_jsonl(tmp_path / "mine.jsonl", [
        {"prompt": "plain prompt", "id": "a", "category": "coding"},
        {"text": "text prompt"},
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "u1"},
                      {"role": "assistant", "content": "dropped"}, {"role": "user", "content": "u2"}]},
        {"turns": ["t1", "t2"], "question_id": "q", "category": "math"},
    ])
    rows, _ = read_source(WorkloadSpec(source="jsonl", path=str(f)))
    assert [p.turns for p in rows] == [("plain prompt",), ("text prompt",), ("u1", "u2"), ("t1", "t2")]
    assert [p.id for p in rows[:2]] == ["a", "mine-2"] and rows[3].id == "q"
    assert [p.category for p in rows] == ["coding", "uncategorized", "uncategorized", "math"]
    assert tag(rows[2], "system_prompt") == "be brief"


@pytest.mark.parametrize("row, match", [
    ({"foo": 1}, "no prompt in this row"),
    ({"messages": [{"role": "assistant", "content": "x"}]}, "no user message"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "unsupported role 'tool'"),
    ({"prompt": "  "}, "empty prompt"),
])
def test_jsonl_bad_rows(tmp_path, row, match):
    f = write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "fine"}, row])
    with pytest.raises(ScenarioError, match=f"bad.jsonl:2: .*{match}"):
        load_workload(WorkloadSpec(source="jsonl", path=str(f)))


def test_jsonl_missing_file(tmp_path):
    with pytest.raises(ScenarioError, match="workload.path: JSONL file .* does not exist"):
        load_workload(WorkloadSpec(source="jsonl", path=str(tmp_path / "x.jsonl")))


def test_random_is_refused_unless_allowed():
    with pytest.raises(ScenarioError, match="23%.*allow_random"):
        load_workload(WorkloadSpec(source="random"))
    assert not check_source(WorkloadSpec(source="random")).ok


def test_random_when_allowed_returns_a_warning():
    spec = WorkloadSpec(source="random", allow_random=True, num_prompts=5, warmup=2, seed=3)
    got = load_workload(spec, variant=VariantSpec(name="v", input_tokens=40))
    prompts, seen = got.measured, got.warnings
    assert len(prompts) == 5 and len(seen) == 1 and "23%" in seen[0]
    assert all(len(p.turns[0].split()) == 40 for p in prompts)
    wl = load_workload(spec)
    assert "23%" in wl.warnings[0] and len(wl.warmup) == 2
    assert not {p.id for p in wl.warmup} & {p.id for p in wl.measured}
    default = load_workload(WorkloadSpec(source="random", allow_random=True, warmup=2))
    assert (len(default.measured), len(default.warmup)) == (64, 2)


# ---- speedbench data inspect ---------------------------------------------------------------


def test_inspect_sample(capsys):
    assert main(["data", "inspect", "sample"]) == 0
    out = capsys.readouterr().out
    assert "44 rows, 4 multi-turn, 0 placeholders" in out
    assert "coding" in out and "36" in out and "chars" in out and "median" in out


def test_inspect_speed_bench_folder(tmp_path, capsys):
    write_parquet(tmp_path / "throughput_1k" / "t.parquet", make_rows("throughput_1k", 4, {"mixed": 2}))
    assert main(["data", "inspect", str(tmp_path), "--config", "throughput_1k"]) == 0
    out = capsys.readouterr().out
    assert "12 rows, 0 multi-turn, 2 placeholders" in out
    assert "entropy tier" in out and "low_entropy" in out and "licensed-mixed" in out
    assert main(["data", "inspect", str(tmp_path), "--config", "throughput_1k", "--entropy-tiers", "low"]) == 0
    assert "4 rows" in capsys.readouterr().out


def test_inspect_jsonl_and_categories(tmp_path, capsys):
    f = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "abc", "category": "qa"}, {"prompt": "defg", "category": "x"}])
    assert main(["data", "inspect", str(f), "--categories", "qa"]) == 0
    assert "1 rows" in capsys.readouterr().out
    g = write_jsonl(tmp_path / "sb.jsonl", make_rows("qualitative", 1))  # SPEED-Bench schema in JSONL
    assert main(["data", "inspect", str(g)]) == 0
    assert "11 rows" in capsys.readouterr().out


@pytest.mark.parametrize("argv, match", [
    (["data", "inspect", "/no/such/place"], "is not 'sample' and does not exist"),
    (["data", "inspect", "sample", "--categories", "codng"], "no rows in"),
    (["data", "inspect", "sample", "--entropy-tiers", "low"], "carry no entropy tier"),
])
def test_inspect_bad_input_exits_2(capsys, argv, match):
    assert main(argv) == 2
    assert match in capsys.readouterr().err


def test_inspect_bad_config_and_no_action(tmp_path, capsys):
    write_parquet(tmp_path / "qualitative.parquet", make_rows("qualitative", 1))
    assert main(["data", "inspect", str(tmp_path), "--config", "nope"]) == 2
    assert "unknown SPEED-Bench config" in capsys.readouterr().err
    assert main(["data"]) == 2
