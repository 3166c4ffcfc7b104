"""The tiny fixtures' training recipe: tokenizer, code target, EAGLE 3 and EAGLE 3.1 drafts.

``scripts/train_tiny_fixtures.py`` runs :func:`train_all`; its output is committed under
speedbench/data/tiny/ and pinned by SHA256SUMS, and ``speedbench fixtures tiny`` only
assembles it (:mod:`speedbench.fixtures`). The steps, all seeded:

1. text: the running interpreter's standard library, printable ASCII
   (:mod:`speedbench.target_training`);
2. a byte-level BPE of 2048 tokens trained on that text plus the fixture corpus;
3. the target: the 8-layer Llama of :class:`speedbench.fixtures.TinyParams`, trained on
   the text; its ``lm_head`` is then centred and its never-emitted rows zeroed;
4. the drafts' data: chat prompts continued greedily by that target
   (:mod:`speedbench.training_data`);
5. EAGLE 3 and EAGLE 3.1 trained on it from the same init, batches and seed
   (:mod:`speedbench.draft_training`).
"""

from __future__ import annotations

import json
import logging
import random
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from speedbench import fixtures as fx
from speedbench.draft_training import TrainParams, aux_layer_ids, train_pair
from speedbench.fixture_weights import FILES, write_sums
from speedbench.optim import threads
from speedbench.target_training import TargetTrainParams, stdlib_text, train_target
from speedbench.training_data import prompts, target_data

log = logging.getLogger(__name__)


def train_tokenizer(text: str, vocab_size: int):
    """Byte-level BPE over ``text`` (deterministic for a given text and size)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=list(fx.SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(text.splitlines(keepends=True), trainer)
    if tok.get_vocab_size() != vocab_size:
        # The model's vocabulary must match the tokenizer's exactly.
        raise RuntimeError(f"the training text yields {tok.get_vocab_size()} tokens, not {vocab_size}")
    return tok


def train_all(out: Path, seed: int = 0, target_tp: TargetTrainParams | None = None,
              draft_tp: TrainParams | None = None) -> dict:
    """Run the whole recipe and write :data:`speedbench.fixture_weights.FILES` and
    SHA256SUMS into ``out``. Returns the recipe report (also written as recipe.json)."""
    t0 = time.monotonic()
    target = train_target_stage(out, seed, target_tp or TargetTrainParams())
    recipe = train_drafts_stage(out, seed, draft_tp or TrainParams(), target)
    recipe["seconds"] = round(time.monotonic() - t0, 1)
    return _write_recipe(out, recipe)


def train_target_stage(out: Path, seed: int, tp: TargetTrainParams) -> dict:
    """Steps 1-3: tokenizer.json and target.safetensors in ``out``; returns their report."""
    import torch
    from transformers import LlamaForCausalLM

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    params = fx.TinyParams()
    with threads(tp.threads):
        text, source = stdlib_text(tp.max_chars)
        train_tokenizer(text + "\n" + fx.corpus(), params.vocab_size).save(str(out / "tokenizer.json"))
        tok = fx.load_tokenizer(out / "tokenizer.json", params.max_position_embeddings)
        torch.manual_seed(seed)
        config = fx._llama_config(params, tok, architectures=["LlamaForCausalLM"])
        model = LlamaForCausalLM(config).float()
        ids = torch.tensor(tok.encode(text, add_special_tokens=False, verbose=False))  # one long stream, on purpose
        report = {**train_target(model, ids, tp, seed), "tokens": len(ids), "source": source,
                  "params": asdict(tp), "seed": seed}
        tensors = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
        tensors["lm_head.weight"] = fx.centre_and_silence(tensors["lm_head.weight"], fx.silent_ids(tok))
        fx.save_tensors(tensors, out / "target.safetensors")
    return report


def train_drafts_stage(out: Path, seed: int, tp: TrainParams, target_report: dict) -> dict:
    """Steps 4-5 against the target already in ``out``; returns the recipe report."""
    from safetensors.torch import load_file

    out = Path(out)
    params = fx.TinyParams()
    t0 = time.monotonic()
    with threads(tp.threads):
        tok = fx.load_tokenizer(out / "tokenizer.json", params.max_position_embeddings)
        silent = set(fx.silent_ids(tok))
        text, _ = stdlib_text(target_report["params"]["max_chars"])
        with tempfile.TemporaryDirectory() as tmp:
            fx.write_target(Path(tmp) / "target", params, tok, out / "target.safetensors")
            prompt_ids = prompts(tok, fx.corpus(), text, tp.num_sequences, tp.long_fraction, random.Random(seed))
            seqs = target_data(Path(tmp) / "target", prompt_ids, tp.gen_tokens, tok.pad_token_id,
                               aux_layer_ids(params.num_layers))
        gen = [int(t) for s in seqs for t in s["ids"][s["prompt_len"]:]]
        data = {"sequences": len(seqs), "tokens": sum(len(s["ids"]) for s in seqs),
                "seconds": round(time.monotonic() - t0, 1), "params": asdict(tp),
                "aux_layers": list(aux_layer_ids(params.num_layers)), "generated_tokens": len(gen),
                # The construction check: the target never emits a silenced token.
                "silenced_tokens_generated": sum(t in silent for t in gen),
                "distinct_generated_tokens": len(set(gen))}
        log.info("draft data: %s", data)
        cfg = fx._draft_config(params, tok, False).to_dict()
        target = {k: v.float() for k, v in load_file(str(out / "target.safetensors")).items()}
        trained = train_pair(seqs, target, cfg, fx.draft_init(params, tok, seed + 1), tp, seed)
        drafts = {}
        for name, (draft, report) in trained.items():
            draft["lm_head.weight"] = fx.centre_and_silence(draft["lm_head.weight"], sorted(silent))
            fx.save_tensors(draft, out / f"{name}.safetensors")
            drafts[name] = report
    return {"seed": seed, "params": asdict(params), "target": target_report, "data": data, "drafts": drafts,
            "seconds": round(time.monotonic() - t0, 1)}


def retrain_drafts(out: Path, seed: int = 0, tp: TrainParams | None = None) -> dict:
    """Retrain only the drafts against the committed target in ``out`` (its recipe.json
    keeps the target's report)."""
    old = json.loads((Path(out) / "recipe.json").read_text())
    return _write_recipe(out, train_drafts_stage(out, seed, tp or TrainParams(), old["target"]))


def _write_recipe(out: Path, recipe: dict) -> dict:
    import tokenizers
    import torch
    import transformers

    recipe = {**recipe, "script": "scripts/train_tiny_fixtures.py",
              "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                           "transformers": transformers.__version__, "tokenizers": tokenizers.__version__},
              "files": [f for f in FILES if f != "recipe.json"]}
    (Path(out) / "recipe.json").write_text(json.dumps(recipe, indent=2, sort_keys=True) + "\n")
    write_sums(out)
    return recipe
