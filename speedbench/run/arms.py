"""Arms: rounds of waves of arms (concurrent when their GPU sets are disjoint), Ctrl-C /
SIGTERM, and one arm's lifecycle in one round (start or connect, wait until ready,
provenance, its points, teardown).

``repeats: R`` is R rounds of fresh server starts. Round r runs the waves forward when r
is even and backward when it is odd (ABBA), so slow drift of the machine does not land
on one arm.

Each arm of a wave runs in its own thread with its own event loops; the main thread only
waits, so signals are handled in one place.
"""

from __future__ import annotations

import concurrent.futures as cf
import signal
import threading
import time

from speedbench.engine.provenance import Provenance
from speedbench.engine import Server, expected_model, make_server
from speedbench.errors import OutputError, ServerError
from speedbench.run.plan import ArmPlan
from speedbench.records import PointKey
from speedbench.run.context import RunContext
from speedbench.run.cost import arm_gpus
from speedbench.run.point import readiness_request, run_point
from speedbench.run.reuse import reuse_baseline


def run_arms(ctx: RunContext) -> bool:
    """Every wave of the plan, in order; True when Ctrl-C / SIGTERM stopped the run."""
    previous = signal.getsignal(signal.SIGTERM)
    in_main = threading.current_thread() is threading.main_thread()

    def on_term(signum, frame):  # SIGTERM behaves like Ctrl-C: tear down, keep results
        raise KeyboardInterrupt

    if in_main:
        signal.signal(signal.SIGTERM, on_term)
    try:
        for repeat in range(ctx.plan.rounds):
            order = round_order(ctx.plan.waves, repeat)
            if ctx.plan.rounds > 1:
                ctx.live.message(f"round {repeat + 1} of {ctx.plan.rounds}: fresh servers, "
                                 + " -> ".join("+".join(w) for w in order))
            for wave in order:
                _run_wave(ctx, [a for a in ctx.plan.arms if a.arm.name in wave], repeat)
                if ctx.stop.is_set():
                    return False
    except KeyboardInterrupt:
        interrupt(ctx)
        return True
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    return False


def round_order(waves: list[list[str]], repeat: int) -> list[list[str]]:
    """The waves of round ``repeat``: forward in even rounds, reversed in odd ones (ABBA)."""
    return list(waves) if repeat % 2 == 0 else list(reversed(waves))


def _run_wave(ctx: RunContext, arms: list[ArmPlan], repeat: int) -> None:
    with cf.ThreadPoolExecutor(max_workers=len(arms), thread_name_prefix="arm") as pool:
        futures = [pool.submit(run_arm, ctx, ap, repeat) for ap in arms]
        pending = set(futures)
        # Short waits keep the main thread responsive to signals.
        try:
            while pending:
                _, pending = cf.wait(pending, timeout=0.2)
        except KeyboardInterrupt:
            # Stop servers and flag the arms *before* the executor's exit joins their
            # threads: otherwise the join waits for every arm to finish all its points.
            interrupt(ctx)
            raise
        for f in futures:
            f.result()


def interrupt(ctx: RunContext) -> None:
    """Stop every running server once; arms see ``ctx.stop`` and end their points."""
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


def run_arm(ctx: RunContext, ap: ArmPlan, repeat: int = 0) -> None:
    """One round of one arm: a fresh server, every point of the arm not yet done."""
    sc, arm = ctx.scenario, ap.arm
    todo = [k for k in ctx.plan.points(arm.name) if (k, repeat) not in ctx.done_points]
    if not todo or ctx.stop.is_set() or arm.name in ctx.failures:
        return
    server = _new_server(ctx, ap)
    t0 = time.monotonic()
    start_s: float | None = None
    current: PointKey | None = None  # the point in progress
    try:
        with server:
            model = expected_model(sc, ap.launch)
            server.wait_ready(model, readiness_request(ctx, model))
            if ctx.stop.is_set():
                return
            start_s = time.monotonic() - t0
            ctx.live.server_ready(arm.name, start_s)
            prov = _save_provenance(ctx, ap, server)
            if arm.name == sc.baseline_arm and sc.baseline_from is not None and repeat == 0 \
                    and reuse_baseline(ctx, server, prov):
                return  # an earlier run's baseline holds (its canary passed): nothing to measure
            for i, key in enumerate(todo):
                if ctx.stop.is_set():
                    return
                current = key
                failure = run_point(ctx, server, key, repeat)
                if failure:
                    ctx.failures[arm.name] = failure
                    _mark_failed(ctx, todo[i + 1:], failure, repeat)
                    return
    except OutputError as e:  # leaving `with server` stops it; the session says how to resume
        ctx.output_failed(e)
    except ServerError as e:
        if not ctx.stop.is_set():
            # Points this arm finished before the failure keep their results and status.
            _arm_failed(ctx, arm.name, todo[todo.index(current):] if current else todo, str(e), repeat)
    finally:
        _end_round(ctx, ap, server, repeat, start_s, time.monotonic() - t0)


def _new_server(ctx: RunContext, ap: ArmPlan) -> Server:
    """The arm's server, not started yet, its log in the run folder; held in ``ctx.servers``
    so that a stop can reach it."""
    name = ap.arm.name
    log = ctx.run_dir.log_path(name)
    ctx.live.server_starting(name, log if ap.launched else None)  # an endpoint's log is not ours
    server = make_server(
        ctx.scenario, ap.launch, log, on_progress=lambda elapsed, phase: ctx.live.server_progress(name, elapsed, phase),
    )
    with ctx.lock:
        ctx.servers.append(server)
    return server


def _arm_failed(ctx: RunContext, arm: str, left: list[PointKey], msg: str, repeat: int) -> None:
    """The arm's server failed: say so, mark the points it had ``left`` failed, and stop
    the run unless the scenario goes on past a failed arm."""
    ctx.failures[arm] = msg
    ctx.live.message(f"arm {arm} failed: {msg}")
    _mark_failed(ctx, left, msg.splitlines()[0], repeat)
    if not ctx.scenario.continue_on_arm_failure:
        ctx.stop.set()


def _save_provenance(ctx: RunContext, ap: ArmPlan, server: Server) -> Provenance:
    engine = ctx.plan.engine
    prov = engine.provenance(ctx.scenario, ap.arm, ap.launch, server.argv, ap.launch.env_with_gpus(), server.base_url)
    # The process ids let tests (and users) prove that nothing was left running.
    saved = {**prov.saved, "server_process": {"pid": server.pid, "pgid": server.pgid}}
    ctx.run_dir.save_provenance(ap.arm.name, saved)
    return engine.read_provenance(saved)


def _end_round(ctx: RunContext, ap: ArmPlan, server: Server, repeat: int, start_s: float | None,
               wall_s: float) -> None:
    """The server is gone from the running list; a launched arm's round (start time, wall
    time, GPUs) goes into points.json."""
    with ctx.lock:
        if server in ctx.servers:
            ctx.servers.remove(server)
    if ap.launched and ctx.output_error is None:
        try:
            ctx.run_dir.mark_arm_round(ap.arm.name, repeat, start_s=start_s, wall_s=wall_s,
                                       gpus=arm_gpus(ap, ctx.plan.engine))
        except OutputError as e:
            ctx.output_failed(e)


def _mark_failed(ctx: RunContext, points: list[PointKey], failure: str, repeat: int) -> None:
    try:
        for key in points:
            ctx.run_dir.mark_point(key, "failed", repeat=repeat, failure=failure)
    except OutputError as e:
        ctx.output_failed(e)
