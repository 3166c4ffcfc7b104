"""The drafts' training data: chat prompts, the target's greedy continuations, its aux states.

Each sequence is a chat-templated user turn followed by the target's own greedy
continuation -- the tokens vLLM verifies at temperature 0. None of the benchmark's prompts
(the bundled coding sample) is used: user turns are cut from the fixture corpus (English
requests and short code) and from the standard-library text the target was trained on.
"""

from __future__ import annotations

import random
from pathlib import Path


def prompts(tok, corpus: str, code: str, n: int, long_fraction: float, rng: random.Random) -> list[list[int]]:
    """``n`` chat-templated user turns: one or two corpus lines (a request), then more
    corpus lines or a run of standard-library lines (code to work on) up to a drawn length;
    ``long_fraction`` of them are 120-560 tokens long (the drift scenario's contexts)."""
    lines = [line for line in corpus.splitlines() if line.strip()]
    code_lines = code.splitlines()
    out = []
    for _ in range(n):
        want = rng.randint(120, 560) if rng.random() < long_fraction else rng.randint(8, 90)
        start = rng.randrange(len(lines))
        parts = [lines[(start + j) % len(lines)] for j in range(rng.randint(1, 2))]
        source, at = (code_lines, rng.randrange(len(code_lines))) if rng.random() < 0.6 else (lines, start + len(parts))
        if source is code_lines:
            parts.append("")
        count = sum(len(tok.encode(p, add_special_tokens=False)) + 1 for p in parts)
        while count < want:
            line = source[at % len(source)]
            parts.append(line)
            count += len(tok.encode(line, add_special_tokens=False)) + 1
            at += 1
        msgs = [{"role": "user", "content": "\n".join(parts)}]
        text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        out.append(tok.encode(text, add_special_tokens=False))
    return out


def target_data(target_dir: Path, prompt_ids: list[list[int]], gen_tokens: int, pad: int,
                layers: tuple[int, ...]) -> list[dict]:
    """Per sequence: token ids, the target's aux hidden states and greedy labels, prompt length."""
    import torch
    from transformers import LlamaForCausalLM

    # The bf16 weights are computed in fp32: bf16 matmuls on a CPU without AVX512-BF16
    # ran ~12x slower here. vLLM serves bf16, so a few greedy choices differ; the code
    # target's choices are confident enough that this is rare (docs/fixtures.md).
    model = LlamaForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32).eval()
    seqs = []
    # Batches of similar length keep the padding (and the wasted compute) small.
    order = sorted(range(len(prompt_ids)), key=lambda i: len(prompt_ids[i]))
    with torch.no_grad():
        for b in range(0, len(order), 64):
            idx = order[b:b + 64]
            gen = greedy(model, [prompt_ids[i] for i in idx], gen_tokens, pad)
            full = [prompt_ids[i] + gen[r] for r, i in enumerate(idx)]
            # Feature pass, right-padded so positions start at 0 as they do in vLLM.
            w2 = max(len(s) for s in full)
            ids2 = torch.full((len(full), w2), pad, dtype=torch.long)
            mask2 = torch.zeros((len(full), w2), dtype=torch.long)
            for r, s in enumerate(full):
                ids2[r, :len(s)] = torch.tensor(s)
                mask2[r, :len(s)] = 1
            out = model(input_ids=ids2, attention_mask=mask2, output_hidden_states=True)
            # hidden_states[i] is the residual stream entering layer i: vLLM's aux layer i.
            aux = torch.cat([out.hidden_states[i] for i in layers], dim=-1)
            labels = out.logits.argmax(-1)
            for r, i in enumerate(idx):
                n = len(full[r])
                seqs.append({"ids": ids2[r, :n].clone(), "aux": aux[r, :n].clone(),
                             "labels": labels[r, :n].clone(), "prompt_len": len(prompt_ids[i]), "order": i})
    seqs.sort(key=lambda s: s["order"])
    return seqs


def greedy(model, prompt_ids: list[list[int]], n: int, pad: int) -> list[list[int]]:
    """Greedy continuation of left-padded prompts with a KV cache (HF generate's per-step
    overhead is ~10x the tiny model's compute)."""
    import torch
    from transformers import DynamicCache

    width = max(len(p) for p in prompt_ids)
    ids = torch.full((len(prompt_ids), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompt_ids), width), dtype=torch.long)
    for r, p in enumerate(prompt_ids):
        ids[r, width - len(p):] = torch.tensor(p)
        mask[r, width - len(p):] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos,
                past_key_values=DynamicCache(config=model.config), use_cache=True)
    tokens = []
    for _ in range(n):
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens.append(nxt)
        mask = torch.cat([mask, torch.ones_like(nxt)], -1)
        pos = pos[:, -1:] + 1
        out = model(input_ids=nxt, attention_mask=mask, position_ids=pos,
                    past_key_values=out.past_key_values, use_cache=True)
    return torch.cat(tokens, -1).tolist()
