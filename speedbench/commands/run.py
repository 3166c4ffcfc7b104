"""``speedbench run SCENARIO``: launch servers, replay the workload, write a run folder."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.text import Text

from speedbench.errors import UsageError
from speedbench.executors.kinds import executor_for, executor_of_run
from speedbench.report.wrap import print_paste, print_wrapped
from speedbench.stopping.schedule import look_level, look_schedule
from speedbench.results.run import open_run_dir
from speedbench.run.cost import describe, estimate
from speedbench.run.plan import (PORT_AT_START, ArmPlan, Plan, build_plan, display_argv, display_env,
                                 port_chosen_at_start, shell_line)
from speedbench.scenario import EXACT_LENGTH_KEY, Scenario, load_scenario, select_arms
from speedbench.workload import count_prompts

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
                       formatter_class=argparse.RawDescriptionHelpFormatter)
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
    say = partial(print_wrapped, console)
    say(f"[bold]plan for scenario '{sc.name}'[/bold]  (launcher: {sc.server.launcher})")
    if plan.overrides:
        say("overrides: " + ", ".join(plan.overrides))
    for ap in plan.arms:
        _print_arm(sc, ap, console)
    _print_schedule(plan, console)
    _print_work(plan, console)
    say("\n[bold]cost[/bold] (estimated)")
    for line in describe(estimate(plan, output_root), plan):
        say(Text(line))


def _print_arm(sc: Scenario, ap: ArmPlan, console: Console) -> None:
    arm = ap.arm
    kind = ("baseline" if arm.name == sc.baseline_arm else "A/A twin of the baseline" if arm.name == sc.aa_arm
            else "speculative" if arm.is_speculative else "arm")
    say = partial(print_wrapped, console)
    say(f"\n[bold cyan]arm {arm.name}[/bold cyan] ({kind}){': ' + arm.description if arm.description else ''}")
    if arm.template:
        say(Text(f"  expanded from sweep '{arm.template}': {arm.sweep_values}"))
    if not ap.launched:
        say(Text(f"  external endpoint: {arm.base_url} (health-checked and scraped, never stopped)"))
        return
    # Commands to paste, each alone on its line and never wrapped (report/wrap.py); the prose wraps.
    env = display_env(sc, ap)
    say("  command:")
    print_paste(console, shell_line(display_argv(sc, ap, measurement=False), {}))
    if port_chosen_at_start(sc):
        say(f"  port: chosen at start ({PORT_AT_START} above: a free port for each server; server.port pins one)")
    extra = ap.launch.measurement
    if extra or ap.launch.measurement_env:
        say("  measurement flags (added by speedbench; server.measurement_flags: false drops them):")
        print_paste(console, shell_line(extra, ap.launch.measurement_env))
    if env:
        say("  environment:")
        print_paste(console, " ".join(f"{k}={v}" for k, v in env.items()))
    if ap.launch.gpus is not None:
        say(f"  GPUs: {ap.launch.gpus}")


def _print_schedule(plan: Plan, console: Console) -> None:
    say = partial(print_wrapped, console)
    say("\n[bold]schedule[/bold]")
    for i, wave in enumerate(plan.waves, 1):
        together = " + ".join(wave)
        say(f"  step {i}: {together}" + (" (concurrently, disjoint GPUs)" if len(wave) > 1 else ""))
    if len(plan.waves) < len(plan.arms):
        saved = 1 - len(plan.waves) / len(plan.arms)
        say(f"  running disjoint arms together saves about {saved:.0%} of the wall time of the launches")


def _levels(sc: Scenario) -> str:
    if sc.load.mode == "rate":
        ld = sc.load
        return (f"{len(ld.rates)} request rates {ld.rates} req/s (open loop, burstiness {ld.burstiness:g}"
                f"{' = Poisson' if ld.burstiness == 1 else ' gamma'}, seed {ld.seed}, at most {ld.max_concurrency} "
                "in flight)")
    if sc.load.mode == "screen":
        return (f"1 screening concurrency {sc.load.screen_concurrency} (AL only, no baseline server; speedups "
                f"predicted at {sc.concurrency} from the calibration)")
    return f"{len(sc.concurrency)} concurrency levels {sc.concurrency}"


def _print_work(plan: Plan, console: Console) -> None:
    say = partial(print_wrapped, console)
    sc = plan.scenario
    w = sc.workload
    variants = ", ".join(sc.variant_names) if sc.workload.variants else "none"
    say(
        f"\n[bold]work[/bold]: {len(plan.arms)} arms x {_levels(sc)} "
        f"x {len(sc.variant_names)} variants ({variants}) = {plan.n_points} points"
    )
    prompts = plan.n_prompts or "all matching"
    say(
        f"  per point: {prompts} prompts + {plan.n_warmup} warmup, in each of {sc.repeats} "
        f"round{'s' if sc.repeats > 1 else ''} of fresh server starts"
        f"{' (arms in ABBA order)' if sc.repeats > 1 else ''}; "
        f"source {w.source}{'/' + w.config if w.source == 'speed_bench' else ''}"
        f"{' categories ' + ','.join(w.categories) if w.categories else ''}; "
        f"T={w.temperature}, max_tokens={w.max_tokens}, {EXACT_LENGTH_KEY}={w.exact_length}, "
        f"chat template on the {w.chat_template} side"
    )
    if plan.n_prompts:
        say(f"  total: {plan.n_launches} server launches, about {plan.n_requests()} requests "
                      "(multi-turn rows add one request per extra turn)")
    else:
        say(f"  total: {plan.n_launches} server launches")
    if sc.stop is not None:
        looks = look_schedule(plan.n_prompts or sc.stop.max_prompts or 0, sc.stop.min_prompts, sc.stop.max_prompts)
        say(f"  sequential stopping: looks at {looks or 'min_prompts x 2^j up to every prompt'} prompts, "
                      f"each interval at level {look_level(sc.stop.alpha, len(looks) or 1):.4f}; the baseline runs "
                      "every look, other arms may stop at any: the counts and the cost below are the most it spends")
    if sc.baseline_from is not None:
        say(f"  baseline: reused from {sc.baseline_from.results} when a matching run at most "
                      f"{sc.baseline_from.max_age_days:g} days old passes a canary; otherwise measured")


def run(args) -> int:
    console = Console(highlight=False)
    if args.resume and args.dry_run:
        raise UsageError("--resume and --dry-run do not go together")
    if args.resume:
        rd = open_run_dir(args.resume)  # a missing, empty or non-run folder: exit 2 before anything starts
        executor = executor_for(args.executor) if args.executor else executor_of_run(rd)
        return executor.resume(
            Path(args.resume), console, overrides=args.overrides, skip_doctor=args.skip_doctor).code
    if not args.scenario:
        raise UsageError("run needs a scenario file, e.g. speedbench run scenarios/cpu_tiny.yaml")
    sc = load_scenario(args.scenario, args.overrides)
    if args.arms:
        sc = select_arms(sc, [a.strip() for a in args.arms.split(",") if a.strip()])
    if args.executor:
        sc = sc.model_copy(update={"executor": sc.executor.model_copy(update={"kind": args.executor})})
    executor = executor_for(sc.executor.kind)
    if args.dry_run:
        plan = build_plan(sc, overrides=args.overrides, n_prompts=count_prompts(sc.workload))
        print_plan(plan, console, Path(args.output))
        executor.plan(sc, Path(args.output), console, skip_doctor=args.skip_doctor)
        return 0
    return executor.submit(sc, Path(args.output), console, overrides=args.overrides,
                           skip_doctor=args.skip_doctor).code

