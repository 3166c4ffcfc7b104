"""Synthetic but plausible run folders for the report, gate, compare and dashboard tests.

Records carry real chunk timings and spec counters so that anything recomputed from
them (per-user TPS, paired speedups, AL) agrees with the summary rows written here.
Nothing here validates names: tests plant hostile strings on purpose.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from speedbench.metrics.breakdown import category_rows
from speedbench.records import EngineTiming, PointKey, RequestRecord, SpecStats
from speedbench.results import RunDir

K = 3  # num_speculative_tokens of every synthetic speculative arm

DEFAULT_ARMS: list[dict[str, Any]] = [
    {"name": "baseline"},
    {"name": "eagle3", "speedup": {1: 1.85, 4: 1.6, 16: 1.5}, "al": 2.9, "draft": "org/eagle3-draft",
     "eagle_version": "3"},
    {"name": "eagle3.1", "speedup": {1: 2.03, 4: 1.71, 16: 1.66}, "al": 3.0, "draft": "org/eagle3.1-draft",
     "eagle_version": "3.1"},
]
CATEGORY_AL_OFFSET = {"coding": 0.05, "math": 0.3, "qa": -0.4, "rag": 0.0, "writing": -0.6}


def _speedup_at(arm: dict[str, Any], c: int) -> float:
    s = arm.get("speedup", 1.0)
    return float(s.get(c, list(s.values())[-1])) if isinstance(s, dict) else float(s)


def _accept_prob(mean_accepted: float) -> float:
    """q with q + q^2 + ... + q^K = mean_accepted: each draft position accepted with
    probability q given the previous one was (the usual geometric acceptance shape)."""
    lo, hi = 0.0, 1.0
    for _ in range(40):
        q = (lo + hi) / 2
        if sum(q ** i for i in range(1, K + 1)) < mean_accepted:
            lo = q
        else:
            hi = q
    return (lo + hi) / 2


@dataclass(frozen=True)
class _Request:
    """One synthetic request: its point, prompt, start, speed, length and AL."""

    key: PointKey
    i: int
    cat: str
    t0: int
    tps: float
    n_out: int
    al: float | None
    error: str | None = None


def _make_record(rng, q: _Request) -> RequestRecord:
    (arm, c, v), i, cat, t0, tps, n_out, al, error = q.key, q.i, q.cat, q.t0, q.tps, q.n_out, q.al, q.error
    spec = None
    if al:
        q = _accept_prob(min(max(al - 1, 0.0), K - 0.01))
        hist, steps, acc = [0] * (K + 1), 0, 0
        while steps + acc < n_out:  # every step emits its accepted drafts plus one token
            j = 0
            while j < K and rng.random() < q:
                j += 1
            hist[j] += 1
            steps += 1
            acc += j
        n_out = steps + acc
        spec = SpecStats(num_spec_steps=steps, num_draft_tokens=K * steps, num_accepted_tokens=acc,
                         acceptance_histogram=hist, mean_acceptance_length=1 + acc / steps)
    t_sent = t0
    t_first = t_sent + int((0.05 + 0.01 * c) * 1e9)
    span_ns = int((n_out - 1) / tps * 1e9)
    per_chunk = max(1, round(al)) if al else 1
    rest = n_out - 1
    sizes = [1] + [per_chunk] * (rest // per_chunk) + ([rest % per_chunk] if rest % per_chunk else [])
    m = len(sizes) - 1
    times = [t_first] + [t_first + int(span_ns * (j + 1) / m) for j in range(m)]
    rec = RequestRecord(arm=arm, concurrency=c, prompt_index=i, prompt_id=f"p{i}", variant=v, category=cat,
                        t_queued_ns=t_sent - 1000, t_sent_ns=t_sent, t_end_ns=times[-1] + 1_000_000,
                        chunk_ns=times, chunk_tokens=sizes, prompt_tokens=200 + i, output_tokens=n_out,
                        spec=spec, output_text="x" * 8)
    if error:
        rec.error, rec.error_detail, rec.chunk_ns, rec.chunk_tokens, rec.output_tokens, rec.spec = (
            error, "HTTP 500", [], [], 0, None)
    return rec


def _engine_timing(rec: RequestRecord, skew: float) -> None:
    """The engine's own decode span: the client's divided by ``skew`` (its TPS ``skew`` times the client's)."""
    if rec.ok:
        rec.engine = EngineTiming(generation_ms=(rec.chunk_ns[-1] - rec.chunk_ns[0]) / 1e6 / skew)


def _tps(rec: RequestRecord) -> float:
    return (rec.n_output - 1) / ((rec.chunk_ns[-1] - rec.chunk_ns[0]) / 1e9)


def _boot_ci(spec: np.ndarray, base: np.ndarray, rng) -> tuple[float, float]:
    """Paired bootstrap of mean(spec)/mean(base), the summary's speedup statistic."""
    idx = rng.integers(0, len(spec), size=(1000, len(spec)))
    ratios = spec[idx].mean(axis=1) / base[idx].mean(axis=1)
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def _al(recs: list[RequestRecord]) -> float:
    steps = sum(r.spec.num_spec_steps for r in recs if r.spec)
    acc = sum(r.spec.num_accepted_tokens for r in recs if r.spec)
    return 1 + acc / steps if steps else math.nan


def _row(arm, c, v, recs, base_recs, rng, failed_msg=None) -> dict[str, Any]:
    nan = math.nan
    spec = bool(arm.get("draft") or arm.get("al"))
    row: dict[str, Any] = {
        "arm": arm["name"], "template": arm["name"], "concurrency": c, "variant": v,
        "speculative": spec, "method": "eagle3" if spec else "", "num_speculative_tokens": K if spec else 0,
        "eagle_version": arm.get("eagle_version", ""),
    }
    ok = [r for r in recs if r.ok]
    if failed_msg:
        row.update(status="failed", failure=failed_msg, n_requests=0, n_ok=0, n_errors=0, error_rate=nan)
        for k in ("per_user_tps_mean", "per_user_tps_median", "per_user_tps_p10", "per_user_tps_p90",
                  "per_user_e2e_tps_mean", "output_tps", "ttft_ms_mean", "ttft_ms_median", "ttft_ms_p90",
                  "tpot_ms_mean", "tpot_ms_median", "itl_chunk_ms_median", "itl_token_ms_median", "e2e_s_mean",
                  "speedup_mean", "speedup_median", "speedup_ci_low", "speedup_ci_high", "proxy_speedup",
                  "al_tokens", "al_requests", "al_prometheus", "draft_acceptance_rate", "loop_lag_ms_max"):
            row[k] = nan
        row.update(speedup_pairs=0, al_agree=None, acceptance_histogram=[], per_position_joint=[],
                   per_position_conditional=[])
        return row
    row.update(_measured_cells(arm, recs, ok, rng))
    row.update(_speedup_cells(spec, ok, base_recs, rng))
    row.update(_acceptance_cells(spec, ok))
    return row


def _measured_cells(arm, recs, ok, rng) -> dict[str, Any]:
    tps = np.array([_tps(r) for r in ok])
    n_err = len(recs) - len(ok)
    wall = (max(r.t_end_ns for r in recs) - min(r.t_sent_ns for r in recs)) / 1e9
    ttft = np.array([(r.chunk_ns[0] - r.t_sent_ns) / 1e6 for r in ok])
    return dict(
        status="partial" if n_err else "ok", failure=None, n_requests=len(recs), n_ok=len(ok), n_errors=n_err,
        error_rate=n_err / len(recs), per_user_tps_mean=float(tps.mean()), per_user_tps_median=float(np.median(tps)),
        per_user_tps_p10=float(np.percentile(tps, 10)), per_user_tps_p90=float(np.percentile(tps, 90)),
        per_user_e2e_tps_mean=float(np.mean([r.n_output / ((r.t_end_ns - r.t_sent_ns) / 1e9) for r in ok])),
        output_tps=sum(r.n_output for r in ok) / wall, ttft_ms_mean=float(ttft.mean()),
        ttft_ms_median=float(np.median(ttft)), ttft_ms_p90=float(np.percentile(ttft, 90)),
        tpot_ms_mean=float(np.mean(1000 / tps)), tpot_ms_median=float(np.median(1000 / tps)),
        itl_chunk_ms_median=float(np.median(1000 / tps)) * (round(arm.get("al") or 1)),
        itl_token_ms_median=float(np.median(1000 / tps)),
        e2e_s_mean=float(np.mean([(r.t_end_ns - r.t_sent_ns) / 1e9 for r in ok])),
        loop_lag_ms_max=float(rng.uniform(0.2, 3.0)),
    )


def _speedup_cells(spec, ok, base_recs, rng) -> dict[str, Any]:
    nan = math.nan
    if spec and base_recs:
        base = {r.prompt_index: _tps(r) for r in base_recs if r.ok}
        spec_tps = np.array([_tps(r) for r in ok if r.prompt_index in base])
        base_tps = np.array([base[r.prompt_index] for r in ok if r.prompt_index in base])
        lo, hi = _boot_ci(spec_tps, base_tps, rng)
        sp = float(spec_tps.mean() / base_tps.mean())
        return dict(speedup_mean=sp, speedup_median=float(np.median(spec_tps) / np.median(base_tps)),
                    speedup_ci_low=lo, speedup_ci_high=hi, speedup_pairs=len(spec_tps), proxy_speedup=sp * 0.97)
    return dict(speedup_mean=nan, speedup_median=nan, speedup_ci_low=nan, speedup_ci_high=nan, speedup_pairs=0,
                proxy_speedup=nan)


def _acceptance_cells(spec, ok) -> dict[str, Any]:
    nan = math.nan
    if spec:
        hist = np.sum([r.spec.acceptance_histogram for r in ok], axis=0)
        steps = hist.sum()
        joint = [float(hist[i + 1:].sum() / steps) for i in range(K)]
        cond = [joint[0]] + [joint[i] / joint[i - 1] if joint[i - 1] else 0.0 for i in range(1, K)]
        al = _al(ok)
        return dict(al_tokens=al, al_requests=float(np.mean([r.spec.mean_acceptance_length for r in ok])),
                    al_prometheus=al * 1.002, al_agree=True,
                    draft_acceptance_rate=sum(r.spec.num_accepted_tokens for r in ok)
                    / sum(r.spec.num_draft_tokens for r in ok),
                    acceptance_histogram=[int(x) for x in hist], per_position_joint=joint,
                    per_position_conditional=cond)
    return dict(al_tokens=nan, al_requests=nan, al_prometheus=nan, al_agree=None, draft_acceptance_rate=nan,
                acceptance_histogram=[], per_position_joint=[], per_position_conditional=[])


@dataclass
class RunSpec:
    """What make_run builds; speculative arms are those with ``al``."""

    scenario: str = "cpu_tiny"
    arms: list[dict[str, Any]] | None = None  # None: DEFAULT_ARMS
    concurrencies: tuple[int, ...] = (1, 4, 16)
    categories: tuple[str, ...] = ("coding", "math")
    variants: tuple[str, ...] = ("",)
    n_prompts: int = 12
    created: dt.datetime | None = None  # None: 2026-11-30 12:00 UTC
    seed: int = 0
    model: str = "tiny/target"
    hardware: str = "1x NVIDIA H200 (synthetic)"
    failed_arms: tuple[str, ...] = ()
    base_tps: float = 100.0
    noise: float = 0.05
    error_arms: dict[str, int] | None = None
    reference: dict[str, Any] | None = None
    gates: list[dict[str, Any]] | None = None
    write_records: bool = True
    # engine timing on every ok record: the engine's TPS is the client's times this on speculative
    # arms (1 on the baseline), so the engine-clock speedup is the client's times it; None: none
    engine_skew: float | None = None


def make_run(root: str | Path, spec: RunSpec | None = None, **overrides: Any) -> RunDir:
    """A complete run folder (no report files). ``overrides``: RunSpec fields."""
    spec = replace(spec or RunSpec(), **overrides)
    arms = spec.arms if spec.arms is not None else DEFAULT_ARMS
    rng = np.random.default_rng(spec.seed)
    created = spec.created or dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)
    rd = RunDir.create(root, spec.scenario, now=created)
    rows, all_recs = _measure(rd, spec, arms, rng)
    # per-category rows as summary.py writes them (per-user TPS, paired speedup, both ALs)
    cat_rows = category_rows([r for recs in all_recs for r in recs], arms[0]["name"])
    reference = _write_setup(rd, spec, arms)
    rd.write_summary({"scenario": spec.scenario, "run_id": rd.name, "created_utc": created.isoformat(),
                      "hardware": spec.hardware, "baseline": arms[0]["name"], "reference": reference, "rows": rows,
                      "categories": cat_rows})
    return rd


