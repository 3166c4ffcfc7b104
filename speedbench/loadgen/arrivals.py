"""Open-loop arrival schedules: when each request of a rate-mode point is sent.

The gaps between arrivals are gamma-distributed with shape ``burstiness`` and mean
``1 / rate`` (shape 1 is a Poisson process), as in ``vllm bench serve``. They are drawn
from ``numpy.random.default_rng(seed)`` and depend only on (n, rate, burstiness, seed),
so every arm of a run gets the same arrival times.
"""

from __future__ import annotations

import numpy as np


def arrival_offsets(n: int, rate: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Seconds from the start of the point at which request i is due; the first is 0."""
    if n <= 0:
        return []
    if not (rate > 0 and burstiness > 0):
        raise ValueError(f"rate and burstiness must be positive, got {rate}, {burstiness}")
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n - 1)
    return [0.0] + np.cumsum(gaps).tolist()
