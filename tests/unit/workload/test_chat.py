"""RequestBuilder: request bodies, identical prompts across arms, templating, variants, padding."""

from __future__ import annotations

import json

import pytest

from speedbench.cli import main
from speedbench.client.extensions import PLAIN
from speedbench.client.http import stream_payload
from speedbench.engine.vllm import VllmEngine
from speedbench.errors import ScenarioError
from speedbench.records import Prompt
from speedbench.scenario import VariantSpec, WorkloadSpec
from speedbench.workload import load_workload
from speedbench.workload.chat import CHAT_PATH, COMPLETIONS_PATH, RequestBuilder, load_tokenizer
from speedbench.workload.padding import Padder

TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think></think>\n{% endif %}{% endif %}"
)


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    """A tiny byte-level BPE tokenizer with a chat template, saved like a model's tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = ["def merge(a, b):\n    return sorted(a + b)\n", "Each worker must scan the stale cache.",
              "The quick brown fox jumps over the lazy dog; 0123456789."] * 30
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    fast.chat_template = TEMPLATE
    d = tmp_path_factory.mktemp("tiny_tokenizer")
    fast.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def tokenizer(tok_dir):
    return load_tokenizer(str(tok_dir))


P1 = Prompt(id="p1", turns=("Write a sort function.",), category="coding")
P2 = Prompt(id="p2", turns=("First question?", "Second question?", "Third question?"), category="coding")


VLLM = VllmEngine()  # the engine names the request fields; these tests name vLLM's


def wl(**kw) -> WorkloadSpec:
    return WorkloadSpec(**{"max_tokens": 64, **kw})


# ---- server-side templating ------------------------------------------------------------


def test_server_chat_body():
    b = RequestBuilder(wl(seed=3, top_p=0.9, ignore_eos=True, system_prompt="Be terse.",
                          chat_template_kwargs={"enable_thinking": False}), "my-model", fields=VLLM)
    path, body = b.build(P1, 0, [])
    assert path == CHAT_PATH
    assert body == {
        "model": "my-model",
        "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Write a sort function."}],
        "chat_template_kwargs": {"enable_thinking": False},
        "max_tokens": 64, "temperature": 0.0, "seed": 3, "top_p": 0.9, "ignore_eos": True,
    }


def test_defaults_leave_optional_fields_out():
    _, body = RequestBuilder(wl(), "m").build(P1, 0, [])
    assert set(body) == {"model", "messages", "max_tokens", "temperature", "seed"}
    assert body["messages"] == [{"role": "user", "content": "Write a sort function."}]


def test_multiturn_history_order():
    b = RequestBuilder(wl(system_prompt="S"), "m")
    history = [("First question?", "answer one"), ("Second question?", "answer two")]
    _, body = b.build(P2, 2, history)
    assert [(m["role"], m["content"]) for m in body["messages"]] == [
        ("system", "S"), ("user", "First question?"), ("assistant", "answer one"),
        ("user", "Second question?"), ("assistant", "answer two"), ("user", "Third question?"),
    ]
    with pytest.raises(ValueError, match="needs 2 history entries"):
        b.build(P2, 2, history[:1])
    with pytest.raises(ValueError, match="turn 3 does not exist"):
        b.build(P2, 3, history + [("Third question?", "x")])


def test_plain_completions_without_template():
    b = RequestBuilder(wl(api="completions", system_prompt="S"), "m", fields=VLLM)
    path, body = b.build(P2, 1, [("First question?", "A1")])
    assert path == COMPLETIONS_PATH
    assert body["prompt"] == "S\n\nFirst question?\n\nA1\n\nSecond question?"
    assert "messages" not in body and "add_special_tokens" not in body


# ---- same prompts for every arm -----------------------------------------------------------


def test_two_arms_get_identical_bodies_and_hash():
    spec = wl(system_prompt="S", chat_template_kwargs={"x": 1})
    base, spec_arm = RequestBuilder(spec, "target"), RequestBuilder(spec, "target")
    work = load_workload(WorkloadSpec(source="sample", num_prompts=12, warmup=2))
    for p in work.warmup + work.measured:
        history: list[tuple[str, str]] = []
        for t in range(len(p.turns)):
            assert base.build(p, t, history) == spec_arm.build(p, t, history)
            history.append((p.turns[t], f"answer {t}"))
    assert base.rendered_hash() == spec_arm.rendered_hash()


def test_hash_ignores_build_order_and_answers_but_not_prompts():
    spec = wl()
    a, b, c = RequestBuilder(spec, "m"), RequestBuilder(spec, "m"), RequestBuilder(spec, "m")
    a.build(P1, 0, [])
    a.build(P2, 0, [])
    a.build(P2, 1, [("First question?", "model A says this")])
    b.build(P2, 0, [])
    b.build(P2, 1, [("First question?", "model B says that")])
    b.build(P1, 0, [])
    assert a.rendered_hash() == b.rendered_hash()
    c.build(P1, 0, [])
    c.build(Prompt(id="p2", turns=("First question!",)), 0, [])
    assert c.rendered_hash() != a.rendered_hash()
    d = RequestBuilder(spec, "m", VariantSpec(name="v", chat_template_kwargs={"enable_thinking": False}))
    d.build(P1, 0, [])
    d.build(P2, 0, [])
    d.build(P2, 1, [("First question?", "x")])
    assert d.rendered_hash() != a.rendered_hash()  # the server renders with the kwargs


# ---- system prompts and variants ------------------------------------------------------------


def test_system_prompt_override_order():
    spec = wl(system_prompt="workload")
    tagged = Prompt(id="t", turns=("q",), tags=(("system_prompt", "row"),))
    first = lambda b, p=P1: b.build(p, 0, [])[1]["messages"][0]  # noqa: E731
    assert first(RequestBuilder(spec, "m")) == {"role": "system", "content": "workload"}
    assert first(RequestBuilder(spec, "m", VariantSpec(name="v", system_prompt="variant")))["content"] == "variant"
    no_system = RequestBuilder(spec, "m", VariantSpec(name="v", system_prompt=""))
    assert first(no_system) == {"role": "user", "content": P1.turns[0]}
    assert first(RequestBuilder(wl(), "m"), tagged) == {"role": "system", "content": "row"}
    assert first(RequestBuilder(spec, "m"), tagged)["content"] == "workload"


def test_variant_template_kwargs_merge_over_workload():
    spec = wl(chat_template_kwargs={"enable_thinking": True, "keep": 1})
    b = RequestBuilder(spec, "m", VariantSpec(name="nothink", chat_template_kwargs={"enable_thinking": False}))
    assert b.build(P1, 0, [])[1]["chat_template_kwargs"] == {"enable_thinking": False, "keep": 1}
    assert spec.chat_template_kwargs == {"enable_thinking": True, "keep": 1}  # not mutated


# ---- client-side templating ---------------------------------------------------------------


def test_client_side_template(tok_dir, tokenizer):
    spec = wl(chat_template="client", tokenizer=str(tok_dir), system_prompt="S",
              chat_template_kwargs={"enable_thinking": False})
    b = RequestBuilder(spec, "served-name", fields=VLLM)
    path, body = b.build(P2, 1, [("First question?", "A1")])
    assert path == COMPLETIONS_PATH and body["model"] == "served-name"
    assert body["add_special_tokens"] is False and "messages" not in body
    assert body["prompt"] == (
        "<s><|system|>\nS</s>\n<|user|>\nFirst question?</s>\n<|assistant|>\nA1</s>\n"
        "<|user|>\nSecond question?</s>\n<|assistant|>\n<think></think>\n"
    )
    assert body["prompt"].count("<s>") == 1
    # a tokenizer object passed in is used as is, with the same result
    same = RequestBuilder(spec, "served-name", tokenizer=tokenizer, fields=VLLM)
    assert same.build(P2, 1, [("First question?", "A1")]) == (path, body)
    think = VariantSpec(name="think", chat_template_kwargs={"enable_thinking": True})
    variant = RequestBuilder(spec, "served-name", think)
    assert "<think>" not in variant.build(P1, 0, [])[1]["prompt"]


def test_the_engine_names_the_request_fields(tokenizer):
    """A run's request on vLLM is byte for byte what it was when the builder and the client
    wrote vLLM's fields themselves; a plain OpenAI engine adds none of them."""
    spec = wl(chat_template="client", ignore_eos=True, top_p=0.9)
    _, body = RequestBuilder(spec, "m", tokenizer=tokenizer, fields=VLLM).build(P1, 0, [])
    sent = json.dumps(stream_payload(body, VLLM))
    prompt = json.dumps(body["prompt"])
    assert sent == (
        f'{{"model": "m", "prompt": {prompt}, "add_special_tokens": false, "max_tokens": 64, "temperature": 0.0, '
        '"seed": 0, "top_p": 0.9, "ignore_eos": true, "stream": true, '
        '"stream_options": {"include_usage": true, "continuous_usage_stats": false}}'
    )
    _, plain = RequestBuilder(spec, "m", tokenizer=tokenizer, fields=PLAIN).build(P1, 0, [])
    assert plain == {k: v for k, v in body.items() if k not in ("add_special_tokens", "ignore_eos")}
    assert stream_payload(plain, PLAIN)["stream_options"] == {"include_usage": True}
    assert RequestBuilder(spec, "m", tokenizer=tokenizer).build(P1, 0, []) == ("/v1/completions", plain)


