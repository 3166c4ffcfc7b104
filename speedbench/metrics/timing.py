"""Per-user TPS from the engine's own clock beside the client's, and delivery bursts.

The client's per-user TPS is what a user feels: tokens over the time between the first
and the last token as they arrived. The engine's (vLLM's ``--enable-per-request-metrics``)
is the same formula over the engine core's timestamps. The two agree when delivery keeps
pace with decoding. When the API server falls behind (starved of CPU, or too few API
server processes for the concurrency) it sends several steps in one write: the client
sees a shorter decode window than the engine, or, when every token arrives in one read,
no window at all (a *burst*, whose client TPS is undefined). A window under half the
engine's is a burst too (``table.COMPRESSED_WINDOW``).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from speedbench.metrics.numbers import NAN, finite, mean
from speedbench.metrics.table import COMPRESSED_WINDOW

# Client and engine per-user TPS "agree" when their means over the same requests are
# within 5%. The engine's clock stops when the last step is produced and the client's
# when it arrives, so a healthy server reads a few percent apart at most (on the 2-core
# development machine, EAGLE arms agreed within 0.1%; bursty ones differed by 2x).
TPS_AGREE_TOLERANCE = 0.05
# Above this event-loop lag the client, not the server, is the likely cause of bursts.
LAG_CAUSE_MS = 50.0


def timing_block(ok: pd.DataFrame, loop_lag_ms: float | None) -> tuple[dict[str, Any], list[str]]:
    """``per_user_tps_engine_mean``, ``tps_agree`` and ``n_burst`` of one point's ok
    requests, and the warnings they call for (one per cause)."""
    n_ok = len(ok)
    out: dict[str, Any] = {"per_user_tps_engine_mean": NAN, "tps_agree": None, "n_burst": 0}
    if n_ok == 0:
        return out, []
    out["per_user_tps_engine_mean"] = mean(ok["engine_tps"])
    n_burst = int(ok["burst"].sum())
    out["n_burst"] = n_burst
    lagged = loop_lag_ms is not None and math.isfinite(loop_lag_ms) and loop_lag_ms > LAG_CAUSE_MS
    cause = (f"likely cause: the client lagged (its event loop stalled for up to {loop_lag_ms:.0f} ms)" if lagged
             else "likely cause: the server batched its output (the API server fell behind the engine)")
    warnings = []
    if n_burst:
        warnings.append(f"{n_burst} of {n_ok} requests were bursts (every token in one read, or in under "
                        f"{COMPRESSED_WINDOW:.0%} of the engine's generation time): their client-side "
                        f"TPS is undefined; {cause}")
    both = ok[ok["per_user_tps"].notna() & ok["engine_tps"].notna()]
    client, engine = finite(both["per_user_tps"]), finite(both["engine_tps"])
    if len(client) and len(engine):
        c, e = float(client.mean()), float(engine.mean())
        out["tps_agree"] = bool(abs(c - e) <= TPS_AGREE_TOLERANCE * e)
        if not out["tps_agree"]:
            warnings.append(f"client and engine per-user TPS disagree by more than {TPS_AGREE_TOLERANCE:.0%} "
                            f"(client {c:.1f}, engine {e:.1f} tok/s over the same {len(both)} requests); "
                            + (cause if c > e or lagged else "likely cause: delivery slowed between engine and "
                               "client (an API server short of CPU, or the network)"))
    return out, warnings
