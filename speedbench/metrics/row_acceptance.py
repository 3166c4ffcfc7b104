"""The summary row's acceptance columns: AL from the per-request counters and from
Prometheus, draft acceptance, per-position rates, and the per-request spec metrics'
faults. Each field declares one metric with what it uses and its computation (``d``:
metrics/formulas.py's PointData, whose ``acceptance`` and ``overcount`` blocks compute a
point's figures once)."""

from __future__ import annotations

from dataclasses import dataclass

from speedbench.metrics.declare import OK, SPEC, col
from speedbench.metrics.row_point import Num


@dataclass(frozen=True)
class AcceptanceColumns:
    """A summary row's acceptance columns, after its speedups (metrics/registry.py's SummaryRow)."""

    al_tokens: Num = col("tokens/step", "higher", "AL (pooled over steps)",
        "AL **pooled over steps** = `1 + Σ accepted / Σ num_spec_steps` over ok requests (per-request counters)", SPEC,
        "acceptance", uses=("spec_accepted", "spec_steps"), compute=lambda d: d.acceptance["al_tokens"])
    al_requests: Num = col("tokens/step", "higher", "AL (mean over requests)",
        "AL **mean over requests** = `mean(1 + accepted / num_spec_steps)`; short requests weigh as much as long "
        "ones. SPEED-Bench's published per-category AL, so `reference.acceptance_length` is compared with this one.",
        SPEC, "acceptance", uses=("spec_accepted", "spec_steps"), compute=lambda d: d.acceptance["al_requests"])
    al_prometheus: Num = col("tokens/step", "higher", "AL (Prometheus, pooled over steps)",
        "`1 + Δaccepted / Δdrafts` from the engine's accepted-token and draft counters (vLLM's names "
        "are below the table)", "counter deltas",
        "acceptance", uses=("prom",), compute=lambda d: d.acceptance["al_prometheus"])
    al_agree: bool | None = col("bool", "", "AL agree",
        "`abs(al_tokens - al_prometheus) ≤ 1% · al_prometheus`; None when either is missing. A false here means the "
        "counters saw traffic the records did not (warmup inside the scrape window, errored requests, another "
        "client) or a server bug.", "", "acceptance",
        uses=("al_tokens", "al_prometheus"), compute=lambda d: d.acceptance["al_agree"])
    draft_acceptance_rate: Num = col("fraction", "higher", "draft acceptance",
        "`Σ accepted / Σ num_draft_tokens` (per-request; Prometheus `Δaccepted / Δdraft_tokens` when no per-request "
        "data)", SPEC, "acceptance", uses=("spec_accepted", "spec_draft_tokens", "prom"),
        compute=lambda d: d.acceptance["draft_acceptance_rate"])
    acceptance_histogram: list[int] = col("list of counts", "", "acceptance histogram",
        "summed per-request histograms: `h[j]` = verify steps that accepted exactly `j` drafts", SPEC, "acceptance",
        uses=("spec_hist",), compute=lambda d: d.acceptance["acceptance_histogram"])
    per_position_joint: list[float] = col("list of fractions", "higher", "per-position (joint)",
        "`accepted_at_pos[i] / drafts`: P(at least i+1 drafts accepted). vLLM's per-position counter is this joint "
        "rate.", SPEC, "acceptance", uses=("prom", "spec_hist"), compute=lambda d: d.acceptance["per_position_joint"])
    per_position_conditional: list[float] = col("list of fractions", "higher", "per-position (conditional)",
        "`accepted_at_pos[i] / accepted_at_pos[i-1]` (`i = 0`: `/ drafts`): P(draft i accepted given drafts < i "
        "were)", SPEC, "acceptance", uses=("prom", "spec_hist"),
        compute=lambda d: d.acceptance["per_position_conditional"])
    n_spec_malformed: int = col("count", "lower", "malformed spec metrics",
        "ok requests whose per-request spec metrics were present but unusable (`spec_error`); they count for timing, "
        "not for `al_tokens` / `al_requests`", OK, "acceptance", uses=("spec_malformed",),
        compute=lambda d: d.acceptance["n_spec_malformed"])
    spec_overcount_share: Num = col("fraction", "", "spec overcount share",
        "share of spec requests where `1 + num_spec_steps + accepted` (the tokens the counters imply: the prefill "
        "token, then 1 + accepted per step) exceeds the output tokens. EOS or `max_tokens` cut a step inside its "
        "accepted drafts, and vLLM still counted them as accepted: AL from counters (`al_tokens`, `al_prometheus`) "
        "is then higher than the tokens delivered per step; the warning gives both. The other way round is no error "
        "and is not counted: decode steps that drafted nothing (n-gram lookup without a match) deliver a token but "
        "are no spec step.", SPEC, "acceptance",
        uses=("spec_overcount", "has_spec", "n_out"), compute=lambda d: d.overcount["spec_overcount_share"])
    spec_overcount_gt_k_share: Num = col("fraction", "lower", "spec overcount > k share",
        "share where the disagreement exceeds k, more than one cut step can explain (a server or parser bug)", SPEC,
        "acceptance", uses=("spec_overcount", "has_spec", "arm.num_speculative_tokens"),
        compute=lambda d: d.overcount["spec_overcount_gt_k_share"])
