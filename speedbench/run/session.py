"""A run as a whole: new or resumed, pre-flight checks, data, the arms, the summary and
the exit code (0 ok, 1 an arm failed, 130 interrupted; invalid input raises exit-2
errors before anything starts).

Work order: load the data (a missing dataset fails before the doctor and before any run
folder or server exists), run the doctor, create or reopen the run folder, run the arms,
summarise. Records are appended as they complete, so an interrupted run keeps everything
it measured and ``--resume`` continues from the finished points.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import yaml
from speedbench.doctor import exit_code, run_checks
from speedbench.engine.gpus import detect_gpus
from speedbench.engine import Engine
from speedbench.errors import OutputError
from speedbench.fixtures.assemble import ensure_tiny
from speedbench.run.plan import Plan, build_plan
from speedbench.results import RunDir
from speedbench.results.rundir import HOST_FILE
from speedbench.results.files import free_space
from speedbench.results.mlflow_export import check_tracking
from speedbench.run.arms import interrupt, run_arms
from speedbench.run.output_check import check_pass
from speedbench.run.cost import output_bytes
from speedbench.run.context import Prepared, RunContext
from speedbench.run.finish import finish_run
from speedbench.run.point import trust_remote_code
from speedbench.run.progress import ConsoleProgress, Progress
from speedbench.results.tail import baseline_tail
from speedbench.scenario import Scenario, VariantSpec, apply_overrides, resolved_dict, select_arms, validate_data
from speedbench.secrets import restore_secrets
from speedbench.results.verify import reopen_damaged_rounds
from speedbench.workload import load_workload
from speedbench.workload.chat import workload_tokenizer

# ConsoleProgress is here too: a caller that runs imports this one module.
__all__ = ["ConsoleProgress", "NewRun", "Progress", "new_run", "resume_run", "prepare"]

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
EXIT_OUTPUT = OutputError.exit_code  # 3: the run folder could not be written (disk full, read-only)


class NewRun(NamedTuple):
    """What a new run ended with: its exit code, and its run folder (None when the
    pre-flight checks failed before the folder was made)."""

    code: int
    path: Path | None


def new_run(sc: Scenario, output_root: Path, *, overrides: list[str], skip_doctor: bool,
            progress: Progress) -> NewRun:
    # Data problems (missing dataset, placeholder rows) are invalid input (exit 2), found
    # before the doctor (which would report them as a failed check, exit 1) and before
    # a run folder or any server exists.
    check_tracking(sc)
    prepared = prepare(sc, progress)
    plan = build_plan(sc, inventory=_inventory(sc), n_prompts=prepared.n_prompts)
    if not skip_doctor and not _doctor_ok(sc, progress, output_root, plan):
        return NewRun(EXIT_FAILED, None)
    run_dir = RunDir.create(output_root, sc.name)
    run_dir.write_scenario(resolved_dict(sc), overrides)
    _record_host(run_dir, plan.engine)
    progress.run_folder(run_dir.path)
    return NewRun(_execute(plan, run_dir, progress, prepared, resume=False), run_dir.path)


def resume_run(path: Path, *, overrides: list[str], skip_doctor: bool, progress: Progress,
               arms: list[str] | None = None, tag: str = "", summarize: bool = True) -> int:
    """Continue a run folder. A cluster job (speedbench/executors) passes its one arm,
    its job id as the writer ``tag`` and ``summarize=False``: the gather summarises."""
    run_dir = RunDir.open(path, tag=tag)
    scen_file = run_dir.scenario_path
    data = yaml.safe_load(scen_file.read_text())
    if overrides:
        data = apply_overrides(data, overrides)
    restore_secrets(data)
    sc = validate_data(data, str(scen_file), scen_file.read_text())
    if arms:
        sc = select_arms(sc, arms)
    if summarize:  # a cluster arm job does not log; its gather does, and checks there
        check_tracking(sc)
    prepared = prepare(sc, progress)
    # in a cluster job the scheduler placed us: the server uses the devices it was given
    plan = build_plan(sc, inventory=None if tag else _inventory(sc), n_prompts=prepared.n_prompts)
    if not skip_doctor and not _doctor_ok(sc, progress, run_dir.path, plan):
        return EXIT_FAILED
    _record_host(run_dir, plan.engine)
    own_arms = [a.name for a in sc.arms] if arms else None
    # A finished round whose records were lost or damaged is measured again, and says so.
    for msg in reopen_damaged_rounds(run_dir, own_arms):
        progress.warning(msg)
    # A job prunes only its own arm's records: other jobs are measuring theirs right now.
    dropped = run_dir.prune_unfinished_records(arms=own_arms)
    progress.resuming(run_dir.path, len(run_dir.finished_points()), dropped, run_dir.superseded_path.name)
    return _execute(plan, run_dir, progress, prepared, resume=True, summarize=summarize)


def _record_host(run_dir: RunDir, engine: Engine) -> None:
    """host.json, before any server starts, so a run whose servers all die still names its
    machine. A resume (a cluster job on its compute node) writes it if the folder lacks it."""
    if not (run_dir.path / HOST_FILE).exists():
        run_dir.write_json(HOST_FILE, engine.hardware())


def prepare(sc: Scenario, progress: Progress) -> Prepared:
    """Build fixtures, load the tokenizer once if the workload needs one, and load each
    variant's prompts, all before any server starts."""
    if sc.fixtures:
        ensure_tiny(Path(sc.fixtures))
    w = sc.workload
    tokenizer = workload_tokenizer(w, sc.server.model, list(w.variants), trust_remote_code=trust_remote_code(sc))
    workloads = {}
    variants: list[VariantSpec | None] = [*w.variants] or [None]
    for v in variants:
        wl = load_workload(w, variant=v, tokenizer=tokenizer)
        for msg in wl.warnings:
            progress.warning(msg)
        workloads[v.name if v else ""] = wl
    return Prepared(workloads, tokenizer)


