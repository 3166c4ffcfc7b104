"""The output check pass: after an arm's timed points, before its server stops.

Each of the arm's points is compared with its reference (metrics/outputs.py: the baseline's
point, or for the baseline itself its lowest concurrency). At the first divergence of each
differing request (the first ``CHECKS_PER_POINT`` of a point) the arm's own server is asked,
with one untimed request, for the target's top tokens after the prompt and the tokens both
sides shared. The first token of any request comes from the target's prefill alone, with no
draft involved, so a speculative server answers this as the target does; the baseline's
server is long gone by then. The answers go to ``outputs/<arm>/checks.r<R>.json``; the
summary reads them (results/output_summary.py). Nothing here touches the timed records, and
a failure of the pass is written down, never raised: the verdict then says why it is missing.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from speedbench.engine import Server
from speedbench.errors import OutputError
from speedbench.metrics import outputs as cmp
from speedbench.records import PointKey, RequestRecord
from speedbench.results import outputs as files
from speedbench.run.context import RunContext

_TIMEOUT_S = 60.0


def check_arm(ctx: RunContext, server: Server, arm: str, repeat: int) -> None:
    """The check pass for one round of one arm (never raises but for an unwritable folder)."""
    keys = [k for k in ctx.plan.points(arm)]
    kept = {k: ctx.round_records.pop((k, repeat), None) for k in keys}
    if ctx.scenario.workload.temperature > 0 or ctx.stop.is_set():
        return
    rounds = ctx.run_dir.point_rounds()
    every = [k for k, _ in rounds]
    found: list[dict[str, Any]] = []
    for key in keys:
        recs, ref = kept.get(key), files.reference(key, ctx.scenario.baseline_arm, every)
        if not recs or ref is None:
            continue
        rr = files.reference_round(rounds, ref, repeat)
        theirs = files.read_round(ctx.run_dir.path, rounds[(ref, rr)].get("outputs")) if rr is not None else None
        if theirs is None:
            continue
        found += _check_point(ctx, server, key, recs, cmp.compare(files.kept(recs), theirs))
    if found:
        try:
            ctx.run_dir.write_json(files.checks_path(arm, repeat), found)
        except OutputError as e:
            ctx.output_failed(e)


def _check_point(ctx: RunContext, server: Server, key: PointKey, recs: list[RequestRecord],
                 c: cmp.Comparison) -> list[dict[str, Any]]:
    by_request = {(r.prompt_index, r.turn): r for r in recs if r.ok}
    out = []
    for d in c.divergences[:cmp.CHECKS_PER_POINT]:
        if ctx.stop.is_set():
            break
        entry = {"concurrency": key.concurrency, "variant": key.variant, "prompt_index": d.prompt_index,
                 "turn": d.turn, "position": d.position, "ref_token": d.ref_token, "arm_token": d.arm_token}
        rec = by_request.get((d.prompt_index, d.turn))
        entry.update(_margin(ctx, server, rec, d))
        out.append(entry)
    return out


def _margin(ctx: RunContext, server: Server, rec: RequestRecord | None, d: cmp.Divergence) -> dict[str, Any]:
    """One check: {margin, exact, top} or {error}."""
    if d.ref_token < 0 or d.arm_token < 0:
        return {"error": "the outputs differ in length"}
    if rec is None or rec.prompt_ids is None:
        return {"error": "the server sent no prompt token ids"}
    engine = ctx.plan.engine
    req = engine.margin_request(server.model_name or "", list(rec.prompt_ids), rec.output_ids[:d.position], cmp.TOP)
    if req is None:
        return {"error": "the engine has no request for the target's top tokens"}
    t0 = time.monotonic()
    body, err = _post(server, *req)
    if err:
        return {"error": err}
    top = engine.read_top(body)
    if top is None:
        return {"error": "the check's answer had no top tokens"}
    m, exact = cmp.margin(top, d.ref_token, d.arm_token)
    return {"margin": m, "exact": exact, "top_listed": len(top), "check_s": round(time.monotonic() - t0, 3)}


def _post(server: Server, path: str, body: dict) -> tuple[Any, str]:
    headers = {"Content-Type": "application/json"}
    if server.api_key:
        headers["Authorization"] = f"Bearer {server.api_key}"
    req = urllib.request.Request(server.base_url.rstrip("/") + path, data=json.dumps(body).encode(),
                                 headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=_TIMEOUT_S) as resp:
            return json.loads(resp.read()), ""
    except urllib.error.HTTPError as e:
        head = e.read()[:300].decode("utf-8", "replace")
        return None, f"the check request was refused (HTTP {e.code}: {head})"
    except (OSError, ValueError) as e:
        return None, f"the check request failed ({type(e).__name__}: {e})"
