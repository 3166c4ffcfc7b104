"""``speedbench export RUN --format speculation-profile``: each speculative point of a run
as NVIDIA specdec_bench's ``speculation_profile.json`` (schema "1.0", field names from
``examples/specdec_bench/specdec_bench/speculation_profile.py`` in NVIDIA/Model-Optimizer).

The profile is the portable description of a draft's acceptance: per-position rates in
both conventions (conditional, as Dynamo's mocker reads them; marginal, as vLLM's
synthetic sampler reads them), the mean acceptance length per step and per request, and
two checks. Every figure is copied from the run's summary row, never recomputed, so a
profile and the run's reports cannot disagree:

- ``conditional_accept_rates`` = the row's ``per_position_conditional``
- ``marginal_accept_rates``    = the row's ``per_position_joint``
- ``mean_accept_length``       = ``al_tokens`` (per step: what the vectors describe)
- ``mean_accept_length_per_request`` = ``al_requests``

What specdec_bench has no field for (the run and point, ``al_prometheus``, the explicit
extrapolation over k) goes under a ``speedbench`` key of its own, so a reader of the
original schema sees only fields it knows. docs/results.md lists each field.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from speedbench.metrics.registry import SummaryRow
from speedbench.results.files import atomic_write, finite, safe_part
from speedbench.results.run import Run
from speedbench.results.stored_scenario import StoredWorkload

SCHEMA_VERSION = "1.0"
FILE_NAME = "speculation_profile.json"

# Drafters whose k-token draft is the first k tokens of their (k+1)-token draft: for
# them the marginal rates measured at k give the AL at every smaller k. The set is
# specdec_bench's; block-parallel and tree drafters re-plan the block when k changes.
CHAIN_METHODS = frozenset({"eagle", "eagle1", "eagle2", "eagle3", "draft_model"})

# specdec_bench's tolerance for AL vs 1 + sum(marginals).
MEAN_TOLERANCE = 0.02


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _rates(values: Any, k: int) -> list[float]:
    """The summary's list as floats, padded with zeros to k entries (specdec_bench always
    writes k; a position never reached has rate 0). Never cut: a longer list than k is
    the truncation the mean check exists to catch."""
    out = [float(x) if _num(x) is not None else 0.0 for x in (values or [])]
    return out + [0.0] * (k - len(out))


def checkpoint_id(path: str | None) -> str | None:
    """``org/model`` from a path or hub id: the profile travels with a checkpoint, so it
    must not carry the local folder layout (the full path stays in provenance.json)."""
    parts = [p for p in str(path or "").replace("\\", "/").split("/") if p and p != "."]
    return "/".join(parts[-2:]) if parts else None


def mean_check(mean_al: float, marginal: list[float]) -> dict[str, Any]:
    """Longest-prefix acceptance: AL per step = 1 + sum of the marginal rates. Both come
    from the same steps, so a gap means the vector was cut short (k understated) or the
    rates and the AL come from different counters (Prometheus vs per request)."""
    implied = 1.0 + sum(marginal)
    delta = abs(implied - mean_al)
    return {"implied_mean_accept_length": implied, "reported_mean_accept_length": mean_al,
            "abs_delta": delta, "tolerance": MEAN_TOLERANCE, "passed": delta <= MEAN_TOLERANCE}


def monotonicity_check(marginal: list[float]) -> dict[str, Any]:
    """A survival function cannot rise; a rise means malformed counts, not a strange draft."""
    bad = [{"position": i, "value": marginal[i], "previous": marginal[i - 1]}
           for i in range(1, len(marginal)) if marginal[i] > marginal[i - 1] + 1e-9]
    return {"passed": not bad, "violations": bad}


def extrapolate_over_k(marginal: list[float]) -> dict[str, float]:
    """AL at each k' <= k of a chain drafter: 1 + the first k' marginal rates. Beyond the
    measured k nothing is known, so nothing is written there."""
    return {str(j): 1.0 + sum(marginal[:j]) for j in range(1, len(marginal) + 1)}


def _al_by_k(run: Run, row: SummaryRow, draft: str) -> dict[str, float]:
    """Measured AL per k: this point, and any arm of the same run drafting with the same
    model and method at the same concurrency and variant (a sweep over k)."""
    out: dict[str, float] = {}
    for r in run.rows:
        if (r.concurrency, r.variant or "", r.method) != \
                (row.concurrency, row.variant or "", row.method):
            continue
        al, k = _num(r.al_tokens), r.num_speculative_tokens
        if al is not None and isinstance(k, int) and _draft_model(run, r.arm) == draft:
            out.setdefault(str(k), al)
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def _draft_model(run: Run, arm: str) -> str:
    return run.provenance_of(arm).draft_model


def _conditions(run: Run, row: SummaryRow) -> dict[str, Any]:
    """What a reader needs to interpret the numbers without the run folder."""
    workload = run.stored_scenario.workload or StoredWorkload()
    prov = run.provenance.get(str(row.arm))
    return {"dataset": workload.dataset, "categories": workload.categories,
            "concurrency": row.concurrency,
            "variant": row.variant or None, "engine": run.engine.name if run.engine else None,
            "engine_version": prov.engine_version if prov else None,
            "hardware": run.hardware, "temperature": workload.temperature,
            "max_tokens": workload.max_tokens, "num_requests": row.n_ok}


def _checkpoints(run: Run, arm: str) -> tuple[dict[str, Any], dict[str, Any]]:
    prov = run.provenance_of(arm)
    model = prov.draft_model
    target = prov.target or str(run.stored_scenario.server.model or "")
    return ({"id": checkpoint_id(model), "config_sha256": (prov.draft.config_sha256 if prov.draft else "") or None,
             "eagle_version": prov.eagle_version or None},
            {"id": checkpoint_id(target)})


def speculation_profile(run: Run, row: SummaryRow) -> dict[str, Any]:
    """One speculative summary row as a specdec_bench speculation profile."""
    k = int(row.num_speculative_tokens or 0)
    method = str(row.method or "") or None
    conditional = _rates(row.per_position_conditional, k)
    marginal = _rates(row.per_position_joint, k)
    per_step, per_request = _num(row.al_tokens), _num(row.al_requests)
    measured = per_step is not None
    chain = bool(method) and str(method).lower() in CHAIN_METHODS
    draft, target = _checkpoints(run, row.arm)
    hist = row.acceptance_histogram or []
    per_category = {c.category: _num(c.al_requests) for c in run.categories
                    if (c.arm, c.concurrency, c.variant or "") == (row.arm, row.concurrency, row.variant or "")}
    return {
        "schema_version": SCHEMA_VERSION, "measured": measured, "method": method,
        "draft_checkpoint": draft, "target_model": target, "num_speculative_tokens": k,
        "block_size": None, "max_supported_k": k, "verification_method": "longest_prefix",
        "conditional_accept_rates": conditional, "marginal_accept_rates": marginal,
        "mean_accept_length": per_step, "mean_accept_length_per_request": per_request,
        "accept_length_model": "chain_analytic" if chain else "measured_per_k",
        "accept_length_by_k": _al_by_k(run, row, _draft_model(run, row.arm)) if measured else {},
        # keyed by tokens per step (1 = no draft accepted), as specdec_bench keys it
        "acceptance_length_histogram": {str(j + 1): int(n) for j, n in enumerate(hist) if n} or None,
        "per_category": per_category or None,
        "measurement_conditions": _conditions(run, row),
        "validation": {"mean_consistency": mean_check(per_step, marginal),
                       "marginal_monotonicity": monotonicity_check(marginal)} if per_step is not None else None,
        "speedbench": _extension(run, row, marginal, chain, per_step, per_request),
    }


def _extension(run: Run, row: SummaryRow, marginal: list[float], chain: bool,
               per_step: float | None, per_request: float | None) -> dict[str, Any]:
    """speedbench's figures without a specdec_bench field."""
    delta = abs(per_step - per_request) if per_step is not None and per_request is not None else None
    return {"run_id": run.run_id, "scenario": run.scenario_name, "arm": row.arm,
            "concurrency": row.concurrency, "variant": row.variant or "",
            "al_prometheus": _num(row.al_prometheus), "al_agree": row.al_agree,
            "draft_acceptance_rate": _num(row.draft_acceptance_rate),
            "accept_length_extrapolated_by_k": extrapolate_over_k(marginal) if chain and per_step is not None
            else None,
            "per_step_vs_per_request": {"per_step": per_step, "per_request": per_request,
                                        "abs_delta": delta},
            # a profile of a draft that changed the target's outputs describes a lossy draft
            "outputs": _outputs(run, row)}


