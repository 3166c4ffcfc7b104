"""Simulated measurements for statistics tests: request-table rows with known truth."""

from __future__ import annotations

import numpy as np
import pandas as pd


def aa_point(rng: np.random.Generator, server_sd: float, n: int = 10, rounds: int = 3) -> tuple[pd.DataFrame, ...]:
    """An A/A point (truth 1.0): each round is a fresh start of both servers, each running
    at its own speed (lognormal ``server_sd``); prompts differ in difficulty and add 3%.
    The engine's clock sees the same speeds as the client's, plus 1%."""
    difficulty = rng.normal(100, 15, n)
    rows = {"aa": [], "base": []}
    for rnd in range(rounds):
        for arm in rows:
            speed = rng.lognormal(0, server_sd)
            tps = difficulty * speed * rng.normal(1, 0.03, n)
            for i, t in enumerate(tps):
                rows[arm].append({"prompt_index": i, "turn": 0, "repeat": rnd, "per_user_tps": t,
                                  "engine_tps": t * rng.normal(1, 0.01)})
    return pd.DataFrame(rows["aa"]), pd.DataFrame(rows["base"])
