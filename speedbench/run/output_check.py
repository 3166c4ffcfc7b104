"""The output check pass: after every arm's rounds, on the baseline's own server.

Each round of each point is compared with its reference (results/outputs.py's
``reference``: the baseline's point at the same load; the baseline's own points against
its lowest concurrency). Only when some request's outputs differ does the pass run: it
starts the baseline's server again (an endpoint's is already there), and for the first
``CHECKS_PER_POINT`` divergences of each point sends one untimed request: the prompt's ids
as the server tokenised them, plus the tokens both sides shared, asking for the target's
top tokens at the next position (the engine's ``margin_request``). It is the baseline that
answers, so a speculative server that also computed its prefill wrongly cannot vouch for
itself. The answers go to ``outputs/checks.json``; the summary reads them
(results/output_summary.py). A run whose outputs all match starts nothing. Nothing here
touches the timed records; a failure is written down as the check's answer, never raised.
A resumed run checks what an earlier attempt left unchecked.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import numpy as np

from speedbench.engine import Server, expected_model, make_server
from speedbench.errors import OutputError, ServerError
from speedbench.metrics import outputs as cmp
from speedbench.records import PointKey
from speedbench.results import outputs as files
from speedbench.run.context import RunContext
from speedbench.run.point import readiness_request

_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Pending:
    key: PointKey
    repeat: int
    div: cmp.Divergence
    prompt: np.ndarray  # the arm's request's prompt ids
    prefix: np.ndarray  # the outputs both sides shared

    def ident(self) -> tuple:
        return entry_ident(_entry(self, {}))


def entry_ident(e: dict[str, Any]) -> tuple:
    """Which divergence a saved check answers (a resumed run skips those already checked)."""
    return (e.get("arm"), e.get("concurrency"), e.get("variant", ""), e.get("repeat"), e.get("prompt_index"),
            e.get("turn"), e.get("position"))


def pending(run_dir: Any, baseline: str | None) -> list[Pending]:
    """Every round's first divergences (``CHECKS_PER_POINT`` per point), in point order."""
    rounds = run_dir.rounds()
    found = files.round_files(rounds)
    every = [k for k, _ in rounds]
    out: list[Pending] = []
    per_point: dict[PointKey, int] = {}
    for (key, rep), e in sorted(rounds.items(), key=lambda kv: (kv[0][0].arm, kv[0][0].concurrency, kv[0][1])):
        ref = files.reference(key, baseline, every)
        if ref is None or not e.done:
            continue
        mine, theirs, _ = files.round_pair(run_dir.path, found, key, rep, ref)
        if mine is None or theirs is None:
            continue
        divs = cmp.compare(mine, theirs).divergences
        room = cmp.CHECKS_PER_POINT - per_point.get(key, 0)
        if not divs or room <= 0:
            continue
        prompts = files.read_round(run_dir.path, found[(key, rep)], prompts=True) or {}
        for d in divs[:room]:
            ids = mine[(d.prompt_index, d.turn)]
            out.append(Pending(key, rep, d, prompts.get((d.prompt_index, d.turn), np.zeros(0, np.int64)),
                               ids[:d.position]))
        per_point[key] = per_point.get(key, 0) + min(room, len(divs))
    return out


def check_pass(ctx: RunContext) -> None:
    """Check the run's divergences on the baseline's server (none: nothing starts)."""
    sc = ctx.scenario
    if sc.workload.temperature > 0 or ctx.stop.is_set() or not sc.baseline_arm:
        return
    saved = ctx.run_dir.read_json(files.CHECKS, []) or []
    done = {entry_ident(e) for e in saved}
    todo = [p for p in pending(ctx.run_dir, sc.baseline_arm) if p.ident() not in done]
    if not todo:
        return
    ap = next((a for a in ctx.plan.arms if a.arm.name == sc.baseline_arm), None)
    if ap is None:
        return
    ctx.live.message(f"output check: {len(todo)} requests differ from their reference; asking the baseline's "
                     "server for the target's top tokens where they part")
    found = _on_baseline(ctx, ap, todo)
    try:
        ctx.run_dir.write_json(files.CHECKS, [*saved, *found])
    except OutputError as e:
        ctx.output_failed(e)


def _on_baseline(ctx: RunContext, ap: Any, todo: list[Pending]) -> list[dict[str, Any]]:
    sc = ctx.scenario
    server = make_server(sc, ap.launch, ctx.run_dir.log_path(f"{ap.arm.name}.check"))
    with ctx.lock:
        ctx.servers.append(server)
    t0 = time.monotonic()
    try:
        with server:
            model = expected_model(sc, ap.launch)
            server.wait_ready(model, readiness_request(ctx, model))
            ctx.live.message(f"output check: the baseline's server ready after {time.monotonic() - t0:.0f} s")
            found = [_one(ctx, server, p) for p in todo if not ctx.stop.is_set()]
    except ServerError as e:
        why = f"the baseline's server for the check pass failed: {str(e).splitlines()[0]}"
        found = [_entry(p, {"error": why}) for p in todo]
    finally:
        with ctx.lock:
            if server in ctx.servers:
                ctx.servers.remove(server)
    ctx.live.message(f"output check: {len(found)} checks in {time.monotonic() - t0:.0f} s, server start included")
    return found


def _entry(p: Pending, result: dict[str, Any]) -> dict[str, Any]:
    d = p.div
    return {"arm": p.key.arm, "concurrency": p.key.concurrency, "variant": p.key.variant, "repeat": p.repeat,
            "prompt_index": d.prompt_index, "turn": d.turn, "position": d.position, "ref_token": d.ref_token,
            "arm_token": d.arm_token, **result}


def _one(ctx: RunContext, server: Server, p: Pending) -> dict[str, Any]:
    """One check: {margin, exact, top_listed, check_s} or {error}."""
    d = p.div
    if d.ref_token < 0 or d.arm_token < 0:
        return _entry(p, {"error": "the outputs differ in length"})
    if p.prompt.size == 0:
        return _entry(p, {"error": "the server sent no prompt token ids"})
    engine = ctx.plan.engine
    req = engine.margin_request(server.model_name or "", p.prompt.tolist(), p.prefix.tolist(), cmp.TOP)
    if req is None:
        return _entry(p, {"error": "the engine has no request for the target's top tokens"})
    t0 = time.monotonic()
    body, err = _post(server, *req)
    if err:
        return _entry(p, {"error": err})
    top = engine.read_top(body)
    if top is None:
        return _entry(p, {"error": "the check's answer had no top tokens"})
    m, exact = cmp.margin(top, d.ref_token, d.arm_token)
    return _entry(p, {"margin": m, "exact": exact, "top_listed": len(top), "check_s": round(time.monotonic() - t0, 3)})


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
