"""``speedbench run SCENARIO``: launch servers, replay the workload, write a run folder."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from speedbench.errors import UsageError
from speedbench.plan import Plan, build_plan, display_argv, display_env, shell_line
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
    p.set_defaults(func=run)


def print_plan(plan: Plan, console: Console) -> None:
    sc = plan.scenario
    console.print(f"[bold]plan for scenario '{sc.name}'[/bold]  (launcher: {sc.server.launcher})")
    if plan.overrides:
        console.print("overrides: " + ", ".join(plan.overrides))
    for ap in plan.arms:
        arm = ap.arm
        kind = "baseline" if arm.name == sc.baseline_arm else ("speculative" if arm.is_speculative else "arm")
        console.print(f"\n[bold cyan]arm {arm.name}[/bold cyan] ({kind}){': ' + arm.description if arm.description else ''}")
        if arm.template:
            console.print(f"  expanded from sweep '{arm.template}': {arm.sweep_values}")
        if not ap.launched:
            console.print(f"  external endpoint: {arm.base_url} (health-checked and scraped, never stopped)")
            continue
        env = display_env(sc, ap)
        console.print("  command:", highlight=False)
        console.print("    " + shell_line(display_argv(sc, ap), {}), highlight=False, soft_wrap=True)
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
    console.print(
        f"\n[bold]work[/bold]: {len(plan.arms)} arms x {len(sc.concurrency)} concurrency levels {sc.concurrency} "
        f"x {len(sc.variant_names)} variants ({variants}) = {plan.n_points} points"
    )
    prompts = plan.n_prompts or "all matching"
    console.print(
        f"  per point: {prompts} prompts x {sc.repeats} repeats + {plan.n_warmup} warmup; "
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


def run(args) -> int:
    console = Console(highlight=False)
    if args.resume and args.dry_run:
        raise UsageError("--resume and --dry-run do not go together")
    # speedbench.run is imported only when a run starts: it pulls in pandas, the doctor
    # and the engine, which `speedbench --help` and --dry-run do not need.
    if args.resume:
        from speedbench.run import resume_run

        return resume_run(Path(args.resume), overrides=args.overrides, skip_doctor=args.skip_doctor, console=console)
    if not args.scenario:
        raise UsageError("run needs a scenario file, e.g. speedbench run scenarios/cpu_tiny.yaml")
    sc = load_scenario(args.scenario, args.overrides)
    if args.arms:
        sc = select_arms(sc, [a.strip() for a in args.arms.split(",") if a.strip()])
    if args.dry_run:
        print_plan(build_plan(sc, overrides=args.overrides), console)
        return 0
    from speedbench.run import new_run

    return new_run(sc, Path(args.output), overrides=args.overrides, skip_doctor=args.skip_doctor, console=console)
