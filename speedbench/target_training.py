"""Train the tiny code target: a small Llama on the Python standard library's own sources.

Why a trained target (issue 14): a random-weight target's greedy choices are near-ties that
flip with numerics, so a draft can learn only its loops. A target trained on real code has
confident, structured continuations -- what a draft is for.

Why the standard library: every machine with Python has it, under the PSF licence, and it is
plain code with comments and docstrings. The text is reduced to printable ASCII so that no
byte of a partial UTF-8 character is ever a training label (a trained model then never emits
one, and the output stays readable).
"""

from __future__ import annotations

import hashlib
import logging
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from speedbench.optim import set_lr, update

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TargetTrainParams:
    max_chars: int = 4_000_000  # of stdlib text (sorted top-level modules, in order)
    seq_len: int = 256
    batch_size: int = 16
    steps: int = 800
    lr: float = 3e-3
    warmup: int = 40
    threads: int = 1

    def small(self) -> "TargetTrainParams":
        return TargetTrainParams(max_chars=200_000, seq_len=64, batch_size=8, steps=40, lr=3e-3, warmup=5)


def ascii_text(text: str) -> str:
    """Printable ASCII (plus newline and tab) only; anything else becomes '?'."""
    return "".join(c if (" " <= c <= "~") or c in "\n\t" else "?" for c in text)


def stdlib_text(max_chars: int) -> tuple[str, dict]:
    """The top-level ``*.py`` modules of the running interpreter's stdlib, sorted by name,
    cut at ``max_chars``. Returns the text and where it came from (for the training report)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    parts, files, total = [], [], 0
    for path in sorted(root.glob("*.py")):
        try:
            text = ascii_text(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        parts.append(text)
        files.append(path.name)
        total += len(text)
        if total >= max_chars:
            break
    text = "\n".join(parts)[:max_chars]
    source = {"stdlib": str(root), "python": sys.version.split()[0], "files": len(files),
              "first_file": files[0] if files else None, "last_file": files[-1] if files else None,
              "chars": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest()}
    return text, source


def train_target(model, ids, tp: TargetTrainParams, seed: int) -> dict:
    """Train ``model`` (an HF causal LM, fp32) in place on the token stream ``ids`` (1-D
    LongTensor) with random windows. Returns the training report."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=tp.lr, betas=(0.9, 0.95), weight_decay=0.01)
    n = len(ids) - tp.seq_len - 1
    held = ids[-(tp.seq_len * 32 + 1):]  # the stream's tail is held out
    n -= len(held)
    losses = []
    t0 = time.monotonic()
    model.train()
    for step in range(tp.steps):
        set_lr(opt, step, tp.steps, tp.lr, tp.warmup)
        starts = torch.randint(0, n, (tp.batch_size,), generator=gen)
        x = torch.stack([ids[s:s + tp.seq_len] for s in starts.tolist()])
        losses.append(update(model, opt, model(input_ids=x, labels=x).loss))
        if step % 20 == 0 or step == tp.steps - 1:
            log.info("target step %d/%d loss %.3f (%.0f s)", step, tp.steps, losses[-1], time.monotonic() - t0)
    model.eval()
    with torch.no_grad():
        x = held[:tp.seq_len * 32].view(32, tp.seq_len)
        held_loss = float(model(input_ids=x, labels=x).loss)
    return {"train_seconds": round(time.monotonic() - t0, 1),
            "loss_first": round(sum(losses[:10]) / max(len(losses[:10]), 1), 4),
            "loss_last": round(sum(losses[-10:]) / max(len(losses[-10:]), 1), 4),
            "heldout_loss": round(held_loss, 4), "tokens_seen": tp.steps * tp.batch_size * tp.seq_len}
