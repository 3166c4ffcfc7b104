"""A baseline taken from an earlier run (``baseline_from:``), checked by a canary first
(docs/metrics.md, "Reused baselines").

The baseline's server still starts once (its provenance is what the earlier run is
matched against), and measures a few prompts at each point: the canary. When every
canary point reads the earlier baseline's per-user TPS within the noise floor, the
earlier run's baseline records are copied into this run folder (so the folder stays
self-contained and reports recompute from it alone) and its points are marked done;
otherwise the baseline is measured in full on the same server. ``baseline.json`` records
either way what was decided and why; the summary's ``baseline_source`` is that file.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from speedbench.engine.provenance import Provenance
from speedbench.engine import Server
from speedbench.loadgen import Target, measure, run_async
from speedbench.stopping.schedule import prompt_order
from speedbench.metrics.table import request_table
from speedbench.records import PointKey, RequestRecord
from speedbench.results.baselines import Candidate, find_candidates, pick
from speedbench.run.context import RunContext
from speedbench.run.point import client_side

BASELINE_FILE = "baseline.json"
# points.json fields that mark_point writes itself (the rest of an entry is copied)
_OWN_FIELDS = ("arm", "concurrency", "variant", "repeat", "status", "failure", "wall_s", "finished_utc",
               "record_count", "records_sha256", "job")


def reuse_baseline(ctx: RunContext, server: Server, prov: Provenance) -> bool:
    """True when the earlier run's baseline was taken (its points are then done here)."""
    sc, spec = ctx.scenario, ctx.scenario.baseline_from
    if spec is None or sc.baseline_arm is None:
        return False
    found, why = pick(find_candidates(spec.results, sc, prov, ctx.plan.engine, exclude=ctx.run_dir.path),
                      spec.max_age_days)
    decision: dict[str, Any] = {"reused": False, "results": spec.results}
    if found is None:
        _decide(ctx, {**decision, "reason": why})
        return False
    old = [r for r in found.run_dir.load_records() if r.arm == found.baseline and not r.warmup]
    canary = [_canary(ctx, server, key, found, old) for key in ctx.plan.points(sc.baseline_arm)]
    source = {"run_id": found.run_dir.name, "path": str(found.run_dir.path),
              "measured_utc": found.created.isoformat(timespec="seconds"), "age_days": round(found.age_days, 3),
              "canary": canary}
    bad = [c for c in canary if not c["ok"]]
    if bad or ctx.stop.is_set():
        c = bad[0] if bad else canary[0]
        _decide(ctx, {**decision, **source, "reason": f"canary at c={c['concurrency']} read {c['ratio']:.3f}x of "
                      f"the earlier baseline, outside ±{c['tolerance']:.1%} ({c['tolerance_source']}): measured again"})
        return False
    _copy(ctx, found, old)
    _decide(ctx, {**decision, **source, "reused": True,
                  "reason": f"canary within the noise floor at {len(canary)} point(s)"})
    return True


def _decide(ctx: RunContext, decision: dict[str, Any]) -> None:
    ctx.run_dir.write_json(BASELINE_FILE, decision)
    if decision["reused"]:
        ctx.live.message(f"baseline: reused from {decision['run_id']} ({decision['age_days']:.1f} days old)")
    else:
        ctx.live.message(f"baseline: measured in this run ({decision['reason']})")


