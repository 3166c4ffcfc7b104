"""One (arm, concurrency, variant) point (concurrency level or request rate): build the requests, measure, keep every
record as it completes, save the Prometheus snapshots and the point's status."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from speedbench.client.http import ClientConfig
from speedbench.engine import Server
from speedbench.engine.probe import ready_request
from speedbench.errors import OutputError
from speedbench.records import PointKey, RequestRecord
from speedbench.results import outputs
from speedbench.run import conditions
from speedbench.run.gpu_watch import GpuWatch
from speedbench.run.context import RunContext
from speedbench.loadgen import Measurement, PointJob, Target, measure, run_async
from speedbench.scenario import Scenario
from speedbench.stopping.point import point_stop
from speedbench.workload.chat import RequestBuilder


def trust_remote_code(sc: Scenario) -> bool:
    return bool(sc.server.args.get("trust-remote-code") or sc.server.args.get("trust_remote_code"))


def client_side(ctx: RunContext, server: Server, key: PointKey, job: PointJob) -> tuple[RequestBuilder, ClientConfig]:
    """The request builder (prompts prepared) and the client settings for one point's job."""
    sc = ctx.scenario
    variant = next((v for v in sc.workload.variants if v.name == key.workload), None)
    builder = RequestBuilder(sc.workload, server.model_name, variant, ctx.prepared.tokenizer,
                             trust_remote_code=trust_remote_code(sc), fields=ctx.plan.engine)
    builder.prepare([*job.warmup, *job.prompts])  # padding / templating work stays off the timed path
    cfg = ClientConfig(
        base_url=server.base_url,
        stream=ctx.plan.engine,  # the engine's own request field and stream extensions
        api_key=server.api_key,
        request_timeout_s=sc.workload.request_timeout_s,
        idle_timeout_s=sc.workload.idle_timeout_s,
    )
    return builder, cfg


def readiness_request(ctx: RunContext, model: str | None) -> tuple[str, dict] | None:
    """The request that proves a server ready: the workload's first warmup prompt (else its
    first measured one) built as the run builds it (engine/probe.py says why)."""
    sc = ctx.scenario
    found = next(((name, wl.warmup or wl.measured) for name, wl in ctx.prepared.workloads.items()
                  if wl.warmup or wl.measured), None)
    if found is None:
        return None
    vname, prompts = found
    variant = next((v for v in sc.workload.variants if v.name == vname), None)
    builder = RequestBuilder(sc.workload, model or "", variant, ctx.prepared.tokenizer,
                             trust_remote_code=trust_remote_code(sc), fields=ctx.plan.engine)
    builder.prepare([prompts[0]])
    return ready_request(*builder.build(prompts[0], 0, []))


def run_point(ctx: RunContext, server: Server, key: PointKey, repeat: int = 0) -> str | None:
    """Run one round (``repeat``) of one point to the end on this server; returns why the
    arm failed, or None."""
    sc = ctx.scenario
    job = ctx.plan.job(key, ctx.prepared.workloads, repeat)
    builder, cfg = client_side(ctx, server, key, job)
    ctx.live.point_started(key, sum(len(p.turns) for p in job.prompts))  # one request per turn
    # Each arm runs in its own thread, so each point gets its own event loop.
    kept: list[RequestRecord] = []  # this round's measured records, for its outputs file
    target = Target(client=cfg, builder=builder, server_alive=_alive(ctx, server),
                    on_record=_record_sink(ctx, kept))
    stop = point_stop(sc, key, repeat, len(job.prompts), ctx.base_records)
    pgid, gpus = _engine_group(ctx, server), _arm_gpus(ctx, key.arm)
    watch = GpuWatch(gpus, pgid).start() if gpus is not None else None
    before = conditions.take(pgid)
    if stop is None:
        m = run_async(measure(target, job, ctx.plan.engine))
    else:  # sequential stopping: batches that end at the looks
        m = run_async(measure(target, job, ctx.plan.engine, batches=stop.batches(), go_on=stop.go_on))
    during = conditions.between(before, conditions.take(pgid))
    if watch is not None:
        watch.stop()
        during.update(watch.summary() or {"not_checked": [*during["not_checked"], "GPU: nvidia-smi gave no reading"]})
    ctx.run_dir.save_prometheus(key, m.before, m.after, repeat)
    facts = {
        "conditions": during,  # what the host was doing: metrics/conditions.py compares the arms'
        "rendered_hash": builder.rendered_hash(),  # equal across arms = identical prompts
        "padding_unit": builder.padding_unit,
        **({"request_rate": key.rate, "workload": key.workload, "burstiness": sc.load.burstiness}
           if key.rate is not None else {}),
        **(stop.marks(len(job.prompts)) if stop is not None else {}),
    }
    facts["outputs"] = outputs.write_round(ctx.run_dir.path, key, repeat, kept, ctx.run_dir.fsync)
    failure = _mark(ctx, key, repeat, m, facts)
    ctx.live.point_done(key)
    return failure


