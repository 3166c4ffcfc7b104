"""Which clock a point's headline speedup is read from, and why.

Both clocks measure the same ratio. The client's is the one a user feels, so it leads
while its interval holds; a busy host's event-loop lag can ruin it (an interval reaching
0 or infinity, or one the lag bound widened past the engine's), and then the engine's
own per-request timing leads. The choice is made once, when the row is built
(metrics/formulas.py), and stored in the row, so every renderer, comparison and gate
reads one figure; :func:`headline_of` derives it for rows written before these keys.
Pure: it reads row cells only.
"""

from __future__ import annotations

import math
from typing import Any

from speedbench.metrics.cells import Cells, cell, num

CLIENT, ENGINE = "client", "engine"
# the row keys this module fills (declared in metrics/registry.py)
HEADLINE_KEYS = ("speedup_headline_clock", "speedup_headline_reason", "speedup_headline_mean",
                 "speedup_headline_ci_low", "speedup_headline_ci_high")
# each clock's (mean, low, high) row keys
CLOCK_KEYS = {CLIENT: ("speedup_mean", "speedup_ci_low", "speedup_ci_high"),
              ENGINE: ("speedup_engine_mean", "speedup_engine_ci_low", "speedup_engine_ci_high")}


def _interval(row: Cells, clock: str) -> tuple[float, float, float]:
    m, lo, hi = (num(cell(row, k)) for k in CLOCK_KEYS[clock])
    return m, lo, hi


def unbounded(lo: float, hi: float) -> bool:
    """An interval that says nothing about one side: a missing end, an infinite high end or
    a low end at 0 (a stalled client's lag widens it that far)."""
    return not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0


def choose_clock(row: Cells) -> tuple[str, str]:
    """(clock, reason) of the row's headline speedup."""
    cm, clo, chi = _interval(row, CLIENT)
    em, elo, ehi = _interval(row, ENGINE)
    if not math.isfinite(em):
        return CLIENT, "no engine-side speedup (the server gave no per-request timing)"
    if not math.isfinite(cm):
        return ENGINE, "no client-side speedup"
    if unbounded(clo, chi) and not unbounded(elo, ehi):
        return ENGINE, "the client-side interval is unbounded"
    lag = num(cell(row, "speedup_lag_bound"))
    widened = math.isfinite(lag) and lag > 0
    if widened and not unbounded(elo, ehi) and not unbounded(clo, chi) and chi - clo > ehi - elo:
        return ENGINE, "the client's loop lag widened its interval past the engine's"
    return CLIENT, "the client-side interval holds"


def headline_of(row: Cells) -> dict[str, Any]:
    """The headline keys of a row: its clock, the reason, and that clock's figure."""
    clock, reason = choose_clock(row)
    m, lo, hi = _interval(row, clock)
    return {"speedup_headline_clock": clock if math.isfinite(m) else "",
            "speedup_headline_reason": reason if math.isfinite(m) else "",
            "speedup_headline_mean": m, "speedup_headline_ci_low": lo, "speedup_headline_ci_high": hi}


def with_headline(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row with its headline keys: kept when it has them, derived when a run
    folder was written before they existed (an old folder still loads)."""
    if row.get("speedup_headline_clock") is None and "speedup_mean" in row:
        row.update(headline_of(row))
    return row


def headline(row: Cells) -> tuple[float, float, float]:
    """(mean, low, high) of the row's headline speedup, derived when the row lacks the keys."""
    if cell(row, "speedup_headline_clock") is None:
        h = headline_of(row)
        return h["speedup_headline_mean"], h["speedup_headline_ci_low"], h["speedup_headline_ci_high"]
    return (num(cell(row, "speedup_headline_mean")), num(cell(row, "speedup_headline_ci_low")),
            num(cell(row, "speedup_headline_ci_high")))


def headline_clock(row: Cells) -> str:
    clock = cell(row, "speedup_headline_clock")
    return str(clock) if clock is not None else str(headline_of(row)["speedup_headline_clock"])


def other_clock(clock: str) -> str:
    return ENGINE if clock == CLIENT else CLIENT


def clock_figure(row: Cells, clock: str) -> tuple[float, float, float]:
    """(mean, low, high) of one named clock."""
    return _interval(row, clock)


def category_headline(category: Cells, point: Cells | None) -> dict[str, Any]:
    """A per-category row's headline keys. A category follows its point's rule: the point's
    headline clock, read from the category's own figures of that clock, so a point's
    categories never show one clock beside the point's other. A category row written before
    the engine's figures were kept has none: its headline is then empty, not the client's."""
    clock = headline_clock(point) if point is not None else headline_clock(category)
    m, lo, hi = _interval(category, clock) if clock else (math.nan, math.nan, math.nan)
    return {"speedup_headline_clock": clock, "speedup_headline_mean": m,
            "speedup_headline_ci_low": lo, "speedup_headline_ci_high": hi}
