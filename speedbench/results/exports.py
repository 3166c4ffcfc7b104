"""``speedbench export RUN --format vllm|csv|parquet|json|speculation-profile`` (:func:`export_run`): a
loaded run folder for other tools, all written atomically. summary.csv and
records.parquet, written with every summary, are the write side's (formats.py).

``--format vllm`` writes one JSON per point with the keys that ``vllm bench serve
--save-result`` writes (vLLM 0.32, without ``--save-detailed``), so tools that read
those files read ours. Each figure is recomputed from the records with vLLM's own
definition (TPOT includes the wait for the end of the stream, ITL is per chunk,
``output_throughput`` counts completed requests only); docs/results.md lists every key,
its source and where it differs from the speedbench metric of a similar name.
``--format csv|parquet|json`` writes the summary rows and per-category rows in our own
schema (docs/metrics.md), plus the per-request records for parquet.
``--format speculation-profile`` is results/profile.py; ``category-matrix`` (several
runs) and ``mlflow`` (a tracking server) are commands/export.py's, over
results/category_matrix.py and results/mlflow_export.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from speedbench.client.scrape import SpecCounters
from speedbench.errors import UsageError
from speedbench.records import PointKey, RequestRecord, wall_s
from speedbench.results.files import atomic_write, atomic_write_with, ensure_dir, finite, safe_part
from speedbench.results.formats import data_frame, table_rows, write_parquet
from speedbench.results.output_summary import output_columns
from speedbench.results.run import Run
from speedbench.results.profile import write_profiles
from speedbench.results.stored_scenario import StoredWorkload

Counters = Callable[[str], SpecCounters]  # one Prometheus snapshot -> its counters (Engine.spec_counters)


# ---- speedbench export ------------------------------------------------------------------

FORMATS = ("vllm", "csv", "parquet", "json", "speculation-profile")

# vLLM's names for the latency distributions; values in ms over completed requests.
VLLM_LATENCIES = ("ttft", "tpot", "itl", "e2el")


def vllm_percentile_word(p: float) -> str:
    """vLLM's key spelling: 99 -> '99', 99.9 -> '99.9' (``p99.9_ttft_ms``)."""
    return str(int(p)) if int(p) == p else str(p)


def _dist(values: list[float], percentiles: Iterable[float]) -> dict[str, float]:
    """vLLM's statistics of one latency (seconds in, ms out). Like vLLM, an empty list
    gives 0 rather than NaN (its ``np.mean(xs or 0)``)."""
    a = np.asarray(values if values else [0.0], dtype=float) * 1000.0
    out = {"mean": float(a.mean()), "median": float(np.median(a)), "std": float(a.std())}
    for p in percentiles:
        out[f"p{vllm_percentile_word(p)}"] = float(np.percentile(a, p))
    return out