def _outputs(run: Run, row: SummaryRow) -> dict[str, Any]:
    """The point's outputs verdict (results/output_summary.py): verdict, identical fraction, reason."""
    e = run.outputs_of(str(row.arm), int(row.concurrency), str(row.variant or ""))
    return {"verdict": e.verdict_text, "identical_fraction": e.fraction, "reason": e.reason_text}


def profile_rows(run: Run) -> list[SummaryRow]:
    """The summary rows a profile describes: speculative arms' points."""
    return [r for r in run.rows if r.speculative and int(r.num_speculative_tokens or 0) > 0]


def profile_dir_name(row: SummaryRow) -> str:
    parts = [safe_part(str(row.arm)), f"c{row.concurrency}"]
    return "__".join(parts + ([safe_part(str(row.variant))] if row.variant else []))


def write_profile(run: Run, row: SummaryRow, out: Path) -> Path:
    """``out/<arm>__c<concurrency>[__<variant>]/speculation_profile.json``: the file keeps
    specdec_bench's name, so tools that look for it find it."""
    p = out / profile_dir_name(row) / FILE_NAME
    atomic_write(p, json.dumps(finite(speculation_profile(run, row)), indent=2) + "\n")
    return p


def write_profiles(run: Run, out: Path) -> list[Path]:
    """One profile per speculative point of the run."""
    return [write_profile(run, row, out) for row in profile_rows(run)]