def test_client_side_hash_matches_across_arms(tok_dir):
    spec = wl(chat_template="client", tokenizer=str(tok_dir))
    a, b = RequestBuilder(spec, "m"), RequestBuilder(spec, "m")
    for builder, answer in ((a, "x"), (b, "y")):
        builder.build(P2, 0, [])
        builder.build(P2, 1, [(P2.turns[0], answer)])
    assert a.rendered_hash() == b.rendered_hash()


def test_client_side_tokenizer_missing(tmp_path):
    with pytest.raises(ScenarioError, match="workload.tokenizer: cannot load a tokenizer"):
        RequestBuilder(wl(chat_template="client", tokenizer=str(tmp_path / "none")), "m")


# ---- padding -------------------------------------------------------------------------------


@pytest.mark.parametrize("target", [64, 300, 1000])
def test_padding_reaches_target_tokens(tokenizer, target):
    b = RequestBuilder(wl(), "m", VariantSpec(name=f"ctx{target}", input_tokens=target), tokenizer=tokenizer)
    assert b.padding_unit == "tokens"
    text = b.build(P1, 0, [])[1]["messages"][-1]["content"]
    n = len(tokenizer.encode(text, add_special_tokens=False))
    assert abs(n - target) <= 2
    assert text.endswith("\n\nWrite a sort function.")


