"""What a summary row promises on any host, busy or quiet, for tests to check against.

On a busy host the client's event loop can lag as long as a request's decode window.
These things then follow by design (docs/metrics.md), and a test must allow them rather
than assume a quiet machine:

- the client-side interval is widened by the lag, without bound when a lag is as long
  as a window; summary.json writes that unbounded end as null;
- a request whose tokens all arrived in one read (a burst) has no client-side TPS, so
  the client-side speedup pairs only the prompts both arms measured, and a truth to
  hold it against is taken over those pairs (``client_pair_keys``): a fake server
  starved of the CPU can emit a whole request at once, whose "true" TPS is then huge;
- a client-side figure is off the truth by up to what the client's own lag can move it
  (``tps_lag_low`` / ``tps_lag_high`` per request, ``speedup_lag_bound`` per row), so an
  accuracy budget holds outside that range, not from the reading itself (``miss``);
- a reused baseline's canary reads the server again at another time than the earlier
  run: a starved fake reads slower, and the product then rightly measures the baseline
  again (``failed_canary``).
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


def client_pair_keys(records: Iterable[RequestRecord], spec_arm: str, base_arm: str) -> set[tuple]:
    """The (prompt_index, turn, repeat) that both arms completed with a client-side TPS: the
    pairs the client-side speedup rests on. A truth to hold it against is the mean over
    these same pairs: a request the host starved into a burst is in neither."""
    table = request_table(list(records))
    measured = table[table.ok & ~table.warmup & table.per_user_tps.notna()]

    def keys(arm: str) -> set[tuple]:
        return set(measured[measured.arm == arm][PAIR_KEYS].itertuples(index=False, name=None))

    return keys(spec_arm) & keys(base_arm)


def client_pairs(records: Iterable[RequestRecord], spec_arm: str, base_arm: str) -> int:
    """The number of pairs the client-side speedup must rest on (``client_pair_keys``).
    With fewer than 2 the row reports no paired estimate, and 0 pairs."""
    n = len(client_pair_keys(records, spec_arm, base_arm))
    return n if n >= 2 else 0


def miss(lo: float, hi: float, truth: float) -> float:
    """How far the truth lies outside ``[lo, hi]``, relative to the truth; 0 inside."""
    return max(0.0, lo / truth - 1.0, 1.0 - hi / truth)


def lag_miss(row: dict, truth: float) -> float:
    """``miss`` of a row's client-side speedup, given that the client's lag can move it by up
    to the row's ``speedup_lag_bound`` (relative). NaN: no lag recorded, so the reading
    itself; unbounded (inf, or summary.json's null beside a null interval end): 0."""
    b, est = row["speedup_lag_bound"], row["speedup_mean"]
    if (b is None and row["speedup_ci_high"] is None) or (b is not None and math.isinf(b)):
        return 0.0
    b = b if b is not None and math.isfinite(b) else 0.0
    return miss(est * (1.0 - b), est * (1.0 + b), truth)


def failed_canary(source: dict) -> str:
    """Why summary.json's ``baseline_source`` was measured again, "" where it was reused.
    Each failing canary point must say why: a ratio outside its tolerance, or no ratio
    (every canary request a burst); a test measures once more on fresh servers then, and
    a canary that never passes fails twice."""
    if source["reused"]:
        return ""
    failed = [c for c in source["canary"]
              if not c["ok"] and (c["ratio"] is None or abs(c["ratio"] - 1) > c["tolerance"])]
    assert failed, source
    return f"canary failed on the unchanged server: {failed}"