def _peak_output(recs: list[RequestRecord]) -> tuple[float, int]:
    """vLLM's ``max_output_tokens_per_s`` / ``max_concurrent_requests``: output tokens
    and requests in flight per whole second since the first send, maximum over seconds.
    vLLM counts one token per stream event; we count each chunk's tokens."""
    if not recs:
        return 0.0, 0
    t0 = min(r.t_sent_ns for r in recs)
    t1 = max(r.t_end_ns for r in recs)
    n = int(math.ceil((t1 - t0) / 1e9)) + 1
    tokens, active = np.zeros(n), np.zeros(n)
    for r in recs:
        for t, k in zip(r.chunk_ns, r.chunk_tokens):
            b = int((t - t0) // 1_000_000_000)
            if 0 <= b < n:
                tokens[b] += k
        lo, hi = int((r.t_sent_ns - t0) // 1_000_000_000), int((r.t_end_ns - t0) // 1_000_000_000)
        active[lo:hi + 1] += 1
    return float(tokens.max()), int(active.max())


def _spec_fields(prom: SpecCounters | None, ok: list[RequestRecord]) -> dict[str, Any]:
    """vLLM's ``spec_decode_*`` fields: Prometheus deltas around the point, as vLLM takes
    them; without snapshots, the per-request counters of the completed requests.
    ``spec_decode_acceptance_rate`` is a percent, as in vLLM."""
    if prom is not None and prom.draft_tokens > 0:
        drafts, draft_tokens, accepted = prom.drafts, prom.draft_tokens, prom.accepted
        per_pos = [a / drafts for a in prom.per_position] if drafts > 0 else []
    else:
        spec = [r.spec for r in ok if r.spec is not None and r.spec.num_spec_steps > 0]
        if not spec:
            return {}
        drafts = sum(s.num_spec_steps for s in spec)
        draft_tokens = sum(s.num_draft_tokens for s in spec)
        accepted = sum(s.num_accepted_tokens for s in spec)
        hist = [0] * max(len(s.acceptance_histogram) for s in spec)
        for s in spec:
            for j, v in enumerate(s.acceptance_histogram):
                hist[j] += v
        per_pos = [sum(hist[i + 1:]) / drafts for i in range(len(hist) - 1)] if drafts else []
        if draft_tokens <= 0:
            return {}
    return {
        "spec_decode_acceptance_rate": accepted / draft_tokens * 100.0,
        "spec_decode_acceptance_length": 1.0 + accepted / drafts if drafts > 0 else 0.0,
        "spec_decode_num_drafts": int(drafts),
        "spec_decode_draft_tokens": int(draft_tokens),
        "spec_decode_accepted_tokens": int(accepted),
        "spec_decode_per_position_acceptance_rates": per_pos,
    }


def _latencies(ok: list[RequestRecord]) -> tuple[list[float], ...]:
    """vLLM's TTFT, TPOT, ITL and E2EL samples (seconds) of the completed requests."""
    ttft: list[float] = []
    tpot: list[float] = []
    itl: list[float] = []
    e2el: list[float] = []
    for r in ok:
        lat = (r.t_end_ns - r.t_sent_ns) / 1e9
        e2el.append(lat)
        if r.chunk_ns:
            first = (r.chunk_ns[0] - r.t_sent_ns) / 1e9
            ttft.append(first)
            if r.n_output > 1:
                # vLLM: (latency - ttft) / (n - 1), the stream's end included
                tpot.append((lat - first) / (r.n_output - 1))
            itl.extend(np.diff(np.asarray(r.chunk_ns, dtype=np.int64)) / 1e9)
    return ttft, tpot, itl, e2el


def vllm_result(recs: list[RequestRecord], *, wall_s: float, percentiles: Iterable[float],
                header: dict[str, Any], prom: SpecCounters | None = None,
                request_goodput: float | None = None) -> dict[str, Any]:
    """One point as ``vllm bench serve --save-result`` writes it. ``recs``: the point's
    measured records (every repeat); ``header``: date, backend, label, model_id,
    tokenizer_id, num_prompts, request_rate, burstiness, max_concurrency."""
    ok = [r for r in recs if r.ok]
    out_lens = [r.n_output for r in ok]
    total_in = sum(r.prompt_tokens or 0 for r in ok)
    dur = wall_s if wall_s and wall_s > 0 else float("nan")
    peak_tokens, peak_active = _peak_output(ok)
    res: dict[str, Any] = {
        **header,
        "duration": wall_s,
        "completed": len(ok),
        "failed": len(recs) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": sum(out_lens),
        "request_throughput": len(ok) / dur,
        "request_goodput": request_goodput,
        "output_throughput": sum(out_lens) / dur,
        "total_token_throughput": (total_in + sum(out_lens)) / dur,
        # per request, in order, failed ones included (vLLM leaves their latency at 0)
        "latencies": [(r.t_end_ns - r.t_sent_ns) / 1e9 if r.ok else 0.0 for r in recs],
        "queue_times": [(r.t_sent_ns - r.t_queued_ns) / 1e9 if r.t_queued_ns else 0.0 for r in recs],
        "max_output_tokens_per_s": peak_tokens,
        "max_concurrent_requests": peak_active,
        "rtfx": 0.0,
    }
    res.update(_spec_fields(prom, ok))
    for name, values in zip(VLLM_LATENCIES, _latencies(ok)):
        for stat, v in _dist(values, percentiles).items():
            res[f"{stat}_{name}_ms"] = v
    return res


def _point_records(run: "Run") -> dict[PointKey, list[RequestRecord]]:
    out: dict[PointKey, list[RequestRecord]] = {}
    for r in run.records:
        if not r.warmup:
            out.setdefault(PointKey(r.arm, int(r.concurrency), r.variant or ""), []).append(r)
    return out


def _prom(run: "Run", key: PointKey, counters: Counters) -> SpecCounters | None:
    return run.dir.prometheus_delta(key, counters) if run.dir is not None else None


def vllm_results(run: "Run", counters: Counters) -> dict[PointKey, dict[str, Any]]:
    """Every point of the run with measured records, as vLLM result dicts (``counters``:
    the run's ``Engine.spec_counters``, which reads a Prometheus snapshot)."""
    saved = run.stored_scenario
    workload = saved.workload or StoredWorkload()
    model = str(saved.server.model or "")
    percentiles = run.percentiles
    date = (run.created_utc or "").replace("-", "").replace(":", "")[:15].replace("T", "-")
    by_point = _point_records(run)
    out: dict[PointKey, dict[str, Any]] = {}
    for row in run.rows:
        key = PointKey(row.arm, int(row.concurrency), row.variant or "")
        recs = by_point.get(key, [])
        if not recs:
            continue
        point = run.points.get(key)
        wall = (point.wall_s if point else None) or wall_s(recs)
        rate = row.request_rate
        backend = "openai" if workload.api == "completions" else "openai-chat"
        header = {
            "date": date, "endpoint_type": backend, "backend": backend,
            "label": key.arm + (f" [{key.variant}]" if key.variant else ""),
            "model_id": model, "tokenizer_id": str(workload.tokenizer or saved.server.tokenizer or model),
            "num_prompts": len(recs),
            # where `vllm bench serve --metadata KEY=VALUE` puts its keys: tools that read
            # vLLM's files pass them through (same outputs or no speedup travels with the point)
            **output_columns(run.outputs_of(*key)),
            "request_rate": rate if isinstance(rate, (int, float)) and math.isfinite(rate) else "inf",
            "burstiness": row.burstiness if row.burstiness is not None else 1.0,
            "max_concurrency": None if isinstance(rate, (int, float)) and math.isfinite(rate) else key.concurrency,
        }
        goodput = row.goodput
        prom = _prom(run, key, counters)
        out[key] = vllm_result(recs, wall_s=float(wall), percentiles=percentiles, header=header, prom=prom,
                               request_goodput=goodput if isinstance(goodput, (int, float)) and math.isfinite(goodput)
                               else None)
    return out


def vllm_file_name(key: PointKey) -> str:
    return "__".join([safe_part(key.arm),
                      f"c{key.concurrency}"] + ([safe_part(key.variant)] if key.variant else [])) + ".json"


def _to_parquet(df: Any, f: Any) -> None:
    df.to_parquet(f, index=False)


def export_run(run: "Run", fmt: str, out_dir: str | Path, counters: Counters) -> list[Path]:
    """Write ``run`` in ``fmt`` under ``out_dir``; returns the files written. ``counters``:
    the run's ``Engine.spec_counters`` (the vllm format's spec-decode fields). The csv and
    parquet tables name and order the speedups as summary.csv does (formats.table_rows)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    out = ensure_dir(Path(out_dir))
    if fmt == "vllm":
        return _export_vllm(run, out, counters)
    if fmt == "speculation-profile":
        written = write_profiles(run, out)
        if not written:
            raise UsageError(f"{run.path}: no speculative arm to describe")
        return written
    if fmt == "json":
        p = out / "summary.json"
        atomic_write(p, json.dumps(finite(run.summary), indent=1) + "\n")
        return [p]
    return _export_tables(run, fmt, out)


def _export_vllm(run: "Run", out: Path, counters: Counters) -> list[Path]:
    """One vLLM-format JSON per measured point."""
    written: list[Path] = []
    for key, res in vllm_results(run, counters).items():
        p = out / vllm_file_name(key)
        atomic_write(p, json.dumps(finite(res), indent=1) + "\n")
        written.append(p)
    if not written:
        raise UsageError(f"{run.path}: no measured records to export")
    return written


def _export_tables(run: "Run", fmt: str, out: Path) -> list[Path]:
    """The summary and category tables as csv or parquet (the records too, for parquet)."""
    written: list[Path] = []
    tables = {"summary": table_rows([r.to_dict() for r in run.rows], run.outputs_of),
              "categories": table_rows([c.to_dict() for c in run.categories])}
    for name, rows in tables.items():
        df = data_frame(rows)
        p = out / f"{name}.{fmt}"
        if fmt == "csv":
            for c in df.columns:  # lists as JSON text, as summary.csv writes them
                if df[c].map(lambda v: isinstance(v, (list, dict))).any():
                    df[c] = df[c].map(lambda v: json.dumps(finite(v)) if isinstance(v, (list, dict)) else v)
            atomic_write(p, df.to_csv(index=False))
        else:
            for c in df.columns:  # parquet needs one type per column; nested lists as JSON text
                if df[c].map(lambda v: isinstance(v, (list, dict))).any():
                    df[c] = df[c].map(lambda v: json.dumps(finite(v)))
            atomic_write_with(p, partial(_to_parquet, df))
        written.append(p)
    if fmt == "parquet" and run.records and run.dir is not None:
        if run.dir.parquet_path.exists():
            src = run.dir.parquet_path
            atomic_write_with(out / "records.parquet", lambda f: f.write(src.read_bytes()))
            written.append(out / "records.parquet")
        else:
            written.append(write_parquet(out / "records.parquet", run.records))
    return written
