"""``speedbench run SCENARIO``: launch servers, replay the workload, write a run folder."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from speedbench.errors import UsageError
from speedbench.run.plan import Plan, build_plan, display_argv, display_env, shell_line
from speedbench.scenario import load_scenario, select_arms

HELP = """\
Run a scenario. For every arm speedbench starts one vLLM server (or uses the arm's
base_url), waits until it answers a 1-token request, replays the workload at each
concurrency level, and stops the server. Results go to
OUTPUT/<scenario>/<UTC timestamp>-<id>/ (default OUTPUT: ./results).

  --dry-run    start nothing; print the exact command of every arm, its environment,
               the GPU schedule and how many launches and requests the run would make
  --set K=V    override a scenario value, e.g. --set workload.max_tokens=256
               or --set arms.eagle3.1.speculative_config.num_speculative_tokens=5
  --resume DIR finish an interrupted run: finished (arm, concurrency, variant) points
               are kept and skipped
  --executor slurm
               submit one batch job per arm and a dependent gather job instead of
               running here (settings: the scenario's executor.slurm; docs/slurm.md);
               with --dry-run, print the exact batch scripts
"""


def register(sub) -> None:
    p = sub.add_parser("run", help="run a scenario (or --dry-run to see the plan)", description=HELP,
                       formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("scenario", nargs="?", help="scenario YAML (omit with --resume to reuse the run's own)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a scenario value (repeatable)")
    p.add_argument("--output", "-o", default="results", metavar="DIR", help="results root (default: results)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit; launches nothing")
    p.add_argument("--arms", metavar="A,B", help="run only these arms (comma-separated names or sweep templates)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run folder")
    p.add_argument("--skip-doctor", action="store_true", help="do not run the pre-flight checks first")
    p.add_argument("--executor", choices=("local", "slurm"),
                   help="where the arms run (default: the scenario's executor.kind, else local)")
    p.set_defaults(func=run)


def print_plan(plan: Plan, console: Console, output_root: Path | None = None) -> None:
    sc = plan.scenario
    console.print(f"[bold]plan for scenario '{sc.name}'[/bold]  (launcher: {sc.server.launcher})")
    if plan.overrides:
        console.print("overrides: " + ", ".join(plan.overrides))
    for ap in plan.arms:
        arm = ap.arm
        kind = ("baseline" if arm.name == sc.baseline_arm else "A/A twin of the baseline" if arm.name == sc.aa_arm
                else "speculative" if arm.is_speculative else "arm")
        console.print(f"\n[bold cyan]arm {arm.name}[/bold cyan] "
                      f"({kind}){': ' + arm.description if arm.description else ''}")
        if arm.template:
            console.print(f"  expanded from sweep '{arm.template}': {arm.sweep_values}")
        if not ap.launched:
            console.print(f"  external endpoint: {arm.base_url} (health-checked and scraped, never stopped)")
            continue
        env = display_env(sc, ap)
        console.print("  command:", highlight=False)
        console.print("    " + shell_line(display_argv(sc, ap, measurement=False), {}), highlight=False,
                      soft_wrap=True)
        extra = ap.launch.measurement
        if extra or ap.launch.measurement_env:
            console.print("  measurement flags (added by speedbench; server.measurement_flags: false drops them): "
                          + shell_line(extra, ap.launch.measurement_env), highlight=False, soft_wrap=True)
        if env:
            console.print("  environment: " + " ".join(f"{k}={v}" for k, v in env.items()), highlight=False)
        if ap.launch.gpus is not None:
            console.print(f"  GPUs: {ap.launch.gpus}")
    console.print("\n[bold]schedule[/bold]")
    for i, wave in enumerate(plan.waves, 1):
        together = " + ".join(wave)
        console.print(f"  step {i}: {together}" + (" (concurrently, disjoint GPUs)" if len(wave) > 1 else ""))
    if len(plan.waves) < len(plan.arms):
        saved = 1 - len(plan.waves) / len(plan.arms)
        console.print(f"  running disjoint arms together saves about {saved:.0%} of the wall time of the launches")
    w = sc.workload
    variants = ", ".join(sc.variant_names) if sc.workload.variants else "none"
    if sc.load.mode == "rate":
        ld = sc.load
        levels = (f"{len(ld.rates)} request rates {ld.rates} req/s (open loop, burstiness {ld.burstiness:g}"
                  f"{' = Poisson' if ld.burstiness == 1 else ' gamma'}, seed {ld.seed}, at most {ld.max_concurrency} "
                  "in flight)")
    elif sc.load.mode == "screen":
        levels = (f"1 screening concurrency {sc.load.screen_concurrency} (AL only, no baseline server; speedups "
                  f"predicted at {sc.concurrency} from the calibration)")
    else:
        levels = f"{len(sc.concurrency)} concurrency levels {sc.concurrency}"
    console.print(
        f"\n[bold]work[/bold]: {len(plan.arms)} arms x {levels} "
        f"x {len(sc.variant_names)} variants ({variants}) = {plan.n_points} points"
    )
    prompts = plan.n_prompts or "all matching"
    console.print(
        f"  per point: {prompts} prompts + {plan.n_warmup} warmup, in each of {sc.repeats} "
        f"round{'s' if sc.repeats > 1 else ''} of fresh server starts"
        f"{' (arms in ABBA order)' if sc.repeats > 1 else ''}; "
        f"source {w.source}{'/' + w.config if w.source == 'speed_bench' else ''}"
        f"{' categories ' + ','.join(w.categories) if w.categories else ''}; "
        f"T={w.temperature}, max_tokens={w.max_tokens}, ignore_eos={w.ignore_eos}, "
        f"chat template on the {w.chat_template} side"
    )
    if plan.n_prompts:
        console.print(f"  total: {plan.n_launches} server launches, about {plan.n_requests()} requests "
                      "(multi-turn rows add one request per extra turn)")
    else:
        console.print(f"  total: {plan.n_launches} server launches")
    if sc.stop is not None:
        from speedbench.stopping.looks import look_level, look_schedule  # noqa: PLC0415 -- keeps --help light

        looks = look_schedule(plan.n_prompts or sc.stop.max_prompts or 0, sc.stop.min_prompts, sc.stop.max_prompts)
        console.print(f"  sequential stopping: looks at {looks or 'min_prompts x 2^j up to every prompt'} prompts, "
                      f"each interval at level {look_level(sc.stop.alpha, len(looks) or 1):.4f}; the baseline runs "
                      "every look, other arms may stop at any: the counts and the cost below are the most it spends")
    if sc.baseline_from is not None:
        console.print(f"  baseline: reused from {sc.baseline_from.results} when a matching run at most "
                      f"{sc.baseline_from.max_age_days:g} days old passes a canary; otherwise measured")
    from speedbench.run.cost import describe, estimate  # noqa: PLC0415 -- keeps --help light

    console.print("\n[bold]cost[/bold] (estimated)")
    for line in describe(estimate(plan, output_root), plan):
        console.print(line, highlight=False, soft_wrap=True)


def run(args) -> int:
    console = Console(highlight=False)
    if args.resume and args.dry_run:
        raise UsageError("--resume and --dry-run do not go together")
    # speedbench.run is imported only when a run starts: it pulls in pandas, the doctor
    # and the engine, which `speedbench --help` and --dry-run do not need.
    if args.resume:
        if _resume_executor(args) == "slurm":
            return _resubmit(Path(args.resume), args, console)
        from speedbench.run.session import ConsoleProgress, resume_run

        return resume_run(Path(args.resume), overrides=args.overrides, skip_doctor=args.skip_doctor,
                          progress=ConsoleProgress(console))
    if not args.scenario:
        raise UsageError("run needs a scenario file, e.g. speedbench run scenarios/cpu_tiny.yaml")
    sc = load_scenario(args.scenario, args.overrides)
    if args.arms:
        sc = select_arms(sc, [a.strip() for a in args.arms.split(",") if a.strip()])
    if args.executor:
        sc = sc.model_copy(update={"executor": sc.executor.model_copy(update={"kind": args.executor})})
    if args.dry_run:
        print_plan(build_plan(sc, overrides=args.overrides), console, Path(args.output))
        if sc.executor.kind == "slurm":
            _print_scripts(sc, args, console)
        return 0
    if sc.executor.kind == "slurm":
        return _submit(sc, args, console)
    from speedbench.run.session import ConsoleProgress, new_run

    return new_run(sc, Path(args.output), overrides=args.overrides, skip_doctor=args.skip_doctor,
                   progress=ConsoleProgress(console))


# ---- the slurm executor --------------------------------------------------------------


def _resume_executor(args) -> str:
    if args.executor:
        return args.executor
    from speedbench.results import RunDir

    return str((RunDir.open(args.resume).load_scenario().get("executor") or {}).get("kind") or "local")


def _print_scripts(sc, args, console: Console) -> None:
    from speedbench.executors.slurm import arm_script, gather_script

    run_path = Path(args.output).resolve() / sc.name / "<run id>"
    cwd = Path.cwd()
    console.print("\n[bold]batch scripts[/bold] (written to the run folder's slurm/ and submitted with sbatch; "
                  "the gather with --dependency=afterany:<every arm job>)")
    for a in sc.arms:
        console.print(f"\n# ---- {a.name}.sbatch", markup=False)
        console.print(arm_script(sc, run_path, a.name, cwd=cwd, skip_doctor=args.skip_doctor),
                      markup=False, highlight=False, soft_wrap=True, end="")
    console.print("\n# ---- gather.sbatch", markup=False)
    console.print(gather_script(sc, run_path, cwd=cwd), markup=False, highlight=False, soft_wrap=True, end="")


def _print_jobs(jobs: dict, run_path: Path, console: Console) -> None:
    sub = jobs["submissions"][-1]
    console.print(f"submitted {len(sub['arms'])} arm jobs ({' '.join(sub['arms'])}) and gather job {sub['gather']}")
    console.print(f"  speedbench status {run_path}    speedbench cancel {run_path}", markup=False, soft_wrap=True)


def _submit(sc, args, console: Console) -> int:
    from speedbench.executors.slurm import submit
    from speedbench.results import RunDir
    from speedbench.scenario import resolved_dict

    run_dir = RunDir.create(Path(args.output), sc.name)
    run_dir.write_scenario(resolved_dict(sc), args.overrides)
    console.print(f"run folder: {run_dir.path}", markup=False, soft_wrap=True)
    _print_jobs(submit(sc, run_dir, skip_doctor=args.skip_doctor), run_dir.path, console)
    return 0


def _resubmit(path: Path, args, console: Console) -> int:
    """Submit again the arms whose points are not all finished, and a new gather."""
    from speedbench.executors.slurm import arm_jobs, submit
    from speedbench.results import RunDir
    from speedbench.scenario import validate_data

    if args.overrides:
        raise UsageError("--set does not go with resuming a Slurm run: the jobs read the saved scenario")
    run_dir = RunDir.open(path)
    sc = validate_data(run_dir.load_scenario(), str(run_dir.scenario_path))
    busy = [j for j in arm_jobs(run_dir, sc) if not j.died and j.points_done < j.points_total]
    if busy:
        raise UsageError(f"jobs still queued or running: {', '.join(f'{j.arm}={j.job_id} {j.state}' for j in busy)}; "
                         f"wait, or `speedbench cancel {path}` first")
    done = run_dir.finished_points()
    plan, rounds = build_plan(sc), run_dir.finished_rounds()
    todo = [a.name for a in sc.arms if plan.unfinished(rounds, a.name)]
    console.print(f"resuming {run_dir.path}: {len(done)} finished points are kept; arms to run: "
                  f"{', '.join(todo) or 'none'}",
                  markup=False, soft_wrap=True)
    _print_jobs(submit(sc, run_dir, arms=todo, skip_doctor=args.skip_doctor), run_dir.path, console)
    return 0
