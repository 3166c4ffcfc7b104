"""``speedbench validate FILE``: check a scenario without running anything."""

from __future__ import annotations

from speedbench.scenario import load_scenario


def register(sub) -> None:
    p = sub.add_parser(
        "validate",
        help="check a scenario file and print a one-line summary",
        description="Validate a scenario: unknown keys, wrong types and inconsistent arms are "
        "reported with the file, key path and line. Exit 0 when valid, 2 when not.",
    )
    p.add_argument("scenario", help="path to a scenario YAML file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a value before validating (repeatable)")
    p.set_defaults(func=run)


def run(args) -> int:
    sc = load_scenario(args.scenario, args.overrides)
    spec_arms = [a.name for a in sc.arms if a.is_speculative]
    print(
        f"{args.scenario}: ok -- scenario '{sc.name}', {len(sc.arms)} arms "
        f"(baseline {sc.baseline_arm or 'none'}; speculative {', '.join(spec_arms) or 'none'}), "
        f"concurrency {sc.workload and sc.concurrency}, workload {sc.workload.source}"
    )
    return 0