def _measure(rd: RunDir, spec: RunSpec, arms: list[dict[str, Any]], rng) -> tuple[list, list[list[RequestRecord]]]:
    """Every point's records and summary row; points.json marked as a run marks it."""
    baseline = arms[0]["name"]
    prompt_diff = rng.uniform(0.8, 1.2, size=spec.n_prompts)
    lengths = rng.integers(40, 90, size=spec.n_prompts)
    rows: list[dict[str, Any]] = []
    all_recs: list[list[RequestRecord]] = []
    t0 = 1_000_000_000_000
    for arm in arms:
        for v in spec.variants:
            for c in spec.concurrencies:
                recs: list[RequestRecord] = []
                if arm["name"] not in spec.failed_arms:
                    n_err = (spec.error_arms or {}).get(arm["name"], 0)
                    for i in range(spec.n_prompts):
                        cat = spec.categories[i % len(spec.categories)]
                        al = arm.get("al")
                        al_req = al + CATEGORY_AL_OFFSET.get(cat, 0.0) + rng.normal(0, 0.05) if al else None
                        tps = spec.base_tps * prompt_diff[i] / (1 + 0.1 * math.log2(c)) * _speedup_at(arm, c)
                        tps *= 1 + spec.noise * rng.normal()
                        recs.append(_make_record(rng, _Request(PointKey(arm["name"], c, v), i, cat,
                                                               t0 + i * 10_000_000, tps, int(lengths[i]), al_req,
                                                               "http_status" if i < n_err else None)))
                        if spec.engine_skew is not None:
                            _engine_timing(recs[-1], spec.engine_skew if al else 1.0)
                    t0 += 100_000_000_000
                base_recs = [] if arm["name"] == baseline else [
                    r for a in all_recs for r in a if r.arm == baseline and r.concurrency == c and r.variant == v]
                msg = f"arm {arm['name']} failed to start: exit code 1" if arm["name"] in spec.failed_arms else None
                rows.append(_row(arm, c, v, recs, base_recs, rng, msg))
                all_recs.append(recs)
                if spec.write_records:  # before the point is marked: its count and digest go into points.json
                    for r in recs:
                        rd.append_record(r)
                status = "failed" if msg else ("partial" if any(not r.ok for r in recs) else "ok")
                rd.mark_point((arm["name"], c, v), status, failure=msg, wall_s=3.0, loop_lag_ms={"max": 1.0},
                              n_records=len(recs))
    return rows, all_recs


