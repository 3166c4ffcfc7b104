"""Pre-flight checks: will this scenario start, and will it measure what it says?

``run_checks`` reads every fact about the machine through a :class:`Host` (its defaults
read the real machine), so tests can play any host. Checks never start vLLM,
never download, and never print a secret's value.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Callable, Protocol

from speedbench.doctor import containers, gpu_checks, host, models, servers
from speedbench.doctor.base import Check, Context, Facts, Host, launched_arms
from speedbench.engine import Engine, LaunchSpec
from speedbench.engine.base import CheckFn
from speedbench.scenario import ArmSpec, Scenario

__all__ = ["SECTIONS", "Check", "DoctorPlan", "Facts", "Host", "exit_code", "run_checks"]


class PlannedArm(Protocol):
    @property
    def arm(self) -> ArmSpec: ...
    @property
    def launch(self) -> LaunchSpec: ...


class DoctorPlan(Protocol):
    """What the doctor reads of a run's plan (run/plan.py's Plan): the scenario, its engine
    and each arm's launch, so it checks what the run will start, not a second rebuild."""

    @property
    def scenario(self) -> Scenario: ...
    @property
    def engine(self) -> Engine: ...
    @property
    def arms(self) -> Sequence[PlannedArm]: ...


def run_checks(plan: DoctorPlan, machine: Host | None = None, *, output: Path | None = None,
               output_need: int | None = None) -> list[Check]:
    """All checks for the ``plan``'s scenario, in table order, on ``machine`` (None: this one).
    ``output``: the results root, whose free space is compared with ``output_need``, the
    bytes the run folder may take (run/cost.py's ``output_bytes``; None: unknown)."""
    facts = (machine or Host()).facts()
    scenario, engine = plan.scenario, plan.engine
    arms = launched_arms(scenario)
    planned = {p.arm.name: p.launch for p in plan.arms}
    launches = {a.name: planned[a.name] for a in arms}
    ctx = Context(
        scenario=scenario,
        facts=facts,
        engine=engine.installed(scenario, facts),
        arms=arms,
        argv={name: launch.argv for name, launch in launches.items()},
        gpus_needed={name: max(1, engine.gpus_per_server(launch.argv, launch.env))
                     for name, launch in launches.items()},
        output=output,
        output_need=output_need,
    )
    # Drafts first: what they are decides which build of the engine the scenario needs.
    drafts = _guarded("draft", engine.draft_checks, ctx)
    checks: list[Check] = []
    for name, fn in _order(engine):
        checks += drafts if fn is None else _guarded(name, fn, ctx)
    return checks


# The table's rows in order; None: the engine's own check of that name runs there (vLLM's:
# its AMX kernel rule, its NVFP4 rule), nothing for an engine that has none.
SECTIONS: tuple[tuple[str, CheckFn | None], ...] = (
    ("model", models.check_model),
    ("cpu kernel", None),
    ("gpus", gpu_checks.check_gpus),
    ("gpu memory", gpu_checks.check_gpu_memory),
    ("quantization", None),
    ("port", host.check_port),
    ("disk", models.check_disk),
    ("output space", host.check_output_space),
    ("hf token", models.check_token),
    ("docker", host.check_docker),
    ("leftover containers", containers.check_leftover_containers),
    ("leftover servers", servers.check_leftover_servers),
    ("workload", host.check_workload),
    ("fixtures", host.check_fixtures),
)


def _order(engine: Engine) -> list[tuple[str, CheckFn | None]]:
    """(name, check) in table order, the drafts' place marked by None: the engine's checks
    named after one of the doctor's rows run in that row (after the doctor's own), its
    others first (its installation), then the drafts' checks, then the doctor's rows."""
    sections = dict(SECTIONS)
    first = [(name, fn) for name, fn in engine.doctor_checks if name not in sections]
    rows = [(name, fn) for name, own in SECTIONS
            for fn in (own, *(f for n, f in engine.doctor_checks if n == name)) if fn is not None]
    return [*first, ("draft", None), *rows]


def _guarded(name: str, fn: Callable[[Context], list[Check]], ctx: Context) -> list[Check]:
    # A doctor that crashes on an odd machine tells the user nothing; report the
    # broken check and carry on with the others.
    try:
        return fn(ctx)
    except Exception as e:  # noqa: BLE001
        return [Check(name, "warn", f"this check could not run: {type(e).__name__}: {e}")]


def exit_code(checks: list[Check], strict: bool = False) -> int:
    """0 when nothing failed (warnings allowed unless ``strict``), else 1."""
    bad = {"fail", "warn"} if strict else {"fail"}
    return 1 if any(c.status in bad for c in checks) else 0
