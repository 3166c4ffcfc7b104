"""The training step shared by the tiny target and the drafts: schedule, clip, update."""

from __future__ import annotations

import math
from contextlib import contextmanager


@contextmanager
def threads(n: int):
    """At most ``n`` torch threads inside the block, the previous count restored after.

    One thread is the recipe's choice: on the shared 2-core machine two OpenMP threads
    spent most of their time waiting at barriers for a core."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(min(before, n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def set_lr(opt, step: int, steps: int, peak: float, warmup: int) -> None:
    """Linear warm-up to ``peak``, then cosine decay to zero at ``steps``."""
    lr = peak * min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / steps))
    for group in opt.param_groups:
        group["lr"] = lr


def update(model, opt, loss) -> float:
    """One optimiser step on ``loss`` with the gradient norm clipped to 1; returns the loss."""
    import torch

    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return float(loss.detach())
