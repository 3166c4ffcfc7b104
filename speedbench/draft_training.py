"""Train the tiny EAGLE 3 and EAGLE 3.1 drafts against the tiny target, on the CPU.

The recipe is EAGLE-3's:

* inputs: the target's auxiliary hidden states (low, middle, high layer) folded by ``fc``,
  plus the target's token embeddings (shared, frozen: the drafts ship no embed_tokens);
* training-time test: ``ttt_steps`` unrolled draft steps, each step feeding the draft's
  own output hidden state back, with the attention mask vLLM's KV cache implies;
* labels: the target's own greedy choices (argmax of its bf16 logits) on sequences that
  are chat prompts followed by the target's greedy continuation -- the tokens vLLM
  verifies at temperature 0.

The forward pass mirrors vLLM 0.32 ``model_executor/models/llama_eagle3.py`` line for
line, because a draft trained on a different forward would be served by a different one:

* aux layer ids default to ``(2, L // 2, L - 3)`` = (2, 4, 5) for the 8-layer target, and
  vLLM captures "layer i" as the residual stream *entering* decoder layer i (HF
  ``hidden_states[i]``); the three are concatenated low to high;
* EAGLE 3.1 ``fc_norm``: one RMSNorm per aux chunk before ``fc``;
* the mid layer: ``input_layernorm(embeds)`` and ``hidden_norm(hidden)`` concatenated into
  a 2*hidden-wide attention input, residual = the un-normed hidden; fused add+RMSNorm
  after attention; MLP; final fused add+``norm``;
* the hidden state fed to the next draft step is the pre-norm residual (EAGLE 3) or the
  post-norm output (EAGLE 3.1 ``norm_output``); logits always come from the post-norm one;
* draft step j of the chain that starts at context position t runs at position t + j and
  attends to the context's step-0 keys (positions <= t) plus its own chain's earlier steps.

Both drafts start from the same seeded weights and see the same batches in the same
order; the only differences are the two 3.1 switches.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from speedbench.optim import set_lr, threads, update

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainParams:
    """Size of the drafts' training run. The defaults are the committed recipe's (docs/fixtures.md)."""

    num_sequences: int = 512  # prompts; each gets the target's greedy continuation (~0.1 s each)
    gen_tokens: int = 64  # greedy tokens per prompt (the scenarios ask for 48-64)
    long_fraction: float = 0.25  # share of prompts padded out to 120-560 tokens (drift contexts)
    steps: int = 600
    batch_size: int = 12
    ttt_steps: int = 3  # unrolled draft steps (k = 3 in the scenarios)
    # Prompt positions scored before the generated region (the target's choice after
    # natural tokens). 64 raised held-out agreement but not served acceptance: off.
    context_positions: int = 0
    head_init: str = "embed"  # "embed": the target's input embeddings; "target": its lm_head
    lr: float = 4e-3
    warmup: int = 30
    holdout: int = 32  # sequences kept out of training for the reported accuracy
    # One thread: on the shared 2-core machine two OpenMP threads spent most of their time
    # waiting at barriers for a core (a training step ran several times slower).
    threads: int = 1

    def small(self) -> "TrainParams":
        """A few-second variant for unit tests (still learns, far from converged)."""
        return TrainParams(num_sequences=48, gen_tokens=32, long_fraction=0.0, steps=60,
                           batch_size=8, holdout=8)


def aux_layer_ids(num_layers: int) -> tuple[int, int, int]:
    """vLLM 0.32's default (SupportsEagle3.get_eagle3_default_aux_hidden_state_layers)."""
    return (2, num_layers // 2, num_layers - 3)


# ---------------------------------------------------------------------------- model


def _rms(x, w, eps):
    import torch

    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps))


def _rope(x, cos, sin):
    import torch

    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # neox style, as vLLM's Llama
    return x * cos + rotated * sin


