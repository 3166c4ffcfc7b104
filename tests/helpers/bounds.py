"""What a summary row promises on any host, busy or quiet, for tests to check against.

On a busy host the client's event loop can lag as long as a request's decode window.
Two things then follow by design (docs/metrics.md), and a test must allow them rather
than assume a quiet machine:

- the client-side interval is widened by the lag, without bound when a lag is as long
  as a window; summary.json writes that unbounded end as null;
- a request whose tokens all arrived in one read (a burst) has no client-side TPS, so
  the client-side speedup pairs only the prompts both arms measured.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from speedbench.metrics.speedup import PAIR_KEYS
from speedbench.metrics.table import request_table
from speedbench.records import RequestRecord


def high(v: float | None) -> float:
    """An interval's high end, with summary.json's null (unbounded) read as infinity."""
    return math.inf if v is None else v


def client_pairs(records: Iterable[RequestRecord], spec_arm: str, base_arm: str) -> int:
    """The number of pairs the client-side speedup must rest on: the (prompt, turn, round)
    that both arms completed with a client-side TPS. With fewer than 2 the row reports no
    paired estimate, and 0 pairs."""
    table = request_table(list(records))
    measured = table[table.ok & ~table.warmup & table.per_user_tps.notna()]

    def keys(arm: str) -> set[tuple]:
        return set(measured[measured.arm == arm][PAIR_KEYS].itertuples(index=False, name=None))

    n = len(keys(spec_arm) & keys(base_arm))
    return n if n >= 2 else 0
