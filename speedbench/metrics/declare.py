"""How a summary-row metric is declared (metrics/registry.py gathers the declarations): the
:class:`Metric` record, the field helper, the order its declared uses give the computation,
and the texts several declarations share."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

# A metric's computation: the point's data (metrics/formulas.py's PointData) -> its cell.
# Typed loosely here: the declarations import nothing that computes (pandas, numpy).
Compute = Callable[[Any], Any]


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
    compute: Compute | None = None  # its computation; the row keys in ``uses`` are computed first


def decl(key: str, unit: str, better: str, label: str, formula: str, aggregation: str = "",
         section: str = "point") -> Metric:
    """A metric that is not a SummaryRow field (a summary block's key, a latency family)."""
    return Metric(key=key, unit=unit, better=better, label=label, formula=formula, aggregation=aggregation,
                  section=section)


def col(unit: str, better: str, label: str, formula: str, aggregation: str = "", section: str = "point",
        uses: tuple[str, ...] = (), compute: Compute | None = None) -> Any:
    """A SummaryRow column: the field declaring its metric (the key is the field's name), with what
    it uses and its computation; None when an old run folder's row lacks it."""
    metric = Metric(key="", unit=unit, better=better, label=label, formula=formula, aggregation=aggregation,
                    section=section, uses=uses, compute=compute)
    return field(default=None, metadata={"metric": metric})


class DeclarationError(ValueError):
    """A metric's declaration that cannot be computed: a use nothing declares, no
    computation, or metrics that use each other in a circle."""


def computation_order(metrics: Sequence[Metric], inputs: Collection[str]) -> tuple[Metric, ...]:
    """``metrics`` in an order that computes each one after the metrics it uses (declaration
    order where the uses leave a choice). Every use must be another of ``metrics`` or one of
    ``inputs`` (a request column or an input of the point): a use nothing declares is a
    DeclarationError naming the metric and the use, so a misspelt or missing dependency
    fails when the declarations are read, not as a wrong row."""
    keys = {m.key for m in metrics}
    for m in metrics:
        if m.compute is None:
            raise DeclarationError(f"metric {m.key!r} declares no computation (compute=)")
        unknown = [u for u in m.uses if u not in keys and u not in inputs]
        if unknown:
            raise DeclarationError(f"metric {m.key!r} uses {', '.join(map(repr, unknown))}: no metric, request "
                                   "column or point input is declared under that name")
    order: list[Metric] = []
    done: set[str] = set()
    left = list(metrics)
    while left:
        ready = next((m for m in left if all(u in done or u not in keys for u in m.uses)), None)
        if ready is None:
            raise DeclarationError(f"metrics use each other in a circle: {', '.join(m.key for m in left)}")
        order.append(ready)
        done.add(ready.key)
        left.remove(ready)
    return tuple(order)


OK = "ok measured requests"
ALL = "all measured requests"
SPEC = "ok measured requests of a speculative arm"
PAIRS = "pairs both arms completed"

# One description for both ends of an interval: metrics/doc_tables.py gives neighbouring keys
# declared alike one row in docs/metrics.md
SPEEDUP_CI = (
    "95% percentile-bootstrap interval of the mean ratio (low and high end); 2000 resamples, seed 0 (the same records "
    "always give the same interval). Two-level when the point has several repeats (rounds of fresh server starts): "
    "resample repeats, then pairs within each drawn repeat, with the `sqrt(R/(R-1))` small-sample correction (see "
    "\"Run-to-run noise\"). Then widened by the client's own timing error (`speedup_lag_bound`)")
ENGINE_CI = "95% interval of `speedup_engine_mean` (low and high end), by the same two-level bootstrap"
HEADLINE_CI = ("that clock's stored interval (low and high end), unchanged: every renderer and export shows this one "
                "interval for the point")
PREDICTED_CI = "95% interval of the curve there (low and high end)"