def test_padding_is_deterministic_and_differs_per_prompt(tokenizer):
    v = VariantSpec(name="ctx", input_tokens=200)
    a = RequestBuilder(wl(), "m", v, tokenizer=tokenizer)
    b = RequestBuilder(wl(), "m", v, tokenizer=tokenizer)
    a.prepare([P1, P2])
    assert a.build(P1, 0, []) == b.build(P1, 0, [])
    t1 = a.build(P1, 0, [])[1]["messages"][-1]["content"]
    t2 = a.build(P2, 0, [])[1]["messages"][-1]["content"]
    assert t1[:40] != t2[:40]  # no shared prefix-cache block between prompts
    other_seed = RequestBuilder(wl(seed=1), "m", v, tokenizer=tokenizer).build(P1, 0, [])[1]["messages"][-1]["content"]
    assert other_seed != t1


def test_padded_first_turn_is_replayed_in_history(tokenizer):
    b = RequestBuilder(wl(), "m", VariantSpec(name="ctx", input_tokens=120), tokenizer=tokenizer)
    first = b.build(P2, 0, [])[1]["messages"][0]["content"]
    msgs = b.build(P2, 1, [(P2.turns[0], "A1")])[1]["messages"]
    assert msgs[0]["content"] == first and msgs[2]["content"] == P2.turns[1]


def test_padding_without_tokenizer_estimates_by_chars():
    b = RequestBuilder(wl(), "no-such-local-model", VariantSpec(name="ctx", input_tokens=500))
    assert b.padding_unit == "chars/4"
    text = b.build(P1, 0, [])[1]["messages"][-1]["content"]
    assert 1900 <= len(text) <= 2000


def test_long_prompt_is_not_truncated(tokenizer):
    long = "word " * 400
    assert Padder(50, tokenizer=tokenizer).pad(long, key="k") == long
    assert Padder(50).pad(long, key="k") == long


# ---- data inspect with a tokenizer -------------------------------------------------------------


def test_inspect_with_tokenizer(tmp_path, tok_dir, capsys):
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"prompt": "hello world"}) + "\n" + json.dumps({"prompt": "def merge(a, b)"}) + "\n")
    assert main(["data", "inspect", str(f), "--tokenizer", str(tok_dir)]) == 0
    out = capsys.readouterr().out
    assert "tokens" in out and "2 rows" in out
    assert main(["data", "inspect", str(f), "--tokenizer", str(tmp_path / "none")]) == 2
