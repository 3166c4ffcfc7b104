"""How a summary-row metric is col (metrics/registry.py holds the declarations): the
:class:`Metric` record, the field helper, and the texts several declarations share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Metric:
    key: str  # the summary-row key (and CSV column)
    unit: str  # "" for identity and text columns
    better: str  # "higher", "lower" or "" (no direction)
    label: str  # short header in reports
    formula: str  # how it is computed (markdown)
    aggregation: str = ""  # what it is taken over
    section: str = "point"  # its table in docs/metrics.md (metrics/doc_tables.py); identity keys have none
    uses: tuple[str, ...] = ()  # the request columns, inputs or other row keys it is computed from


def decl(key: str, unit: str, better: str, label: str, formula: str, aggregation: str = "",
         section: str = "point") -> Metric:
    """A metric that is not a SummaryRow field (a summary block's key, a latency family)."""
    return Metric(key=key, unit=unit, better=better, label=label, formula=formula, aggregation=aggregation,
                  section=section)


def col(unit: str, better: str, label: str, formula: str, aggregation: str = "", section: str = "point",
        uses: tuple[str, ...] = ()) -> Any:
    """A SummaryRow column: the field declaring its metric (the key is the field's name); None when an
    old run folder's row lacks it."""
    metric = Metric(key="", unit=unit, better=better, label=label, formula=formula, aggregation=aggregation,
                    section=section, uses=uses)
    return field(default=None, metadata={"metric": metric})


OK = "ok measured requests"
ALL = "all measured requests"
SPEC = "ok measured requests of a speculative arm"
PAIRS = "pairs both arms completed"

# One description for both ends of an interval: metrics/doc_tables.py gives neighbouring keys
# col alike one row in docs/metrics.md
SPEEDUP_CI = (
    "95% percentile-bootstrap interval of the mean ratio (low and high end); 2000 resamples, seed 0 (the same records "
    "always give the same interval). Two-level when the point has several repeats (rounds of fresh server starts): "
    "resample repeats, then pairs within each drawn repeat, with the `sqrt(R/(R-1))` small-sample correction (see "
    "\"Run-to-run noise\"). Then widened by the client's own timing error (`speedup_lag_bound`)")
ENGINE_CI = "95% interval of `speedup_engine_mean` (low and high end), by the same two-level bootstrap"
HEADLINE_CI = ("that clock's stored interval (low and high end), unchanged: every renderer and export shows this one "
                "interval for the point")
PREDICTED_CI = "95% interval of the curve there (low and high end)"