def _doctor_ok(sc: Scenario, progress: Progress, output: Path, plan: Plan) -> bool:
    """The doctor, handed the run's own plan (built once per run) for the folder's size."""
    checks = run_checks(plan, output=output, output_need=output_bytes(plan))
    if exit_code(checks) == 0:
        warns = sum(1 for c in checks if c.status == "warn")
        progress.preflight_ok(len(checks), warns)
        return True
    progress.preflight_failed(checks)
    return False


def _inventory(sc: Scenario) -> list[int] | None:
    if sc.server.gpus is not None:
        return sc.server.gpus
    return [g.index for g in detect_gpus()] or None


def _execute(plan: Plan, run_dir: RunDir, progress: Progress, prepared: Prepared, *, resume: bool,
             summarize: bool = True) -> int:
    sc = plan.scenario
    done = run_dir.finished_rounds() if resume else set()
    with progress.live() as live:
        todo = plan.rounds_left(done)
        launched = {ap.arm.name for ap in plan.arms if ap.launched}
        live.plan(starts=len({(k.arm, r) for k, r in todo if k.arm in launched}), points=len(todo))
        ctx = RunContext(scenario=sc, plan=plan, run_dir=run_dir, live=live, prepared=prepared, done_points=done,
                         base_records=baseline_tail(sc, run_dir))
        interrupted = run_arms(ctx)
        if summarize and not interrupted:
            interrupted = _check_outputs(ctx)  # untimed: the baseline's server, only where outputs differ
    if ctx.output_error is not None:
        return _output_stop(run_dir, ctx.output_error, progress)
    if not summarize:
        return _finish_job(ctx, progress, interrupted)
    return _finish(ctx, progress, interrupted)


def _check_outputs(ctx: RunContext) -> bool:
    """The output check pass (run/output_check.py); True when Ctrl-C stopped it."""
    try:
        check_pass(ctx)
    except KeyboardInterrupt:
        interrupt(ctx)
        return True
    return False


def _finish_job(ctx: RunContext, progress: Progress, interrupted: bool) -> int:
    """One arm's cluster job: the gather summarises the whole folder."""
    progress.job_records(ctx.run_dir.path, ctx.run_dir.records_path.name)
    if interrupted:
        progress.job_interrupted()
        return EXIT_INTERRUPTED
    for arm, msg in ctx.failures.items():
        progress.arm_failed(arm, msg)
    return EXIT_FAILED if ctx.failures else EXIT_OK


def _output_stop(run_dir: RunDir, e: OutputError, progress: Progress) -> int:
    """A full or read-only run folder: servers are stopped, complete records are kept."""
    folder, free = free_space(run_dir.path)
    progress.output_stopped(run_dir.path, e, folder, free)
    return EXIT_OUTPUT


def _finish(ctx: RunContext, progress: Progress, interrupted: bool) -> int:
    """Summary, reports, gates and MLflow (run/finish.py, as a cluster run's gather does),
    then the run's own outcome: interrupted, an arm failed, or the gates' exit code."""
    try:
        gates = finish_run(ctx.run_dir, ctx.scenario, ctx.plan.engine, progress, complete=not interrupted)
    except OutputError as e:
        return _output_stop(ctx.run_dir, e, progress)
    if interrupted:
        progress.interrupted(ctx.run_dir.path)
        return EXIT_INTERRUPTED
    if ctx.failures:
        for arm, msg in ctx.failures.items():
            progress.arm_failed(arm, msg)
        return EXIT_FAILED
    return gates
