"""The tiny fixtures: committed weights and their hash check, layout vLLM loads,
determinism, caching, tokenizer, CLI, and the training recipe at a small scale."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
from safetensors import safe_open  # noqa: E402

from speedbench.cli import main  # noqa: E402
from speedbench.engine.provenance import draft_info  # noqa: E402
from speedbench.errors import UsageError  # noqa: E402
from speedbench.fixtures.weights import FILES, SUMS, WEIGHTS, verify  # noqa: E402
from speedbench.fixtures.assemble import (  # noqa: E402
    FOLDERS,
    MARKER,
    TRAINING_REPORT,
    TinyParams,
    build_tiny,
    ensure_tiny,
    file_sha256,
    is_built,
    params_hash,
    silent_ids,
    stale_drafts,
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_tiny(tmp_path_factory.mktemp("fx") / "tiny", seed=0)


def tensors(path: Path) -> dict:
    with safe_open(str(path / "model.safetensors"), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_target_layout(tiny):
    p = TinyParams()
    cfg = json.loads((tiny / "target" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]) == (128, 8, 2048)
    t = tensors(tiny / "target")
    assert t["model.embed_tokens.weight"].shape == (p.vocab_size, p.hidden_size)
    assert t["lm_head.weight"].shape == (p.vocab_size, p.hidden_size)
    assert t["model.layers.7.self_attn.k_proj.weight"].shape == (p.num_kv_heads * p.head_dim, p.hidden_size)
    assert {str(v.dtype) for v in t.values()} == {"torch.bfloat16"}
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert (tiny / "target" / name).is_file()


@pytest.mark.parametrize("name,v31", [("eagle3", False), ("eagle3.1", True)])
def test_eagle_layout(tiny, name, v31):
    h = TinyParams().hidden_size
    cfg = json.loads((tiny / name / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert cfg["num_hidden_layers"] == 1 and cfg["draft_vocab_size"] == cfg["vocab_size"] == 2048
    assert bool(cfg.get("fc_norm")) is v31 and bool(cfg.get("norm_output")) is v31
    t = tensors(tiny / name)
    assert t["fc.weight"].shape == (h, 3 * h)
    assert t["midlayer.self_attn.q_proj.weight"].shape[1] == 2 * h  # reads [embeds, hidden]
    assert t["midlayer.self_attn.o_proj.weight"].shape == (h, h)
    for norm in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        assert f"midlayer.{norm}.weight" in t
    assert "norm.weight" in t and "lm_head.weight" in t
    assert not any("embed_tokens" in k for k in t)  # shared from the target
    assert sorted(k for k in t if k.startswith("fc_norm")) == (
        [f"fc_norm.{i}.weight" for i in range(3)] if v31 else [])
    assert (tiny / name / "tokenizer.json").is_file()
    assert draft_info(str(tiny / name), "eagle3")["eagle_version"] == ("3.1" if v31 else "3")


def test_tokenizer_and_chat_template(tiny):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny / "target"))
    assert len(tok) == 2048
    msgs = [{"role": "user", "content": "Write a function that returns the sum of squares."}]
    text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n") and "Write a function" in text
    text = "    def __init__(self, name):\n        return self.name"
    ids = tok.encode(text)
    assert len(ids) < 16  # the vocabulary is trained on code: keywords are whole tokens
    assert tok.decode(ids) == text
    assert tok.decode(tok.encode("Ünïcødé ✓")) == "Ünïcødé ✓"  # the byte alphabet is complete


def test_special_and_unreadable_tokens_are_never_emitted(tiny):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny / "target"))
    silent = silent_ids(tok)
    assert tok.eos_token_id in silent and tok.convert_tokens_to_ids("<|im_start|>") in silent
    keep = [i for i in range(2048) if i not in set(silent)]
    for folder in FOLDERS:
        head = tensors(tiny / folder)["lm_head.weight"].float()
        assert head[silent].abs().sum() == 0
        assert head.abs().sum(dim=1).gt(0).sum() == 2048 - len(silent)
        # Centred: the other rows' logits sum to ~0, so their maximum is positive and
        # beats the silenced tokens' zero logit at every position.
        drift, scale = float(head[keep].mean(0).abs().max()), float(head[keep].abs().mean())
        assert drift < 1e-2 * scale, (folder, drift, scale)  # bf16 rounding leaves ~1e-3
    recipe = json.loads((WEIGHTS / "recipe.json").read_text())
    assert recipe["data"]["silenced_tokens_generated"] == 0 and recipe["data"]["generated_tokens"] > 10000


def test_build_is_deterministic(tiny, tmp_path):
    again = build_tiny(tmp_path / "again", seed=0)
    for folder in FOLDERS:
        assert sha(tiny / folder / "model.safetensors") == sha(again / folder / "model.safetensors")
        assert sha(tiny / folder / "tokenizer.json") == sha(again / folder / "tokenizer.json")
    # The seed only draws the untrained control; the trained weights are the committed ones.
    other = build_tiny(tmp_path / "other", seed=1)
    assert sha(other / "eagle-random" / "model.safetensors") != sha(tiny / "eagle-random" / "model.safetensors")
    for folder in ("target", "eagle3", "eagle3.1"):
        assert sha(other / folder / "model.safetensors") == sha(tiny / folder / "model.safetensors")
    assert sha(tiny / "eagle3" / "model.safetensors") != sha(tiny / "eagle3.1" / "model.safetensors")
    assert sha(tiny / "target" / "model.safetensors") == sha(WEIGHTS / "target.safetensors")


def test_committed_weights_match_their_checksums():
    text = verify(WEIGHTS)
    assert [line.split("  ")[1] for line in text.splitlines()] == list(FILES)


@pytest.mark.parametrize("damage", ["flip", "missing", "no_sums"])
def test_damaged_weights_are_refused_with_the_file_and_the_fix(tmp_path, damage):
    import shutil

    copy = tmp_path / "weights"
    shutil.copytree(WEIGHTS, copy)
    victim = copy / "eagle3.1.safetensors"
    if damage == "flip":
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 1
        victim.write_bytes(bytes(data))
    elif damage == "missing":
        victim.unlink()
    else:
        victim = copy / SUMS
        victim.unlink()
    with pytest.raises(UsageError) as e:
        build_tiny(tmp_path / "fx", weights=copy)
    assert str(victim) in str(e.value) and "fix:" in str(e.value)
    assert not (tmp_path / "fx" / "target").exists()  # nothing half-built


def test_drafts_record_the_target_they_were_trained_against(tiny, tmp_path):
    target_sha = file_sha256(tiny / "target" / "model.safetensors")
    for name in ("eagle3", "eagle3.1"):
        report = json.loads((tiny / name / TRAINING_REPORT).read_text())
        assert report["target_sha256"] == target_sha
        assert report["data"]["aux_layers"] == [2, 4, 5]  # vLLM's default for 8 layers
        assert json.loads((tiny / name / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    assert stale_drafts(tiny) == []
    # A target that is not the one the drafts were trained for makes the build stale.
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny, copy)
    (copy / "target" / "model.safetensors").write_bytes(b"another target")
    assert stale_drafts(copy) == ["eagle3", "eagle3.1"]
    assert not is_built(copy)


def test_both_drafts_start_from_the_same_weights(tiny):
    # Same init, data and batch order: the untrained control is their common start, and
    # the 3.0 and 3.1 tensors differ only through training (plus 3.1's fc_norm).
    e3, e31, start = tensors(tiny / "eagle3"), tensors(tiny / "eagle3.1"), tensors(tiny / "eagle-random")
    assert set(e31) - set(e3) == {f"fc_norm.{i}.weight" for i in range(3)}
    assert set(e3) == set(start)
    assert any(not (e3[k] == start[k]).all() for k in e3)  # trained


def test_the_recipe_still_learns_at_a_small_scale(tmp_path):
    # The whole committed recipe (scripts/train_tiny_fixtures.py --small): the target's
    # loss falls on the standard library, and both drafts learn the target's greedy
    # continuations far above chance (1/2048), on held-out sequences.
    from speedbench.fixtures.training.drafts import TrainParams
    from speedbench.fixtures.training.target import TargetTrainParams
    from speedbench.fixtures.training.recipe import train_all

    recipe = train_all(tmp_path / "w", seed=0, target_tp=TargetTrainParams().small(), draft_tp=TrainParams().small())
    assert recipe["target"]["loss_last"] < recipe["target"]["loss_first"] - 0.7, recipe["target"]
    assert recipe["target"]["heldout_loss"] < recipe["target"]["loss_first"] - 0.7, recipe["target"]
    for name in ("eagle3", "eagle3.1"):
        report = recipe["drafts"][name]
        assert report["loss_last"] < 0.5 * report["loss_first"], report
        assert report["holdout_accuracy"][0] > 0.1, report
    verify(tmp_path / "w")  # a retrained folder carries its own checksums
    assert build_tiny(tmp_path / "fx", weights=tmp_path / "w") == tmp_path / "fx"


def test_ensure_tiny_caches_and_force_rebuilds(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr("speedbench.fixtures.assemble.build_tiny", lambda d, seed=0: calls.append((d, seed)))
    root = tmp_path / "fx"
    ensure_tiny(root)
    assert len(calls) == 1  # nothing there yet: built
    for d in FOLDERS:
        (root / d).mkdir(parents=True)
        (root / d / "model.safetensors").write_bytes(b"x")
    for d in ("eagle3", "eagle3.1"):
        (root / d / TRAINING_REPORT).write_text(json.dumps({"target_sha256": sha(root / "target" / "model.safetensors")}))
    (root / MARKER).write_text(json.dumps({"hash": params_hash(TinyParams(), verify(WEIGHTS))}))
    assert is_built(root)
    ensure_tiny(root)
    assert len(calls) == 1  # cached
    ensure_tiny(root, force=True)
    assert len(calls) == 2
    assert not is_built(root, seed=5)
    ensure_tiny(root, seed=5)
    assert calls[-1] == (root, 5)


def test_cli_builds_then_reports_up_to_date(tmp_path, capsys, monkeypatch):
    assert main(["fixtures", "tiny", str(tmp_path / "fx")]) == 0
    assert "assembled target, eagle3, eagle3.1" in capsys.readouterr().out
    assert is_built(tmp_path / "fx")
    assert main(["fixtures", "tiny", str(tmp_path / "fx")]) == 0
    assert "up to date" in capsys.readouterr().out
