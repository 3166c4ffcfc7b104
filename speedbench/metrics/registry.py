"""Every summary column and every gateable metric, declared once.

A summary row is a :class:`SummaryRow`, a frozen dataclass whose fields are its metrics,
declared by subject in metrics/row_point.py, row_speedup.py, row_acceptance.py and
row_notes.py: each field's type is the cell's, and its :class:`Metric` says the rest: unit,
direction (``higher`` or ``lower`` is better, ``""`` for none), the label reports show, the
formula text, what it is aggregated over, what it uses (request columns, the point's
inputs, other row keys) and its computation. From these declarations come:

- ``ROW_METRICS`` / ``ROW_KEYS`` (the fields of a summary row, in order; metrics/formulas.py
  computes them in the order their uses give, ``declare.computation_order``, which refuses
  a use nothing declares),
- the latency families whose mean/std/percentiles rows carry (``LATENCY``), and with
  the chosen percentiles every key of a row (``row_keys``),
- the gate's metrics, their row column and direction (metrics/gates.py: ``GATES``; ``GateSpec.metric``),
- report labels (``label``), and
- the tables of keys in docs/metrics.md, one per ``section`` (metrics/doc_tables.py renders
  them: ``python -m speedbench.metrics.doc_tables --write``).

Adding a metric is one field in the row module of its subject, then that command. Pure data:
these modules import nothing from speedbench but the records' PointKey and the declaring
helpers (metrics/declare.py); a computation is a function of the point's data, handed it by
metrics/formulas.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from speedbench.metrics.declare import OK, Metric, decl
from speedbench.metrics.row_acceptance import AcceptanceColumns
from speedbench.metrics.row_notes import NoteColumns
from speedbench.metrics.row_point import PointColumns
from speedbench.metrics.row_speedup import SpeedupColumns
from speedbench.records import PointKey



@dataclass(frozen=True)
class SummaryRow(NoteColumns, AcceptanceColumns, SpeedupColumns, PointColumns):
    """One summary row, one per (arm, concurrency, variant): each field is a metric,
    declared once, by subject, in metrics/row_point.py, row_speedup.py, row_acceptance.py
    and row_notes.py (in that order in the row): type, unit, direction, label, formula, what
    it is taken over, what it uses and its computation. Values are stored as summary.json
    holds them. Read a row by attribute; :meth:`cell` is for a key known only as data (a
    gate's column, a percentile). It is no Mapping: ``row["arm"]`` fails, so no reader can
    go back to string keys unseen."""

    # the latency block (`<family>_mean/_std/_p<P>` beyond the fields above), in row order;
    # in an old run folder's row, also any key no field declares any more
    more: Mapping[str, Any] = field(default_factory=dict)
    # the row's keys in its summary.json order: an old run folder's row may lack keys added
    # since (they read as None) and carry derived ones after its own (``from_dict``)
    order: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> PointKey:
        return PointKey(self.arm, int(self.concurrency), self.variant or "")

    def cell(self, key: str) -> Any:
        """A cell by its summary.json key, for a key known only as data: a gate's column, a
        latency percentile, an export's column list. A col key the row lacks is None."""
        if key in _FIELDS:
            return getattr(self, key)
        if key in self.more or is_row_key(key):
            return self.more.get(key)
        raise KeyError(f"{key!r} is not a summary-row key (metrics/registry.py declares none such)")

    def to_dict(self) -> dict[str, Any]:
        """The row as summary.json stores it: the col keys, then the latency block (an
        old folder's row: its own keys in its own order)."""
        cells = {k: getattr(self, k) for k in ROW_KEYS} | dict(self.more)
        return {k: cells.get(k) for k in (self.order or cells)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SummaryRow:
        """A row read back from summary.json (or from a dict built like one)."""
        known = {k: d[k] for k in _FIELDS if k in d}
        return cls(**known, more={k: v for k, v in d.items() if k not in _FIELDS}, order=tuple(d))


ROW_METRICS: tuple[Metric, ...] = tuple(replace(f.metadata["metric"], key=f.name) for f in fields(SummaryRow)
                                       if "metric" in f.metadata)
ROW_KEYS: tuple[str, ...] = tuple(m.key for m in ROW_METRICS)
_FIELDS = frozenset(ROW_KEYS)

# Top-level summary.json keys that measure something (the others are identity and set-up).
SUMMARY_METRICS: tuple[Metric, ...] = (
    decl("noise_floor", "list", "", "noise floor",
        "one entry per concurrency (or rate point) of the A/A arm, its speedup over the baseline on both clocks: "
        "`{concurrency, variant, speedup, ci_low, ci_high, "
        "speedup_engine, engine_ci_low, engine_ci_high, level, contains_one}`; `level`: each interval's level "
        "(`1 − 0.05 / k` for k points: simultaneous over the points, Bonferroni); `contains_one`: every defined "
        "interval of the entry (both clocks) holds 1.0; `[]` without `aa_check`", "the A/A arm's records",
        "noise_floor"),
    decl("stopping", "list", "", "sequential stopping",
        "one entry per stopped round of a point: `{arm, concurrency, variant, repeat, reason, prompts, look, n_looks, "
        "level, speedup, ci_low, ci_high, speedup_engine, engine_ci_low, engine_ci_high, al, al_ci_low, al_ci_high, "
        "lag_bound}`: why and after how many prompts it stopped, and the intervals at the look level as the run's "
        "last look found them (points.json; recomputed from the records for run folders written before it kept "
        "them); `[]` without `stop`", "each point's rounds", "stopping"),
    decl("baseline_source", "object", "", "baseline source",
        "`baseline.json`: `{reused, reason, results, run_id, path, measured_utc, age_days, canary: [{concurrency, "
        "variant, prompts, pairs, ratio, source, tolerance, tolerance_source, ok}]}` when `baseline_from` is set; "
        "`{reused: false}` without it. Reports print where the baseline came from (measured here, or reused from an "
        "earlier run) and how old it is.", "the baseline arm", "stopping"),
    decl("screening", "list", "", "screening",
        "per speculative arm of a screening run: `{arm, concurrency, variant, n_ok, al_tokens, al_requests, "
        "al_prometheus, draft_acceptance_rate, per_position_joint, per_position_conditional, predicted: "
        "[{concurrency, speedup, ci_low, ci_high}], calibration, promoted}` (`predicted`: the speedup and interval at "
        "each of the scenario's concurrency levels from the arm's calibration); `[]` otherwise",
        "the arm's screening rows", "screening"),
    decl("conditions", "object", "", "conditions",
        "what the host was doing while each round of each point ran (points.json's `conditions`: `{wall_s, cpus, "
        "load_1m: [start, end], host_busy_cores, engine_cores, client_cores, other_cores, steal_share, gpus, "
        "gpu_other_processes, not_checked}`) compared arm against baseline round by round: `{checked, not_checked, "
        "points: [{arm, concurrency, variant, confounded, why, rounds, arm_conditions, baseline_conditions}]}` (each "
        "side's rounds pooled, wall-time weighted, as the speedup pools them); a point "
        "is confounded when, on a saturated host, the CPUs other work left to the engine and client differ by "
        "more than 1.10x, CPU steal by more than 5 points, or a GPU's SM clock by more than 10% (docs/metrics.md, "
        "\"Trust\")", "each point's rounds", "trust"),
    decl("controls", "object", "", "controls",
        "`{present: [{arm, control}], failed: [{control, arm, concurrency, variant, why}], note}`: a self-draft or "
        "untrained control whose headline interval lies above 1.00x, or an A/A point whose interval excludes 1.00x "
        "(simultaneous over the A/A points at a 99% family level), fails; `note` says when a scenario has no "
        "controls", "the controls' rows and the noise floor",
        "trust"),
    decl("outputs", "object", "", "outputs",
        "each point's output tokens against its reference (the baseline's point; the baseline's own points against "
        "its lowest concurrency): `{near_tie_nats, top, checks_per_point, not_checked?, points: [{arm, concurrency, "
        "variant, reference, floor, verdict, reason, pairs, identical, identical_fraction, divergences, "
        "first_divergence: {min, median, max}, checked, near_ties, largest_margins}]}`; verdict `identical`, "
        "`lossless within numerics`, `lossy` or `not checked` (docs/metrics.md, \"Outputs\")",
        "each round's outputs file and the check pass", "trust"),
    decl("promoted", "list", "", "promoted", "the arms the `promote:` rule picked for a full speed run, best AL first",
        "the screening block", "screening"),
)
BY_KEY: dict[str, Metric] = {m.key: m for m in ROW_METRICS}

# Latency families: every row carries `<key>_mean`, `<key>_std` and `<key>_p<P>` for the
# scenario's percentiles (latency_keys).
LATENCY: tuple[Metric, ...] = (
    decl("ttft_ms", "ms", "lower", "TTFT", "`ttft_ms` of each ok request", OK, "latency"),
    decl("tpot_ms", "ms", "lower", "TPOT", "`tpot_ms` of each ok request (NaN ones skipped)", OK, "latency"),
    decl("itl_token_ms", "ms", "lower", "ITL per token",
        "pooled per-token ITL: each gap between token chunks divided by the later chunk's tokens, "
        "counted once per token (as in `itl_values`)", OK, "latency"),
    decl("itl_chunk_ms", "ms", "lower", "ITL per chunk", "pooled inter-chunk gaps, one value per gap", OK, "latency"),
    decl("e2e_ms", "ms", "lower", "E2E", "`e2e_s × 1000` of each ok request", OK, "latency"),
)
LATENCY_METRICS: tuple[str, ...] = tuple(m.key for m in LATENCY)
LATENCY_LABELS: dict[str, str] = {m.key: m.label for m in LATENCY}

# Latency distributions: for each of LATENCY_METRICS, `<name>_mean`, `<name>_std` and
# `<name>_p<P>` for every chosen percentile P (90 -> p90, 99.9 -> p99_9). Rows keep the
# fixed ROW_KEYS first; `row_keys(percentiles)` appends these (skipping ones already there).
DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0)


def percentile_tag(p: float) -> str:
    """90 -> 'p90', 99.9 -> 'p99_9' (a dot would not survive as a column or gate name)."""
    text = f"{float(p):g}"
    return "p" + text.replace(".", "_")


def latency_keys(percentiles: Iterable[float] = DEFAULT_PERCENTILES) -> tuple[str, ...]:
    tags = [percentile_tag(p) for p in percentiles]
    return tuple(f"{m}_{s}" for m in LATENCY_METRICS for s in ("mean", "std", *tags))


def row_keys(percentiles: Iterable[float] = DEFAULT_PERCENTILES) -> tuple[str, ...]:
    """Every key of a summary row for these percentiles: ROW_KEYS, then the latency block."""
    return ROW_KEYS + tuple(k for k in latency_keys(percentiles) if k not in ROW_KEYS)


def is_row_key(key: str) -> bool:
    """A col row key: a field of SummaryRow, or a latency family's mean/std/percentile."""
    return key in BY_KEY or any(key.startswith(m + "_") for m in LATENCY_METRICS)


def label(key: str) -> str:
    """The report label of a row key (latency keys: family label and statistic)."""
    if key in BY_KEY:
        return BY_KEY[key].label
    for m in LATENCY:
        if key.startswith(m.key + "_"):
            return f"{m.label} {key[len(m.key) + 1:].replace('_', '.')}"
    return key