def _engine_group(ctx: RunContext, server: Server) -> int | None:
    """The engine's process group when its processes are ours to read: a local launch
    (a container's run under docker's daemon, an endpoint's elsewhere)."""
    return server.pgid if ctx.scenario.server.launcher == "local" else None


def _arm_gpus(ctx: RunContext, arm: str) -> list[int] | None:
    """The GPUs the arm's server was given ([]: every GPU), or None when there are none to
    sample here: no nvidia-smi, or an endpoint whose GPUs are on another host."""
    ap = next((a for a in ctx.plan.arms if a.arm.name == arm), None)
    if ap is None or not ap.launched or ctx.scenario.server.launcher == "external" or not shutil.which("nvidia-smi"):
        return None
    return list(ap.launch.gpus or [])


def _alive(ctx: RunContext, server: Server) -> Callable[[], str | None]:
    """The point's poll: why it must stop (Ctrl-C, or the server's death), or None."""
    def alive() -> str | None:
        if ctx.stop.is_set():
            return "interrupted"
        return server.dead()
    return alive


def _record_sink(ctx: RunContext, kept: list[RequestRecord]) -> Callable[[RequestRecord], None]:
    """Where each finished request goes: the run folder, the round's list (``kept``: measured
    requests only), then the live view."""
    def on_record(rec: RequestRecord) -> None:
        # Requests cut short because *we* are stopping the server (Ctrl-C / SIGTERM; vLLM
        # aborts in-flight requests with an error event) are cancellations, not failures.
        if rec.error == "server_died" and (rec.error_detail or "").startswith("interrupted"):
            rec.error = "cancelled"
        elif rec.error not in (None, "cancelled") and ctx.stop.is_set() and ctx.interrupted:
            rec.error, rec.error_detail = "cancelled", f"interrupted ({rec.error}: {rec.error_detail})"
        if ctx.output_error is None:
            try:
                ctx.run_dir.append_record(rec)
            except OutputError as e:  # a full disk: stop every arm (the point aborts at its next poll)
                ctx.output_failed(e)
        if not rec.warmup:
            kept.append(rec)
        ctx.live.record_done(rec)
    return on_record


def _mark(ctx: RunContext, key: PointKey, repeat: int, m: Measurement, facts: dict[str, Any]) -> str | None:
    """Mark the round in points.json with its status; returns why the arm failed, or None."""
    aborted = m.aborted
    failure = None
    if aborted and aborted != "interrupted":
        failure = f"server died during concurrency {key.concurrency}: {aborted}"
    if aborted == "interrupted" or ctx.output_error is not None:
        # A record that could not be written may be this round's last: never mark it done.
        status = "interrupted"
    else:
        status = "failed" if aborted else ("partial" if m.n_errors else "ok")
    ctx.run_dir.mark_point(key, status, repeat=repeat, failure=failure or (aborted or ""), wall_s=m.wall_s,
                           loop_lag_ms_max=m.loop_lag_ms_max, n_errors=m.n_errors, **facts)
    return failure