def _write_setup(rd: RunDir, spec: RunSpec, arms: list[dict[str, Any]]) -> dict[str, Any]:
    """scenario.yaml and provenance.json; the reference the summary repeats."""
    arm_dicts = []
    for a in arms:
        d: dict[str, Any] = {"name": a["name"], "description": a.get("description", "")}
        if a.get("al"):
            d["speculative_config"] = {"method": "eagle3", "model": a.get("draft", "draft"),
                                       "num_speculative_tokens": K}
        arm_dicts.append(d)
    reference = spec.reference if spec.reference is not None else {
        "source": "synthetic reference", "arm": arms[-1]["name"] if len(arms) > 1 else None,
        "speedup": {"1": 2.03, "4": 1.71, "16": 1.66}, "acceptance_length": {"coding": 3.013, "math": 3.403}}
    rd.write_scenario({"name": spec.scenario, "description": "synthetic", "server": {"model": spec.model},
                       "arms": arm_dicts, "baseline": arms[0]["name"], "concurrency": list(spec.concurrencies),
                       "reference": reference, "gates": spec.gates or []})
    # the shape of engine/vllm/provenance.py's collect_provenance
    hw = spec.hardware
    rd.write_provenance({a["name"]: {"arm": a["name"], "model": spec.model, "vllm_version": "0.32.0",
                                     "argv": ["vllm", "serve", spec.model], "speculative": bool(a.get("al")),
                                     "eagle_version": a.get("eagle_version", ""),
                                     "draft": {"model": a.get("draft", ""), "eagle_version": a.get("eagle_version", "")}
                                     if a.get("al") else {},
                                     "hardware": {"kind": "gpu", "gpus": [hw], "summary": hw}}
                         for a in arms if a["name"] not in spec.failed_arms})
    return reference


