"""The client's own timing error: how far the lag of its event loop can move the
client-side speedup, and the interval widened by it (docs/metrics.md, "The client's own
timing error").

A request's per-user TPS is ``(n - 1) / (t_last - t_first)``. A busy event loop stamps a
socket read late, never early, by at most the lag the probe saw while the request was in
flight (``loop_lag_ns``, L). Both stamps may be late by anything from 0 to L, so the true
window lies within ``w ± L`` and the true TPS between ``(n - 1) / (w + L)`` and
``(n - 1) / (w - L)`` (``tps_lag_low`` / ``tps_lag_high`` of ``request_table``). The mean of
such values lies between the means of the ends, and the ratio of two means between
``mean(low_arm) / mean(high_base)`` and ``mean(high_arm) / mean(low_base)``: the speedup
with every window moved by its lag the way that moves it most.

That range is a bound, not a spread: a lag that shifts stamps one way in one arm and the
other way in the other moves the estimate and the whole interval with it, and the
bootstrap cannot see it. So it is added to each end of the statistical interval (not in
quadrature, which would treat it as one more independent noise): the widened interval
holds the truth whenever the statistical one holds what an exact clock would have read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Warn when the lag bound is more than this share of the statistical half-width: below it
# the client's own error hardly moves the interval; above it, it is a visible part of it.
LAG_WARN_SHARE = 0.25


@dataclass(frozen=True)
class LagRange:
    """The true mean ratio lies in ``[estimate · low, estimate · high]`` as far as the
    client's lag goes. ``lag_ms``: the worst lag over the requests; ``window_ms``: their
    median decode window."""

    low: float = 1.0
    high: float = 1.0
    lag_ms: float = math.nan  # NaN: no request recorded its lag (records older than the probe's share)
    window_ms: float = math.nan

    @property
    def bound(self) -> float:
        """The most the lag can move the ratio, relative (either way; inf when unbounded;
        NaN when no lag was recorded)."""
        return max(1.0 - self.low, self.high - 1.0) if math.isfinite(self.lag_ms) else math.nan

    def widen(self, lo: float, hi: float) -> tuple[float, float]:
        return (lo * self.low, hi * self.high)


def lag_range(arm: dict[str, np.ndarray], base: dict[str, np.ndarray]) -> LagRange:
    """The lag range of ``mean(arm tps) / mean(base tps)``. Each side holds aligned arrays
    ``tps``, ``low``, ``high`` (``request_table``'s ``per_user_tps``, ``tps_lag_low``,
    ``tps_lag_high``), plus ``lag_ms`` and ``decode_s`` for the figures a warning quotes;
    only requests with a finite ``tps`` count (the ones the estimate uses)."""
    a, b = _finite(arm), _finite(base)
    if not len(a["tps"]) or not len(b["tps"]) or b["tps"].mean() <= 0 or a["tps"].mean() <= 0:
        return LagRange()
    est = a["tps"].mean() / b["tps"].mean()
    with np.errstate(divide="ignore", invalid="ignore"):
        low = float(a["low"].mean() / b["high"].mean() / est)
        high = float(a["high"].mean() / b["low"].mean() / est)
    lags = np.concatenate([a["lag_ms"], b["lag_ms"]])
    lags = lags[np.isfinite(lags)]
    if not len(lags):
        return LagRange()
    windows = np.concatenate([a["decode_s"], b["decode_s"]]) * 1e3
    return LagRange(low if math.isfinite(low) else 0.0, high, float(lags.max()), float(np.median(windows)))


def _finite(side: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    keep = np.isfinite(np.asarray(side["tps"], dtype=float))
    return {k: np.asarray(v, dtype=float)[keep] for k, v in side.items()}


def lag_warning(estimate: float, stat_lo: float, stat_hi: float, lag: LagRange) -> str | None:
    """A warning when the lag bound is more than ``LAG_WARN_SHARE`` of the statistical
    interval's relative half-width; None otherwise."""
    if not all(math.isfinite(v) for v in (estimate, stat_lo, stat_hi)) or estimate <= 0 or not lag.bound > 0:
        return None
    half = (stat_hi - stat_lo) / 2 / estimate
    if lag.bound <= LAG_WARN_SHARE * half:
        return None
    lo, hi = lag.widen(stat_lo, stat_hi)
    moved = f"by up to {lag.bound:.2%}" if math.isfinite(lag.bound) else "without bound (a lag as long as a window)"
    return (f"the client's event loop lagged up to {lag.lag_ms:.1f} ms while requests were in flight (median "
            f"decode window {lag.window_ms:.0f} ms): its own stamps can move the client-side speedup {moved}, "
            f"more than {LAG_WARN_SHARE:.0%} of the interval's half-width ({half:.2%}); the interval "
            f"[{stat_lo:.4f}, {stat_hi:.4f}] is widened by it to [{lo:.4f}, {hi:.4f}]. A quieter client host "
            "(or fewer streams per client) narrows it; the engine-side speedup does not depend on it")