def _draft_module(cfg: dict, v31: bool, init: dict):
    """An nn.Module holding exactly the tensors of vLLM's EAGLE3 checkpoint layout."""
    import torch
    from torch import nn

    class Draft(nn.Module):
        def __init__(self):
            super().__init__()
            self.params = nn.ParameterDict(
                {k.replace(".", "__"): nn.Parameter(v.float().clone()) for k, v in init.items()})
            self.v31 = v31
            self.h = cfg["hidden_size"]
            self.nh, self.nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
            self.hd = cfg.get("head_dim") or self.h // self.nh
            self.eps = cfg["rms_norm_eps"]
            theta = (cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta", 10000.0)
            self.inv_freq = 1.0 / (theta ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))

        def p(self, name):
            return self.params[name.replace(".", "__")]

        def combine(self, aux):
            if self.v31:
                chunks = aux.chunk(3, dim=-1)
                aux = torch.cat([_rms(c, self.p(f"fc_norm.{i}.weight"), self.eps) for i, c in enumerate(chunks)], -1)
            return aux @ self.p("fc.weight").T

        def qkv(self, embeds, hidden, pos):
            e = _rms(embeds, self.p("midlayer.input_layernorm.weight"), self.eps)
            x = torch.cat([e, _rms(hidden, self.p("midlayer.hidden_norm.weight"), self.eps)], -1)
            B, L, _ = x.shape
            q = (x @ self.p("midlayer.self_attn.q_proj.weight").T).view(B, L, self.nh, self.hd).transpose(1, 2)
            k = (x @ self.p("midlayer.self_attn.k_proj.weight").T).view(B, L, self.nkv, self.hd).transpose(1, 2)
            v = (x @ self.p("midlayer.self_attn.v_proj.weight").T).view(B, L, self.nkv, self.hd).transpose(1, 2)
            freqs = pos.float()[..., None] * self.inv_freq  # [B, L, hd/2]
            emb = torch.cat([freqs, freqs], -1)[:, None]
            cos, sin = emb.cos(), emb.sin()
            rep = self.nh // self.nkv
            k, v = _rope(k, cos, sin).repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            return _rope(q, cos, sin), k, v

        def post(self, attn, residual):
            B, _, L, _ = attn.shape
            a = attn.transpose(1, 2).reshape(B, L, self.nh * self.hd) @ self.p("midlayer.self_attn.o_proj.weight").T
            residual = a + residual
            x = _rms(residual, self.p("midlayer.post_attention_layernorm.weight"), self.eps)
            gate = x @ self.p("midlayer.mlp.gate_proj.weight").T
            up = x @ self.p("midlayer.mlp.up_proj.weight").T
            residual = (torch.nn.functional.silu(gate) * up) @ self.p("midlayer.mlp.down_proj.weight").T + residual
            normed = _rms(residual, self.p("norm.weight"), self.eps)
            return normed, (normed if self.v31 else residual)

        def forward(self, batch, embed):
            """Logits [B, G, V] of each unrolled step for the chains that start at batch["tq"].

            Step-0 keys/values depend only on the step-0 inputs (one layer), so they are
            computed for the whole context while queries, MLP and lm_head run only where
            drafts start: the generated region."""
            aux, tq = batch["aux"], batch["tq"]
            B, L = aux.shape[:2]
            pos = torch.arange(L)[None].expand(B, L)
            hidden_full = self.combine(aux)
            _, k0, v0 = self.qkv(embed[batch["next_ids"]], hidden_full, pos)
            gather = tq[..., None].expand(-1, -1, hidden_full.shape[-1])
            hidden = hidden_full.gather(1, gather)
            visible = torch.arange(L)[None, None, None, :] <= tq[:, None, :, None]  # [B,1,G,L]
            chain_k, chain_v, logits = [], [], []
            scale = 1.0 / math.sqrt(self.hd)
            for j, ids in enumerate(batch["step_ids"]):
                q, k, v = self.qkv(embed[ids], hidden, tq + j)
                if j > 0:  # the step-0 key of this chain is k0 at position tq itself
                    chain_k.append(k)
                    chain_v.append(v)
                s0 = ((q @ k0.transpose(-1, -2)) * scale).masked_fill(~visible, float("-inf"))
                diag = [(q * ck).sum(-1, keepdim=True) * scale for ck in chain_k]
                probs = torch.softmax(torch.cat([s0, *diag], -1), -1)
                attn = probs[..., :L] @ v0
                for i, cv in enumerate(chain_v):
                    attn = attn + probs[..., L + i:L + i + 1] * cv
                normed, hidden = self.post(attn, hidden)
                logits.append(normed @ self.p("lm_head.weight").T)
            return logits

    return Draft()


# ---------------------------------------------------------------------------- training


def _batches(seqs: list[dict], batch_size: int) -> list[list[int]]:
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]["ids"]))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def _collate(seqs: list[dict], idx: list[int], k: int, extra: int = 0) -> dict:
    """A right-padded batch: the chains start at each generated-region position t (from the
    last prompt position on); step j feeds x[t+1+j] and is scored on the target's greedy
    y[t+1+j] while that token is inside the sequence."""
    import torch

    width = max(len(seqs[i]["ids"]) for i in idx)
    starts = {i: max(seqs[i]["prompt_len"] - 1 - extra, 0) for i in idx}
    G = max(len(seqs[i]["ids"]) - 1 - starts[i] for i in idx)
    B = len(idx)
    aux = torch.zeros(B, width, seqs[idx[0]]["aux"].shape[-1])
    ids = torch.zeros(B, width + k + 1, dtype=torch.long)
    labels = torch.full((B, width + k + 1), -100, dtype=torch.long)
    tq = torch.zeros(B, G, dtype=torch.long)
    for r, i in enumerate(idx):
        s, n, p = seqs[i], len(seqs[i]["ids"]), seqs[i]["prompt_len"]
        aux[r, :n] = s["aux"].float()
        ids[r, :n] = s["ids"]
        labels[r, :n] = s["labels"]
        g = n - 1 - starts[i]  # chains start at p-1-extra .. n-2
        tq[r, :g] = torch.arange(starts[i], n - 1)
        tq[r, g:] = n - 1  # padding chains, never scored
        labels[r, n:] = -100
    step_ids, step_labels = [], []
    for j in range(k):
        at = (tq + 1 + j).clamp(max=width + k)
        step_ids.append(ids.gather(1, at))
        lab = labels.gather(1, at)
        for r, i in enumerate(idx):
            g = len(seqs[i]["ids"]) - 1 - starts[i]
            lab[r, max(g - j, 0):] = -100  # x[t+1+j] must exist: t <= n-2-j
        step_labels.append(lab)
    return {"aux": aux, "tq": tq, "next_ids": ids[:, 1:width + 1], "step_ids": step_ids, "labels": step_labels}