PLANTED = ("<script>document.title='PWNED';document.body.setAttribute('data-pwned','1');window.__pwned=1</script>"
           "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">")


def make_history(root: str | Path, n: int = 4, planted: bool = True) -> list[RunDir]:
    """Several cpu_tiny runs a few days apart (eagle3.1 improving), one kimi_coding run,
    and, when ``planted``, a run whose model and draft names carry script injections."""
    import copy

    out = []
    for i in range(n):
        arms = copy.deepcopy(DEFAULT_ARMS)
        arms[2]["speedup"] = {c: s * (1 + 0.02 * i) for c, s in arms[2]["speedup"].items()}
        arms[2]["al"] += 0.05 * i
        out.append(make_run(root, seed=i, arms=arms, n_prompts=8, categories=("coding", "math", "qa", "rag"),
                            created=dt.datetime(2026, 11, 1 + 3 * i, 9, tzinfo=dt.timezone.utc)))
    out.append(make_run(root, scenario="kimi_coding", seed=99, n_prompts=8,
                        arms=[{"name": "baseline"}, {"name": "eagle3.1", "speedup": {1: 2.0, 4: 1.7, 16: 1.65},
                                                     "al": 3.0, "draft": "lightseekorg/kimi-k2.6-eagle3.1-mla",
                                                     "eagle_version": "3.1"}],
                        created=dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc), hardware="4x GB200"))
    if planted:
        arms = copy.deepcopy(DEFAULT_ARMS)
        arms[1]["draft"] = PLANTED
        out.append(make_run(root, seed=7, arms=arms, n_prompts=8, model=f"target{PLANTED}", hardware=PLANTED,
                            created=dt.datetime(2026, 11, 25, tzinfo=dt.timezone.utc)))
    return out
