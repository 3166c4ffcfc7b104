"""Every summary column and every gateable metric, col once.

A summary row is a :class:`SummaryRow`, a frozen dataclass whose fields are its metrics:
each field's type is the cell's, and its :class:`Metric` says the rest: unit, direction
(``higher`` or ``lower`` is better, ``""`` for none), the label reports show, the formula,
what it is aggregated over and what it uses. From these declarations come:

- ``ROW_METRICS`` / ``ROW_KEYS`` (the fields of a summary row, in order; metrics/formulas.py
  registers each key's computation and fails a test on a key without one),
- the latency families whose mean/std/percentiles rows carry (``LATENCY``), and with
  the chosen percentiles every key of a row (``row_keys``),
- the gate's metrics, their row column and direction (metrics/gates.py: ``GATES``; ``GateSpec.metric``),
- report labels (``label``), and
- the tables of keys in docs/metrics.md, one per ``section`` (metrics/doc_tables.py renders
  them: ``python -m speedbench.metrics.doc_tables --write``).

Adding a metric is one field here plus its formula in metrics/formulas.py, then that command. Pure data:
this module imports nothing from speedbench but the records' PointKey and the declaring helpers
(metrics/declare.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from speedbench.metrics.declare import (ENGINE_CI, HEADLINE_CI, ALL, OK, PAIRS, SPEC, PREDICTED_CI,
                                       SPEEDUP_CI, Metric, decl, col)
from speedbench.records import PointKey


Num = float | None  # a number; None where summary.json stored NaN as null


@dataclass(frozen=True)
class SummaryRow:
    """One summary row, one per (arm, concurrency, variant): each field is a metric,
    col here once (type, unit, direction, label, formula, what it is taken over and
    which request columns or other keys it uses; its formula is registered under its key in
    metrics/formulas.py). Values are stored as summary.json holds them. Read a row by
    attribute; :meth:`cell` is for a key known only as data (a gate's column, a percentile).
    It is no Mapping: ``row["arm"]`` fails, so no reader can go back to string keys unseen."""

    # identity and arm facts (no docs table row: they describe the point, they measure nothing)
    arm: str = col("", "", "arm", "arm name", section="identity")
    template: str = col("", "", "template", "sweep template name, or the arm's own name", section="identity")
    series: str = col("", "", "series",
        "arms that differ only in k share it (a sweep's arm name without its k part); \"\" in run folders from "
        "before it was stored", section="identity")
    concurrency: int = col("", "", "c", "closed-loop concurrency level", section="identity")
    variant: str = col("", "", "variant", "workload variant (\"\" without variants)", section="identity")
    workload: str = col("", "", "workload",
        "the workload variant whose prompts the point sent: `variant` in a closed loop, the stored workload in rate "
        "mode (never read from the rate label; null where only the label is known)", section="identity")
    speculative: bool = col("", "", "speculative", "the arm sets a speculative_config", section="identity")
    method: str = col("", "", "method", "speculative_config.method", section="identity")
    num_speculative_tokens: int | None = col("", "", "k",
        "speculative_config.num_speculative_tokens", section="identity")
    eagle_version: str = col("", "", "EAGLE", "\"3\", \"3.1\" or \"\" (from the draft's config)", section="identity")
    # status, counts, throughput, latency summary
    status: str = col("", "", "status",
        "`ok`; `partial` (some errors); `failed` (no ok request, the server died, or the arm never started): the "
        "worst of the record-derived status and `PointInfo.status`; `ArmInfo.status` counts only for points without "
        "measured requests, so points an arm finished before it died keep their status", ALL,
        uses=("error", "PointInfo.status", "ArmInfo.status"))
    failure: str | None = col("text", "", "failure",
        "the explicit failure message, else a count of error kinds (`\"2 of 40 requests failed: timeout x2\"`)", ALL,
        uses=("error", "PointInfo.failure", "ArmInfo.failure"))
    n_requests: int = col("count", "", "requests", "measured requests (warmup excluded)", ALL, uses=("error",))
    n_ok: int = col("count", "", "ok", "measured requests without an error", ALL, uses=("error",))
    n_errors: int = col("count", "", "errors", "measured requests with an error", ALL, uses=("error",))
    error_rate: Num = col("fraction", "lower", "error rate", "`n_errors / n_requests`", ALL,
        uses=("n_errors", "n_requests"))
    per_user_tps_mean: Num = col("tokens/s", "higher", "per-user TPS", "mean of `per_user_tps`", OK,
        uses=("per_user_tps",))
    per_user_tps_median: Num = col("tokens/s", "higher", "per-user TPS median", "median of `per_user_tps`", OK,
        uses=("per_user_tps",))
    per_user_tps_p10: Num = col("tokens/s", "higher", "per-user TPS p10", "10th percentile of `per_user_tps`", OK,
        uses=("per_user_tps",))
    per_user_tps_p90: Num = col("tokens/s", "higher", "per-user TPS p90", "90th percentile of `per_user_tps`", OK,
        uses=("per_user_tps",))
    per_user_e2e_tps_mean: Num = col("tokens/s", "higher", "per-user E2E TPS", "mean of `per_user_e2e_tps`", OK,
        uses=("per_user_e2e_tps",))
    per_user_tps_engine_mean: Num = col("tokens/s", "higher", "per-user TPS (engine)",
        "mean of `engine_tps` = `(n - 1) / generation_time_ms`, from the engine's own per-request timing "
        "(`--enable-per-request-metrics`); NaN without it. The second, independent source of per-user TPS (see "
        "\"Engine-side TPS and bursts\" below).", OK,
        uses=("engine_tps",))
    tps_agree: bool | None = col("bool", "", "TPS agree",
        "`abs(client - engine) ≤ 5% · engine`, the means of `per_user_tps` and `engine_tps` over the ok requests "
        "that have both; None when either is missing. A false comes with a warning naming the likely cause.", OK,
        uses=("per_user_tps", "engine_tps"))
    n_burst: int = col("count", "lower", "bursts",
        "ok requests with at least 2 tokens that all arrived in one socket read, or (with engine timing) in a client "
        "window under half the engine's generation time: their client-side TPS is undefined (the server batched its "
        "output, or the client lagged). Never counted as a lost prompt.", OK, uses=("burst",))
    output_tps: Num = col("tokens/s", "higher", "output TPS",
        "`sum(n over all measured requests) / wall_s`; `wall_s` = first send → last end, summed over repeats (from "
        "`PointInfo.wall_s`, else from the records). Errored streams' tokens count: the server produced them.", ALL,
        uses=("n_out", "PointInfo.wall_s"))
    ttft_ms_mean: Num = col("ms", "lower", "TTFT mean", "mean of `ttft_ms`", OK, uses=("ttft_ms",))
    ttft_ms_median: Num = col("ms", "lower", "TTFT median", "median of `ttft_ms`", OK, uses=("ttft_ms",))
    ttft_ms_p90: Num = col("ms", "lower", "TTFT p90", "90th percentile of `ttft_ms`", OK, uses=("ttft_ms",))
    tpot_ms_mean: Num = col("ms", "lower", "TPOT mean", "mean of `tpot_ms`", OK, uses=("tpot_ms",))
    tpot_ms_median: Num = col("ms", "lower", "TPOT median", "median of `tpot_ms`", OK, uses=("tpot_ms",))
    itl_chunk_ms_median: Num = col("ms", "lower", "ITL per chunk median", "median of pooled inter-chunk gaps", OK,
        uses=("chunk_ns",))
    itl_token_ms_median: Num = col("ms", "lower", "ITL per token median",
        "median of pooled per-token ITL (token-weighted)", OK, uses=("chunk_ns", "chunk_tokens"))
    e2e_s_mean: Num = col("s", "lower", "E2E mean", "mean of `e2e_s`", OK, uses=("e2e_s",))
    # speedup against the baseline arm
    speedup_mean: Num = col("ratio", "higher", "speedup",
        "`mean(per_user_tps of arm) / mean(per_user_tps of baseline)` over the **pairs** both arms completed: the "
        "same requests the CI describes", PAIRS, "speedup",
        uses=("per_user_tps", "the baseline's"))
    speedup_median: Num = col("ratio", "higher", "speedup (median)",
        "`median(arm) / median(baseline)` over the same pairs", PAIRS, "speedup",
        uses=("per_user_tps", "the baseline's"))
    speedup_ci_low: Num = col("ratio", "", "speedup CI low", SPEEDUP_CI, PAIRS, "speedup",
        uses=("per_user_tps", "the baseline's", "stopping"))
    speedup_ci_high: Num = col("ratio", "", "speedup CI high", SPEEDUP_CI, PAIRS, "speedup",
        uses=("per_user_tps", "the baseline's", "stopping"))
    speedup_pairs: int = col("count", "", "pairs",
        "number of (prompt_index, turn, repeat) keys both arms completed. When ≥ 2 the bootstrap is **paired**: "
        "resampling draws pairs, which takes per-prompt difficulty out of the interval. Otherwise (0) each arm is "
        "resampled on its own and the point estimates use every ok request.", PAIRS,
        "speedup", uses=("prompt_index", "turn", "repeat"))
    speedup_mean_all: Num = col("ratio", "higher", "speedup (all requests)",
        "the mean ratio over every ok request of each arm; reported only when one arm completed a request the other "
        "did not (a prompt lost to a timeout in one arm), with a warning on the point. Bursts (undefined TPS) do not "
        "count as lost. NaN when the sets are the same.", OK, "speedup",
        uses=("per_user_tps", "the baseline's"))
    speedup_by_repeat: list[float] = col("list of ratios", "", "speedup per repeat",
        "the mean ratio within each repeat, in repeat order: one value per round of server starts, null for a round "
        "with no pair with a defined TPS (on a busy host every request of a round can arrive in one read)", PAIRS,
        "speedup", uses=("per_user_tps", "repeat"))
    speedup_between_sd: Num = col("ratio", "lower", "between-server spread",
        "sample standard deviation (ddof 1) of the non-null `speedup_by_repeat`; NaN with fewer than 2. The "
        "between-server spread on its own.", PAIRS, "speedup",
        uses=("speedup_by_repeat",))
    speedup_lag_bound: Num = col("fraction", "lower", "client lag bound",
        "the most the client's event-loop lag can have moved the client-side speedup, relative, either way: "
        "`max(1 − f_low, f_high − 1)` of \"The client's own timing error\" below; the interval above is widened by "
        "it. `null` (NaN) when no record carries its lag (runs written before it existed), `null` (inf) when a lag "
        "was as long as a decode window", PAIRS, "speedup", uses=("loop_lag_ns",))
    speedup_engine_mean: Num = col("ratio", "higher", "speedup (engine)",
        "`speedup_mean` computed from `engine_tps` instead of `per_user_tps`, over the pairs that have engine timing "
        "on both sides (bursts count here)", "pairs with engine timing", "speedup",
        uses=("engine_tps", "the baseline's"))
    speedup_engine_ci_low: Num = col("ratio", "", "speedup (engine) CI low", ENGINE_CI, "pairs with engine timing",
        "speedup", uses=("engine_tps", "the baseline's", "stopping"))
    speedup_engine_ci_high: Num = col("ratio", "", "speedup (engine) CI high", ENGINE_CI, "pairs with engine timing",
        "speedup", uses=("engine_tps", "the baseline's", "stopping"))
    speedup_headline_clock: str = col("text", "", "headline clock",
        "which clock the headline speedup is read from: `engine` where the client-side interval is unbounded (a "
        "missing or infinite end, or a low end of 0), where the loop-lag bound (`speedup_lag_bound` > 0) widened it "
        "past the engine's, or where there is no client-side speedup; `client` otherwise; empty on the baseline's "
        "rows. Chosen when the row is built (metrics/headline.py); derived on read for run folders written before it "
        "existed", "the point", "speedup", uses=("speedup_ci_low", "speedup_engine_ci_low", "speedup_lag_bound"))
    speedup_headline_reason: str = col("text", "", "headline reason",
        "why that clock leads, in words (reports print it beside the figure)", "the point",
        "speedup", uses=("speedup_headline_clock",))
    speedup_headline_mean: Num = col("ratio", "higher", "speedup (headline)",
        "`speedup_mean` or `speedup_engine_mean`, by `speedup_headline_clock`: the figure every report table, the "
        "dashboard's ★, `compare` and the `speedup` gate read", "that clock's pairs", "speedup",
        uses=("speedup_headline_clock",))
    speedup_headline_ci_low: Num = col("ratio", "", "speedup (headline) CI low", HEADLINE_CI, "that clock's pairs",
        "speedup", uses=("speedup_headline_clock",))
    speedup_headline_ci_high: Num = col("ratio", "", "speedup (headline) CI high", HEADLINE_CI, "that clock's pairs",
        "speedup", uses=("speedup_headline_clock",))
    proxy_speedup: Num = col("ratio", "higher", "proxy speedup",
        "SPEED-Bench proxy `S = t_ar · AL / t_sd`: `t_ar` = baseline time per decode step = `Σ decode_s / Σ (n - 1)` "
        "over baseline requests (step-weighted mean TPOT); `t_sd` = speculative time per verify step = "
        "`Σ decode_s / Σ num_spec_steps` over the arm's requests; `AL` = `al_tokens`. Bursts count on neither side "
        "(their client window is the delivery, not the decoding); null when either side has none left. Needs "
        "per-request spec metrics. When every step of both arms takes a fixed time, S equals the true speedup.", OK,
        "speedup", uses=("decode_s", "spec_steps", "al_tokens"))
    speedup_predicted: Num = col("ratio", "higher", "speedup (predicted)",
        "the matching calibration's curve at the row's concurrency, at the row's `al_tokens`; NaN without a "
        "calibration (or a curve at that level)", "the calibration file", "prediction",
        uses=("al_tokens", "calibration"))
    speedup_predicted_ci_low: Num = col("ratio", "", "speedup (predicted) CI low", PREDICTED_CI,
        "the calibration file", "prediction", uses=("al_tokens", "calibration"))
    speedup_predicted_ci_high: Num = col("ratio", "", "speedup (predicted) CI high", PREDICTED_CI,
        "the calibration file", "prediction", uses=("al_tokens", "calibration"))
    # acceptance
    al_tokens: Num = col("tokens/step", "higher", "AL (pooled over steps)",
        "AL **pooled over steps** = `1 + Σ accepted / Σ num_spec_steps` over ok requests (per-request counters)", SPEC,
        "acceptance", uses=("spec_accepted", "spec_steps"))
    al_requests: Num = col("tokens/step", "higher", "AL (mean over requests)",
        "AL **mean over requests** = `mean(1 + accepted / num_spec_steps)`; short requests weigh as much as long "
        "ones. SPEED-Bench's published per-category AL, so `reference.acceptance_length` is compared with this one.",
        SPEC, "acceptance", uses=("spec_accepted", "spec_steps"))
    al_prometheus: Num = col("tokens/step", "higher", "AL (Prometheus, pooled over steps)",
        "`1 + Δaccepted / Δdrafts` from the engine's accepted-token and draft counters (vLLM's names "
        "are below the table)", "counter deltas",
        "acceptance", uses=("Prometheus deltas",))
    al_agree: bool | None = col("bool", "", "AL agree",
        "`abs(al_tokens - al_prometheus) ≤ 1% · al_prometheus`; None when either is missing. A false here means the "
        "counters saw traffic the records did not (warmup inside the scrape window, errored requests, another "
        "client) or a server bug.", "", "acceptance",
        uses=("al_tokens", "al_prometheus"))
    draft_acceptance_rate: Num = col("fraction", "higher", "draft acceptance",
        "`Σ accepted / Σ num_draft_tokens` (per-request; Prometheus `Δaccepted / Δdraft_tokens` when no per-request "
        "data)", SPEC, "acceptance", uses=("spec_accepted", "spec_drafts"))
    acceptance_histogram: list[int] = col("list of counts", "", "acceptance histogram",
        "summed per-request histograms: `h[j]` = verify steps that accepted exactly `j` drafts", SPEC, "acceptance",
        uses=("spec",))
    per_position_joint: list[float] = col("list of fractions", "higher", "per-position (joint)",
        "`accepted_at_pos[i] / drafts`: P(at least i+1 drafts accepted). vLLM's per-position counter is this joint "
        "rate.", SPEC, "acceptance", uses=("Prometheus deltas",))
    per_position_conditional: list[float] = col("list of fractions", "higher", "per-position (conditional)",
        "`accepted_at_pos[i] / accepted_at_pos[i-1]` (`i = 0`: `/ drafts`): P(draft i accepted given drafts < i "
        "were)", SPEC, "acceptance", uses=("Prometheus deltas",))
    n_spec_malformed: int = col("count", "lower", "malformed spec metrics",
        "ok requests whose per-request spec metrics were present but unusable (`spec_error`); they count for timing, "
        "not for `al_tokens` / `al_requests`", OK, "acceptance", uses=("spec_malformed",))
    spec_overcount_share: Num = col("fraction", "", "spec overcount share",
        "share of spec requests where `1 + num_spec_steps + accepted` (the tokens the counters imply: the prefill "
        "token, then 1 + accepted per step) exceeds the output tokens. EOS or `max_tokens` cut a step inside its "
        "accepted drafts, and vLLM still counted them as accepted: AL from counters (`al_tokens`, `al_prometheus`) "
        "is then higher than the tokens delivered per step; the warning gives both. The other way round is no error "
        "and is not counted: decode steps that drafted nothing (n-gram lookup without a match) deliver a token but "
        "are no spec step.", SPEC, "acceptance",
        uses=("spec", "n_out"))
    spec_overcount_gt_k_share: Num = col("fraction", "lower", "spec overcount > k share",
        "share where the disagreement exceeds k, more than one cut step can explain (a server or parser bug)", SPEC,
        "acceptance", uses=("spec", "n_out"))
    # the client itself, and notes
    loop_lag_ms_max: Num = col("ms", "lower", "loop lag max",
        "worst overshoot of a 10 ms sleep on the client's event loop during the point (max over repeats). Large "
        "values mean the client, not the server, delayed timestamps.", "the point",
        uses=("PointInfo.loop_lag_ms_max",))
    # load (rate mode) and goodput
    request_rate: Num = col("req/s", "", "request rate",
        "the rate of the point's arrival schedule; `null` in closed loop", "the point", "rate",
        uses=("PointInfo.request_rate",))
    burstiness: Num = col("", "", "burstiness", "the gamma shape of its gaps (1 = Poisson); `null` in closed loop",
        "the point", "rate", uses=("PointInfo.burstiness",))
    goodput: Num = col("req/s", "higher", "goodput",
        "ok requests that meet every SLO in the scenario's `slo:` / `wall_s`; NaN without SLOs. A request meets "
        "`ttft_ms` when `ttft_ms ≤ SLO` (no token: never), `tpot_ms` when `tpot_ms ≤ SLO` (fewer than 2 tokens: "
        "TPOT 0, as vLLM), `e2el_ms` when `e2e_s × 1000 ≤ SLO`. Defined in both modes.", OK, "rate",
        uses=("ttft_ms", "tpot_ms", "e2e_s", "slo"))
    goodput_share: Num = col("fraction", "higher", "within SLO", "those requests / `n_requests`", ALL, "rate",
        uses=("ttft_ms", "tpot_ms", "e2e_s", "slo"))
    warnings: list[str] = col("list of text", "", "warnings",
        "what the point's figures need said next to them: counter resets, malformed spec metrics, truncated drafts, "
        "arms that completed different prompts", "the point",
        "acceptance", uses=("Prometheus deltas", "spec", "speedup", "stopping"))
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