def train_draft(seqs: list[dict], embed, cfg: dict, init: dict, *, v31: bool, tp: TrainParams,
                seed: int) -> tuple[dict, dict]:
    """-> (bf16 tensors in vLLM's layout, training report)."""
    import torch

    model = _draft_module(cfg, v31, init)
    train, held = seqs[tp.holdout:], seqs[:tp.holdout]
    batches = _batches(train, tp.batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=tp.lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    embed = embed.float()
    losses = []
    t0 = time.monotonic()
    for step in range(tp.steps):
        set_lr(opt, step, tp.steps, tp.lr, tp.warmup)
        b = batches[int(torch.randint(len(batches), (1,), generator=gen))]
        batch = _collate(train, b, tp.ttt_steps, tp.context_positions)
        logits = model(batch, embed)
        loss = sum(torch.nn.functional.cross_entropy(lg.flatten(0, 1), lb.flatten(), ignore_index=-100)
                   for lg, lb in zip(logits, batch["labels"])) / len(logits)
        losses.append(update(model, opt, loss))
        if step % 10 == 0 or step == tp.steps - 1:
            log.info("%s step %d/%d loss %.3f (%.0f s)", "eagle3.1" if v31 else "eagle3", step, tp.steps,
                     losses[-1], time.monotonic() - t0)
    seconds = time.monotonic() - t0
    report = {
        "v31": v31,
        "train_seconds": round(seconds, 1),
        "loss_first": round(sum(losses[:10]) / max(len(losses[:10]), 1), 4),
        "loss_last": round(sum(losses[-10:]) / max(len(losses[-10:]), 1), 4),
        "holdout_accuracy": evaluate(model, held, embed, tp.ttt_steps),
    }
    tensors = {k.replace("__", "."): v.detach().to(torch.bfloat16) for k, v in model.params.items()}
    return tensors, report


def evaluate(model, seqs: list[dict], embed, k: int) -> list[float]:
    """Top-1 agreement with the target's greedy token per unrolled step, teacher-forced
    (step j scored given correct earlier tokens: a conditional acceptance estimate)."""
    import torch

    if not seqs:
        return []
    hits, totals = [0] * k, [0] * k
    with torch.no_grad():
        for b in _batches(seqs, 8):
            batch = _collate(seqs, b, k)
            for j, (lg, lb) in enumerate(zip(model(batch, embed.float()), batch["labels"])):
                m = lb != -100
                hits[j] += int((lg.argmax(-1)[m] == lb[m]).sum())
                totals[j] += int(m.sum())
    return [round(h / max(t, 1), 4) for h, t in zip(hits, totals)]


def train_pair(seqs: list[dict], target: dict, cfg: dict, init: dict, tp: TrainParams, seed: int) -> dict:
    """Train EAGLE 3 and 3.1 from the same data (:mod:`speedbench.training_data`), init,
    batch order and seed.

    ``target`` holds the target's ``model.embed_tokens.weight`` and ``lm_head.weight``;
    ``init`` the shared starting tensors (the 3.1 ``fc_norm`` weights included, unused by
    3.0). Returns ``{"eagle3": (tensors, report), "eagle3.1": (tensors, report)}``.
    """
    import torch

    with threads(tp.threads):
        torch.manual_seed(seed)
        embed, head = target["model.embed_tokens.weight"], target["lm_head.weight"]
        if tp.head_init == "embed":
            # With the head tied to the input embeddings at the start, copying a context
            # token is one attention hop away (useful where the target repeats itself).
            head = torch.where(head.abs().sum(-1, keepdim=True) > 0, embed, head)
        # "target": the draft's output plays the target's final hidden state one token
        # ahead, so the target's own head is the natural start.
        init = {**init, "lm_head.weight": head}
        base = {k: v for k, v in init.items() if not k.startswith("fc_norm")}
        return {"eagle3": train_draft(seqs, embed, cfg, base, v31=False, tp=tp, seed=seed),
                "eagle3.1": train_draft(seqs, embed, cfg, init, v31=True, tp=tp, seed=seed)}