def _canary(ctx: RunContext, server: Server, key: PointKey, found: Candidate,
            old: list[RequestRecord]) -> dict[str, Any]:
    """A few prompts at one point, paired with the earlier baseline's same prompts."""
    sc = ctx.scenario
    assert sc.baseline_from is not None
    job = ctx.plan.job(key, ctx.prepared.workloads, 0)
    n = min(len(job.prompts), max(sc.baseline_from.canary_prompts, key.concurrency))
    # the prompts the earlier run sent first: under sequential stopping, its seeded order
    order = prompt_order(len(job.prompts), sc.stop.seed) if sc.stop else list(range(len(job.prompts)))
    builder, cfg = client_side(ctx, server, key, job)
    target = Target(client=cfg, builder=builder, server_alive=server.dead)
    m = run_async(measure(target, job, ctx.plan.engine, batches=[order[:n]]))
    now = [r for res in m.repeats for r in res.records]
    then = [r for r in old if (r.concurrency, r.variant or "") == (key.concurrency, key.variant)]
    ratio, pairs, source = _paired_ratio(now, then)
    tol, tol_source = _tolerance(found, key, sc.baseline_from.tolerance, source)
    return {"concurrency": key.concurrency, "variant": key.variant, "prompts": n, "pairs": pairs,
            "ratio": ratio, "source": source, "tolerance": tol, "tolerance_source": tol_source,
            "ok": pairs >= 2 and math.isfinite(ratio) and abs(ratio - 1) <= tol}


def _paired_ratio(now: list[RequestRecord], then: list[RequestRecord]) -> tuple[float, int, str]:
    """mean(now) / mean(then) of per-user TPS over the (prompt, turn) both have, the
    earlier run's rounds averaged per prompt first. The engine's clock when 2 or more
    prompts have it on both sides: the canary asks whether the server moved, and the
    client's clock also moves with the client's own event-loop lag (a busy host's 0.8 s
    stall read a same-server canary at 2.08x). The client's clock otherwise. Also
    returns the pairs and the source used."""
    a, b = request_table(now), request_table(then)
    if a.empty or b.empty:
        return math.nan, 0, ""
    pairs = 0
    for col in ("engine_tps", "per_user_tps"):
        x = a[a["ok"]].groupby(["prompt_index", "turn"])[col].mean()
        y = b[b["ok"]].groupby(["prompt_index", "turn"])[col].mean()
        both = x.to_frame("now").join(y.to_frame("then"), how="inner").dropna()
        pairs = max(pairs, len(both))
        if len(both) >= 2:
            return float(np.mean(both["now"]) / np.mean(both["then"])), len(both), col
    return math.nan, pairs, ""


def _tolerance(found: Candidate, key: PointKey, default: float, source: str) -> tuple[float, str]:
    """How far the canary may read from 1.0: the earlier run's A/A noise floor at this
    point on the canary's clock (``source``; the farther end of its interval from 1.0),
    else the scenario's default."""
    floor = found.run_dir.read_json("summary.json", {}).get("noise_floor") or []
    ends = ("engine_ci_low", "engine_ci_high") if source == "engine_tps" else ("ci_low", "ci_high")
    for f in floor:
        if (f.get("concurrency"), f.get("variant") or "") == (key.concurrency, key.variant):
            lo, hi = f.get(ends[0]), f.get(ends[1])
            if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and math.isfinite(lo + hi):
                return max(hi - 1, 1 - lo, 0.0), f"A/A noise floor of {found.run_dir.name}"
    return default, "default tolerance"


def _copy(ctx: RunContext, found: Candidate, old: list[RequestRecord]) -> None:
    """The earlier baseline's finished rounds into this folder, under this run's baseline
    name, each marked done (with ``reused_from``) after its records, as a measured round is."""
    name = ctx.scenario.baseline_arm
    assert name is not None
    by_round: dict[tuple[PointKey, int], list[RequestRecord]] = {}
    for r in old:
        rnd_key = (PointKey(found.baseline, r.concurrency, r.variant or ""), int(r.repeat or 0))
        by_round.setdefault(rnd_key, []).append(r)
    for (key, rnd), entry in found.run_dir.rounds().items():
        if key.arm != found.baseline or not entry.done or rnd >= ctx.plan.rounds:
            continue
        for r in by_round.get((key, rnd), []):
            r.arm = name
            ctx.run_dir.append_record(r)
        here = key._replace(arm=name)
        extra = {k: v for k, v in entry.to_dict().items() if k not in _OWN_FIELDS}
        ctx.run_dir.mark_point(here, str(entry.status), repeat=rnd, failure=entry.failure,
                               wall_s=entry.wall_s, **{**extra, "reused_from": found.run_dir.name})
        ctx.done_points.add((here, rnd))

