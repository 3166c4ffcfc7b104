"""Every summary column and every gateable metric, declared once.

A :class:`Metric` says what a summary-row key is: unit, direction (``higher`` or
``lower`` is better, ``""`` for none), the label reports show, the formula and what it
is aggregated over. From these declarations come:

- ``ROW_KEYS`` (the fixed keys of a summary row, in order; speedbench.metrics fills them),
- the latency families whose mean/std/percentiles rows carry (``LATENCY``), and with
  the chosen percentiles every key of a row (``row_keys``),
- the gate's metrics, their row column and direction (``GATES``; ``GateSpec.metric``),
- report labels (``label``), and
- the tables in docs/metrics.md (``docs_tables``; a test fails when they disagree).

Adding a metric is one entry here plus its formula in speedbench/metrics/. Pure data (and
the key names derived from it): this module imports nothing from speedbench.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    key: str  # the summary-row key (and CSV column)
    unit: str  # "" for identity and text columns
    better: str  # "higher", "lower" or "" (no direction)
    label: str  # short header in reports
    formula: str  # how it is computed (markdown)
    aggregation: str = ""  # what it is taken over
    section: str = "point"  # docs table: identity, point, speedup, acceptance


def _m(key: str, unit: str, better: str, label: str, formula: str, aggregation: str = "",
       section: str = "point") -> Metric:
    return Metric(key=key, unit=unit, better=better, label=label, formula=formula, aggregation=aggregation,
                  section=section)


_OK = "ok measured requests"
_ALL = "all measured requests"
_SPEC = "ok measured requests of a speculative arm"
_PAIRS = "pairs both arms completed"

ROW_METRICS: tuple[Metric, ...] = (
    # identity and arm facts (no docs table row: they describe the point, they measure nothing)
    _m("arm", "", "", "arm", "arm name", section="identity"),
    _m("template", "", "", "template", "sweep template name, or the arm's own name", section="identity"),
    _m("concurrency", "", "", "c", "closed-loop concurrency level", section="identity"),
    _m("variant", "", "", "variant", "workload variant (\"\" without variants)", section="identity"),
    _m("speculative", "", "", "speculative", "the arm sets a speculative_config", section="identity"),
    _m("method", "", "", "method", "speculative_config.method", section="identity"),
    _m("num_speculative_tokens", "", "", "k", "speculative_config.num_speculative_tokens", section="identity"),
    _m("eagle_version", "", "", "EAGLE", "\"3\", \"3.1\" or \"\" (from the draft's config)", section="identity"),
    # status, counts, throughput, latency summary
    _m("status", "", "", "status", "`ok`, `partial` (some errors) or `failed`", _ALL),
    _m("failure", "text", "", "failure", "the explicit failure message, else a count of error kinds", _ALL),
    _m("n_requests", "count", "", "requests", "measured requests (warmup excluded)", _ALL),
    _m("n_ok", "count", "", "ok", "measured requests without an error", _ALL),
    _m("n_errors", "count", "", "errors", "measured requests with an error", _ALL),
    _m("error_rate", "fraction", "lower", "error rate", "`n_errors / n_requests`", _ALL),
    _m("per_user_tps_mean", "tokens/s", "higher", "per-user TPS", "mean of `per_user_tps`", _OK),
    _m("per_user_tps_median", "tokens/s", "higher", "per-user TPS median", "median of `per_user_tps`", _OK),
    _m("per_user_tps_p10", "tokens/s", "higher", "per-user TPS p10", "10th percentile of `per_user_tps`", _OK),
    _m("per_user_tps_p90", "tokens/s", "higher", "per-user TPS p90", "90th percentile of `per_user_tps`", _OK),
    _m("per_user_e2e_tps_mean", "tokens/s", "higher", "per-user E2E TPS", "mean of `per_user_e2e_tps`", _OK),
    _m("per_user_tps_engine_mean", "tokens/s", "higher", "per-user TPS (engine)",
       "mean of `engine_tps` = `(n - 1) / generation_time_ms`, the engine's own per-request timing", _OK),
    _m("tps_agree", "bool", "", "TPS agree",
       "client and engine mean per-user TPS within 5% over the requests that have both", _OK),
    _m("n_burst", "count", "lower", "bursts",
       "ok requests whose tokens all arrived in one socket read, or in under half the engine's generation time "
       "(client TPS undefined)", _OK),
    _m("output_tps", "tokens/s", "higher", "output TPS", "`sum(n) / wall_s`, wall_s summed over repeats", _ALL),
    _m("ttft_ms_mean", "ms", "lower", "TTFT mean", "mean of `ttft_ms`", _OK),
    _m("ttft_ms_median", "ms", "lower", "TTFT median", "median of `ttft_ms`", _OK),
    _m("ttft_ms_p90", "ms", "lower", "TTFT p90", "90th percentile of `ttft_ms`", _OK),
    _m("tpot_ms_mean", "ms", "lower", "TPOT mean", "mean of `tpot_ms`", _OK),
    _m("tpot_ms_median", "ms", "lower", "TPOT median", "median of `tpot_ms`", _OK),
    _m("itl_chunk_ms_median", "ms", "lower", "ITL per chunk median", "median of pooled inter-chunk gaps", _OK),
    _m("itl_token_ms_median", "ms", "lower", "ITL per token median", "median of pooled per-token ITL", _OK),
    _m("e2e_s_mean", "s", "lower", "E2E mean", "mean of `e2e_s`", _OK),
    # speedup against the baseline arm
    _m("speedup_mean", "ratio", "higher", "speedup", "`mean(arm) / mean(baseline)` per-user TPS", _PAIRS, "speedup"),
    _m("speedup_median", "ratio", "higher", "speedup (median)", "`median(arm) / median(baseline)`", _PAIRS,
       "speedup"),
    _m("speedup_ci_low", "ratio", "", "speedup CI low",
       "95% bootstrap interval of the mean ratio, low end: repeats, then prompts (two-level)", _PAIRS, "speedup"),
    _m("speedup_ci_high", "ratio", "", "speedup CI high",
       "95% bootstrap interval of the mean ratio, high end: repeats, then prompts (two-level)", _PAIRS, "speedup"),
    _m("speedup_pairs", "count", "", "pairs", "(prompt_index, turn, repeat) keys both arms completed", _PAIRS,
       "speedup"),
    _m("speedup_mean_all", "ratio", "higher", "speedup (all requests)",
       "the mean ratio over every ok request of each arm, when the sets differ", _OK, "speedup"),
    _m("speedup_by_repeat", "list of ratios", "", "speedup per repeat",
       "the mean ratio within each repeat (a round of fresh server starts)", _PAIRS, "speedup"),
    _m("speedup_between_sd", "ratio", "lower", "between-server spread",
       "sample standard deviation of `speedup_by_repeat` (2 or more repeats)", _PAIRS, "speedup"),
    _m("speedup_lag_bound", "fraction", "lower", "client lag bound",
       "the most the client's event-loop lag can move the client-side speedup; the CI is widened by it",
       _PAIRS, "speedup"),
    _m("speedup_engine_mean", "ratio", "higher", "speedup (engine)",
       "`mean(arm) / mean(baseline)` of `engine_tps`; bursts count", "pairs with engine timing", "speedup"),
    _m("speedup_engine_ci_low", "ratio", "", "speedup (engine) CI low",
       "95% two-level bootstrap interval of the engine-side ratio, low end", "pairs with engine timing", "speedup"),
    _m("speedup_engine_ci_high", "ratio", "", "speedup (engine) CI high",
       "95% two-level bootstrap interval of the engine-side ratio, high end", "pairs with engine timing", "speedup"),
    _m("speedup_headline_clock", "text", "", "headline clock",
       "`engine` where the client-side interval is unbounded (a missing or infinite end, a low end of 0) or "
       "the loop-lag bound widened it past the engine's, or there is no client-side speedup; else `client`",
       "the point", "speedup"),
    _m("speedup_headline_reason", "text", "", "headline reason", "why that clock leads, in words", "the point",
       "speedup"),
    _m("speedup_headline_mean", "ratio", "higher", "speedup (headline)",
       "`speedup_mean` or `speedup_engine_mean`, by `speedup_headline_clock`: what reports, stars, comparisons "
       "and the `speedup` gate read", "that clock's pairs", "speedup"),
    _m("speedup_headline_ci_low", "ratio", "", "speedup (headline) CI low", "that clock's interval, low end",
       "that clock's pairs", "speedup"),
    _m("speedup_headline_ci_high", "ratio", "", "speedup (headline) CI high", "that clock's interval, high end",
       "that clock's pairs", "speedup"),
    _m("proxy_speedup", "ratio", "higher", "proxy speedup", "SPEED-Bench proxy `t_ar · AL / t_sd`", _OK, "speedup"),
    _m("speedup_predicted", "ratio", "higher", "speedup (predicted)",
       "the matching calibration's curve at this concurrency, at `al_tokens`", "the calibration file", "speedup"),
    _m("speedup_predicted_ci_low", "ratio", "", "speedup (predicted) CI low",
       "95% interval of the calibrated curve at that AL, low end", "the calibration file", "speedup"),
    _m("speedup_predicted_ci_high", "ratio", "", "speedup (predicted) CI high",
       "95% interval of the calibrated curve at that AL, high end", "the calibration file", "speedup"),
    # acceptance
    _m("al_tokens", "tokens/step", "higher", "AL (pooled over steps)", "`1 + Σ accepted / Σ num_spec_steps`", _SPEC,
       "acceptance"),
    _m("al_requests", "tokens/step", "higher", "AL (mean over requests)", "`mean(1 + accepted / num_spec_steps)`",
       _SPEC,
       "acceptance"),
    _m("al_prometheus", "tokens/step", "higher", "AL (Prometheus, pooled over steps)", "`1 + Δaccepted / Δdrafts`",
       "counter deltas",
       "acceptance"),
    _m("al_agree", "bool", "", "AL agree", "`al_tokens` within 1% of `al_prometheus`", "", "acceptance"),
    _m("draft_acceptance_rate", "fraction", "higher", "draft acceptance", "`Σ accepted / Σ num_draft_tokens`", _SPEC,
       "acceptance"),
    _m("acceptance_histogram", "list of counts", "", "acceptance histogram",
       "`h[j]` = verify steps that accepted exactly `j` drafts", _SPEC, "acceptance"),
    _m("per_position_joint", "list of fractions", "higher", "per-position (joint)", "`accepted_at_pos[i] / drafts`",
       _SPEC, "acceptance"),
    _m("per_position_conditional", "list of fractions", "higher", "per-position (conditional)",
       "`accepted_at_pos[i] / accepted_at_pos[i-1]`", _SPEC, "acceptance"),
    _m("n_spec_malformed", "count", "lower", "malformed spec metrics",
       "ok requests whose per-request spec metrics were unusable", _OK, "acceptance"),
    _m("spec_overcount_share", "fraction", "", "spec overcount share",
       "share of spec requests whose counters imply more tokens than were output", _SPEC, "acceptance"),
    _m("spec_overcount_gt_k_share", "fraction", "lower", "spec overcount > k share",
       "share where that disagreement exceeds k", _SPEC, "acceptance"),
    # the client itself, and notes
    _m("loop_lag_ms_max", "ms", "lower", "loop lag max",
       "worst overshoot of a 10 ms sleep on the client's event loop (max over repeats)", "the point"),
    # load (rate mode) and goodput
    _m("request_rate", "req/s", "", "request rate", "rate of the point's arrival schedule; null in closed loop",
       "the point"),
    _m("burstiness", "", "", "burstiness", "gamma shape of the arrival gaps (1 = Poisson); null in closed loop",
       "the point"),
    _m("goodput", "req/s", "higher", "goodput", "ok requests meeting every SLO of `slo:` / `wall_s`", _OK),
    _m("goodput_share", "fraction", "higher", "within SLO", "those requests / `n_requests`", _ALL),
    _m("warnings", "list of text", "", "warnings", "what the point's figures need said next to them", "the point",
       "acceptance"),
)

ROW_KEYS: tuple[str, ...] = tuple(m.key for m in ROW_METRICS)

# Top-level summary.json keys that measure something (the others are identity and set-up).
SUMMARY_METRICS: tuple[Metric, ...] = (
    _m("noise_floor", "list", "", "noise floor",
       "the A/A arm's speedup over the baseline per point, with both sources' intervals, simultaneous over the "
       "points (Bonferroni)", "the A/A arm's records",
       "summary"),
    _m("stopping", "list", "", "sequential stopping",
       "per stopped round of a point: why and after how many prompts it stopped, the speedup and AL with their "
       "intervals at the look level", "each point's rounds", "summary"),
    _m("baseline_source", "object", "", "baseline source",
       "where the baseline came from: measured here, or reused from an earlier run (its id, age and the canary)",
       "the baseline arm", "summary"),
    _m("screening", "list", "", "screening",
       "per speculative arm of a screening run: both ALs, per-position rates, the predicted speedups at each "
       "calibrated concurrency, promoted or not", "the arm's screening rows", "summary"),
    _m("promoted", "list", "", "promoted", "the arms the `promote:` rule picked for a full speed run",
       "the screening block", "summary"),
)
BY_KEY: dict[str, Metric] = {m.key: m for m in ROW_METRICS}

# Latency families: every row carries `<key>_mean`, `<key>_std` and `<key>_p<P>` for the
# scenario's percentiles (latency_keys).
LATENCY: tuple[Metric, ...] = (
    _m("ttft_ms", "ms", "lower", "TTFT", "`ttft_ms` of each ok request", _OK, "latency"),
    _m("tpot_ms", "ms", "lower", "TPOT", "`tpot_ms` of each ok request (NaN ones skipped)", _OK, "latency"),
    _m("itl_token_ms", "ms", "lower", "ITL per token",
       "pooled per-token ITL: each gap between token chunks divided by the later chunk's tokens, "
       "counted once per token", _OK, "latency"),
    _m("itl_chunk_ms", "ms", "lower", "ITL per chunk", "pooled inter-chunk gaps, one value per gap", _OK, "latency"),
    _m("e2e_ms", "ms", "lower", "E2E", "`e2e_s × 1000` of each ok request", _OK, "latency"),
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


@dataclass(frozen=True)
class GateMetric:
    """A metric a gate may name: which row column holds it, and which way is better."""

    name: str
    column: str
    fallback: str = ""  # a column to read when ``column`` is empty (AL without per-request data)
    suffix: str = ""  # unit as gate messages print it after a number
    speculative_only: bool = False  # without an arm, the gate applies to speculative arms only

    @property
    def better(self) -> str:
        return BY_KEY[self.column].better

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"


GATES: tuple[GateMetric, ...] = (
    # `speedup` reads the headline clock (metrics/headline.py); the other two name a clock
    GateMetric(name="speedup", column="speedup_headline_mean", suffix="×", speculative_only=True),
    GateMetric(name="speedup_client", column="speedup_mean", suffix="× (client clock)", speculative_only=True),
    GateMetric(name="speedup_engine", column="speedup_engine_mean", suffix="× (engine clock)",
               speculative_only=True),
    GateMetric(name="acceptance_length", column="al_tokens", fallback="al_prometheus",
               suffix=" tok/step (AL pooled over steps)",
               speculative_only=True),
    GateMetric(name="per_user_tps", column="per_user_tps_mean", suffix=" tok/s"),
    GateMetric(name="error_rate", column="error_rate"),
    GateMetric(name="output_tps", column="output_tps", suffix=" tok/s"),
)
GATE_METRICS: dict[str, GateMetric] = {g.name: g for g in GATES}
GATE_METRIC_NAMES: tuple[str, ...] = tuple(GATE_METRICS)


def label(key: str) -> str:
    """The report label of a row key (latency keys: family label and statistic)."""
    if key in BY_KEY:
        return BY_KEY[key].label
    for m in LATENCY:
        if key.startswith(m.key + "_"):
            return f"{m.label} {key[len(m.key) + 1:].replace('_', '.')}"
    return key
