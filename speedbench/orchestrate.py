"""Executing a plan: one server per arm, every (concurrency, variant) point, results on disk.

The order of work per arm: start the server (or connect), wait until a 1-token request
succeeds, record provenance, then for each variant and concurrency level run warmup,
snapshot Prometheus, replay the measured prompts, snapshot again. Records are appended
to the run folder as they complete, so an interrupted run keeps everything it measured
and ``--resume`` continues from the finished points.

Arms whose GPU sets are disjoint run concurrently, each in its own thread with its own
event loop; the main thread only waits, so Ctrl-C / SIGTERM are handled in one place.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from speedbench.errors import ServerError, SpeedbenchError, UsageError
from speedbench.plan import ArmPlan, Plan, build_plan
from speedbench.records import PointKey, RequestRecord
from speedbench.scenario import Scenario, apply_overrides, resolved_dict, validate_data
from speedbench.secrets import restore_secrets

# Prometheus counters are updated by the API server as outputs stream back; poll until
# two scrapes agree so the "after" snapshot includes the last requests' steps.
_SCRAPE_SETTLE_S = 0.3
_SCRAPE_SETTLE_TRIES = 10


@dataclass
class RunContext:
    """Everything one run shares across arms. Passed explicitly; nothing is global."""

    scenario: Scenario
    plan: Plan
    run_dir: Any  # speedbench.results.RunDir
    live: Any  # speedbench.report.live.LiveProgress
    workloads: dict[str, Any]  # variant name ("" without variants) -> workload.Workload
    done_points: set[PointKey]
    stop: threading.Event = field(default_factory=threading.Event)
    servers: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    failures: dict[str, str] = field(default_factory=dict)
    tokenizer: Any = None
    interrupted: bool = False  # Ctrl-C / SIGTERM seen; servers are being stopped


# ---- entry points ------------------------------------------------------------------


def new_run(sc: Scenario, output_root: Path, *, overrides: list[str], skip_doctor: bool, console: Console) -> int:
    from speedbench.results import RunDir

    # Data problems (missing dataset, placeholder rows) are invalid input (exit 2), found
    # before the doctor (which would report them as a failed check, exit 1) and before
    # a run folder or any server exists.
    prepared = _prepare(sc, console)
    if not skip_doctor and not _doctor_ok(sc, console):
        return 1
    run_dir = RunDir.create(output_root, sc.name)
    run_dir.write_scenario(resolved_dict(sc), overrides)
    console.print(f"run folder: {run_dir.path}")
    return _execute(sc, run_dir, console, resume=False, prepared=prepared)


def resume_run(path: Path, *, overrides: list[str], skip_doctor: bool, console: Console) -> int:
    from speedbench.results import RunDir

    run_dir = RunDir.open(path)
    scen_file = run_dir.scenario_path
    data = yaml.safe_load(scen_file.read_text())
    if overrides:
        data = apply_overrides(data, overrides)
    restore_secrets(data)
    sc = validate_data(data, str(scen_file), scen_file.read_text())
    prepared = _prepare(sc, console)
    if not skip_doctor and not _doctor_ok(sc, console):
        return 1
    dropped = run_dir.prune_unfinished_records()
    console.print(
        f"resuming {run_dir.path}: {len(run_dir.finished_points())} finished points are kept"
        + (f"; {dropped} records of unfinished points moved to {run_dir.superseded_path.name}" if dropped else "")
    )
    return _execute(sc, run_dir, console, resume=True, prepared=prepared)


def _doctor_ok(sc: Scenario, console: Console) -> bool:
    from speedbench.doctor.table import print_checks
    from speedbench.doctor import exit_code, run_checks

    checks = run_checks(sc)
    if exit_code(checks) == 0:
        warns = sum(1 for c in checks if c.status == "warn")
        console.print(f"pre-flight checks: ok ({len(checks)} checks, {warns} warnings; `speedbench doctor` shows them)")
        return True
    print_checks(checks, console)
    console.print("[red]pre-flight checks failed[/red]; fix the above or pass --skip-doctor to run anyway")
    return False


# ---- the run -----------------------------------------------------------------------


def _prepare(sc: Scenario, console: Console) -> tuple[dict[str, Any], Any]:
    """Build fixtures, load the tokenizer if needed, and load each variant's prompts.

    Prompts are loaded before any server starts, so a missing dataset or placeholder rows
    fail in seconds rather than after a long model load.
    """
    from speedbench.workload import load_workload

    if sc.fixtures:
        from speedbench.fixtures import ensure_tiny

        ensure_tiny(Path(sc.fixtures))
    from speedbench.workload.chat import workload_tokenizer

    w = sc.workload
    # Loaded once per run; every point's RequestBuilder gets this one (None included).
    tokenizer = workload_tokenizer(w, sc.server.model, list(w.variants), trust_remote_code=_trust_remote_code(sc))
    workloads = {}
    for v in list(w.variants) or [None]:
        wl = load_workload(w, variant=v, tokenizer=tokenizer)
        for msg in wl.warnings:
            console.print(f"[yellow]warning[/yellow]: {msg}")
        workloads[v.name if v else ""] = wl
    return workloads, tokenizer


def _trust_remote_code(sc: Scenario) -> bool:
    return bool(sc.server.args.get("trust-remote-code") or sc.server.args.get("trust_remote_code"))


def _inventory(sc: Scenario) -> list[int] | None:
    if sc.server.gpus is not None:
        return sc.server.gpus
    from speedbench.engine.gpus import detect_gpus

    return [g.index for g in detect_gpus()] or None


def _execute(sc: Scenario, run_dir: Any, console: Console, *, resume: bool,
             prepared: tuple[dict[str, Any], Any] | None = None) -> int:
    from speedbench.report.live import LiveProgress

    workloads, tokenizer = prepared or _prepare(sc, console)
    n_prompts = len(next(iter(workloads.values())).measured)
    plan = build_plan(sc, inventory=_inventory(sc), n_prompts=n_prompts)
    done = set(run_dir.finished_points()) if resume else set()
    interrupted = False
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):  # SIGTERM behaves like Ctrl-C: tear down, keep results
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)
    try:
        with LiveProgress(console) as live:
            ctx = RunContext(sc, plan, run_dir, live, workloads, done, tokenizer=tokenizer)
            try:
                for wave in plan.waves:
                    _run_wave(ctx, [a for a in plan.arms if a.arm.name in wave])
                    if ctx.stop.is_set():
                        break
            except KeyboardInterrupt:
                interrupted = True
                _interrupt(ctx)
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)
    return _finish(ctx, console, interrupted)


def _run_wave(ctx: RunContext, arms: list[ArmPlan]) -> None:
    with cf.ThreadPoolExecutor(max_workers=len(arms), thread_name_prefix="arm") as pool:
        futures = [pool.submit(_run_arm, ctx, ap) for ap in arms]
        pending = set(futures)
        # Short waits keep the main thread responsive to signals.
        try:
            while pending:
                _, pending = cf.wait(pending, timeout=0.2)
        except KeyboardInterrupt:
            # Stop servers and flag the arms *before* the executor's exit joins their
            # threads: otherwise the join waits for every arm to finish all its points.
            _interrupt(ctx)
            raise
        for f in futures:
            f.result()


def _interrupt(ctx: RunContext) -> None:
    if ctx.interrupted:
        return
    ctx.interrupted = True
    ctx.stop.set()
    ctx.live.message("interrupted: stopping servers and saving what was measured")
    with ctx.lock:
        servers = list(ctx.servers)
    for s in servers:
        try:
            s.stop()
        except Exception as e:  # keep stopping the others
            ctx.live.message(f"could not stop a server cleanly: {e}")


def _run_arm(ctx: RunContext, ap: ArmPlan) -> None:
    from speedbench.engine import make_server
    from speedbench.engine.provenance import collect_provenance

    sc, arm = ctx.scenario, ap.arm
    todo = [k for k in ctx.plan.points(arm.name) if k not in ctx.done_points]
    if not todo or ctx.stop.is_set():
        return
    ctx.live.server_starting(arm.name)
    server = make_server(
        sc, ap.launch, ctx.run_dir.log_path(arm.name),
        on_progress=lambda elapsed, line: ctx.live.server_progress(arm.name, elapsed, line),
    )
    with ctx.lock:
        ctx.servers.append(server)
    t0 = time.monotonic()
    current: PointKey | None = None  # the point in progress
    try:
        with server:
            server.wait_ready()
            if ctx.stop.is_set():
                return
            ctx.live.server_ready(arm.name, time.monotonic() - t0)
            prov = collect_provenance(sc, arm, ap.launch, server.argv, ap.launch.env_with_gpus(), server.base_url)
            # The process ids let tests (and users) prove that nothing was left running.
            prov["server_process"] = {"pid": getattr(server, "pid", None), "pgid": getattr(server, "pgid", None)}
            ctx.run_dir.save_provenance(arm.name, prov)
            for i, key in enumerate(todo):
                if ctx.stop.is_set():
                    return
                current = key
                failure = _run_point(ctx, server, key)
                if failure:
                    ctx.failures[arm.name] = failure
                    _mark_failed(ctx, arm.name, todo[i + 1:], failure)
                    return
    except ServerError as e:
        if ctx.stop.is_set():
            return
        msg = str(e)
        ctx.failures[arm.name] = msg
        ctx.live.message(f"arm {arm.name} failed: {msg}")
        # Points this arm finished before the failure keep their results and status.
        _mark_failed(ctx, arm.name, todo[todo.index(current):] if current else todo, msg.splitlines()[0])
        if not sc.continue_on_arm_failure:
            ctx.stop.set()
    finally:
        with ctx.lock:
            if server in ctx.servers:
                ctx.servers.remove(server)


def _mark_failed(ctx: RunContext, arm: str, points: list[PointKey], failure: str) -> None:
    for key in points:
        ctx.run_dir.mark_point(*key, status="failed", failure=failure)


def _run_point(ctx: RunContext, server: Any, key: PointKey) -> str | None:
    """Run one point; returns a failure message or None."""
    from speedbench.client import ClientConfig
    from speedbench.runner import PointResult, run_async, run_point
    from speedbench.scrape import scrape
    from speedbench.workload.chat import RequestBuilder

    sc = ctx.scenario
    arm, conc, vname = key
    variant = next((v for v in sc.workload.variants if v.name == vname), None)
    wl = ctx.workloads[vname]
    builder = RequestBuilder(sc.workload, server.model_name, variant, ctx.tokenizer,
                             trust_remote_code=_trust_remote_code(sc))
    builder.prepare([*wl.warmup, *wl.measured])  # padding / templating work stays off the timed path
    cfg = ClientConfig(
        base_url=server.base_url,
        api_key=server.api_key,
        request_timeout_s=sc.workload.request_timeout_s,
        idle_timeout_s=sc.workload.idle_timeout_s,
    )
    total = sum(len(p.turns) for p in wl.measured) * sc.repeats  # one request per turn
    ctx.live.point_started(key, total)

    def alive() -> str | None:
        if ctx.stop.is_set():
            return "interrupted"
        return server.dead()

    def on_record(rec: RequestRecord) -> None:
        # Requests cut short because *we* are stopping the server (Ctrl-C / SIGTERM; vLLM
        # aborts in-flight requests with an error event) are cancellations, not failures.
        if rec.error == "server_died" and (rec.error_detail or "").startswith("interrupted"):
            rec.error = "cancelled"
        elif rec.error not in (None, "cancelled") and ctx.stop.is_set() and ctx.interrupted:
            rec.error, rec.error_detail = "cancelled", f"interrupted ({rec.error}: {rec.error_detail})"
        ctx.run_dir.append_record(rec)
        ctx.live.record_done(rec)

    async def scrape_or_dead() -> tuple[str, str | None]:
        # A dead server fails the scrape: report the death, not the failed GET.
        try:
            return await _settled_scrape(scrape, server.base_url), None
        except ServerError:
            died = alive()
            if not died:
                raise
            return "", died

    async def point() -> tuple[list[Any], str, str]:
        if wl.warmup:
            warm = await run_point(cfg, builder, wl.warmup, arm=arm, concurrency=conc, variant=vname,
                                   server_alive=alive)
            if warm.aborted:
                return [warm], "", ""
        before, died = await scrape_or_dead()
        if died:
            return [PointResult([], 0.0, {}, died)], "", ""
        results = []
        for r in range(sc.repeats):
            res = await run_point(cfg, builder, wl.measured, arm=arm, concurrency=conc, variant=vname,
                                  repeat=r, on_record=on_record, server_alive=alive)
            # The watchdog polls every 0.5 s; once a server is gone the remaining
            # requests fail in milliseconds, so a point can end before it looks.
            res.aborted = res.aborted or alive()
            results.append(res)
            if res.aborted:
                break
        after = ""
        if not results[-1].aborted:
            after, results[-1].aborted = await scrape_or_dead()
        return results, before, after

    results, before, after = run_async(point())
    aborted = next((r.aborted for r in results if r.aborted), None)
    ctx.run_dir.save_prometheus(*key, before, after)
    n_err = sum(1 for r in results for rec in r.records if rec.error)
    status = "failed" if aborted else ("partial" if n_err else "ok")
    failure = None
    if aborted and aborted != "interrupted":
        failure = f"server died during concurrency {conc}: {aborted}"
    ctx.run_dir.mark_point(
        *key, status=status if aborted != "interrupted" else "interrupted",
        failure=failure or (aborted or ""),
        wall_s=sum(r.wall_s for r in results),
        loop_lag_ms_max=max((r.loop_lag_ms.get("max", 0.0) for r in results), default=0.0),
        n_errors=n_err,
        rendered_hash=builder.rendered_hash(),  # equal across arms = identical prompts
        padding_unit=builder.padding_unit,
    )
    ctx.live.point_done(key)
    return failure


async def _settled_scrape(scrape, base_url: str) -> str:
    text = await scrape(base_url)
    for _ in range(_SCRAPE_SETTLE_TRIES):
        await asyncio.sleep(_SCRAPE_SETTLE_S)
        again = await scrape(base_url)
        if _spec_part(again) == _spec_part(text):
            return again
        text = again
    return text


def _spec_part(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("vllm:spec_decode") or ln.startswith("vllm:generation_tokens")]


# ---- after the run -----------------------------------------------------------------


def _finish(ctx: RunContext, console: Console, interrupted: bool) -> int:
    from speedbench.report.terminal import print_summary
    from speedbench.summary import summarize_run_dir

    run_dir = ctx.run_dir
    try:
        summary = summarize_run_dir(run_dir)
        print_summary(summary, console, run_dir=run_dir)
    except SpeedbenchError:
        raise
    except Exception as e:  # the records are safe on disk; say how to re-render
        raise UsageError(f"could not summarise {run_dir.path}: {e}; re-run `speedbench report {run_dir.path}`") from e
    console.print(f"results: {run_dir.path}")
    if interrupted:
        console.print(
            f"[yellow]interrupted[/yellow]: partial results and summary written. Resume with:\n"
            f"  speedbench run --resume {run_dir.path}"
        )
        return 130
    if ctx.failures:
        for arm, msg in ctx.failures.items():
            console.print(f"[red]arm {arm} failed[/red]: {msg.splitlines()[0]}")
        return 1
    return 0
