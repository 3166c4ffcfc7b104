"""What a run will do, before it does it: launches, GPU schedule, request counts.

Used by ``speedbench run --dry-run`` (printed) and by the run itself (executed), so the
dry-run can never drift from what actually starts.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from speedbench.engine import engine_for
from speedbench.engine.base import Engine, LaunchSpec
from speedbench.engine.docker import container_labels, container_name, docker_run_argv
from speedbench.engine.placement import schedule_scenario
from speedbench.records import PointKey
from speedbench.scenario import ArmSpec, Scenario
from speedbench.secrets import redact_env

if TYPE_CHECKING:
    from speedbench.loadgen import PointJob
    from speedbench.workload import Workload


@dataclass
class ArmPlan:
    arm: ArmSpec
    launch: LaunchSpec

    @property
    def launched(self) -> bool:
        return self.launch.base_url is None


@dataclass
class Plan:
    scenario: Scenario
    engine: Engine  # the engine every arm runs (engine_for(scenario)); the run reaches vLLM only through it
    arms: list[ArmPlan]
    waves: list[list[str]]  # arms in one wave run concurrently (disjoint GPU sets)
    n_prompts: int
    n_warmup: int
    overrides: list[str] = field(default_factory=list)

    @property
    def rounds(self) -> int:
        """Rounds of fresh server starts: every repeat starts every arm's server again."""
        return self.scenario.repeats

    @property
    def n_launches(self) -> int:
        return sum(1 for a in self.arms if a.launched) * self.rounds

    def rounds_left(self, finished: Collection[tuple[PointKey, int]]) -> list[tuple[PointKey, int]]:
        """Every (point, round) not in ``finished`` (``RunDir.finished_rounds()``), round by
        round in run order: what a run or resume still has to measure."""
        return [(k, r) for r in range(self.rounds) for k in self.points() if (k, r) not in finished]

    def unfinished(self, finished: Collection[tuple[PointKey, int]], arm: str | None = None) -> list[PointKey]:
        """The points (of one arm, if given) with a round not yet finished."""
        return [k for k in self.points(arm) if any((k, r) not in finished for r in range(self.rounds))]

    def points(self, arm: str | None = None) -> list[PointKey]:
        """Every point the run measures (of one arm, if given), in the order it runs them:
        arm by arm, each variant, each concurrency level (or request rate). The only
        enumeration of points."""
        sc = self.scenario
        return [PointKey(ap.arm.name, c, label, workload=v, rate=rate)
                for ap in self.arms if arm is None or ap.arm.name == arm
                for v in sc.variant_names
                for c, label, rate in sc.load_points(v)]

    def job(self, key: PointKey, workloads: Mapping[str, Workload], repeat: int = 0) -> PointJob:
        """What one round (``repeat``) of a point sends: the prompts of its workload variant
        (``workloads``: variant name -> prompts, loaded before any server starts), the warmup,
        and in rate mode the arrival times, the same (count, rate, burstiness, seed) and so
        the same times in every arm."""
        # function-local: the load generator pulls in aiohttp; --dry-run builds a plan without it
        from speedbench.loadgen import PointJob, arrivals

        sc = self.scenario
        wl = workloads[key.workload]
        offsets = (arrivals.arrival_offsets(len(wl.measured), key.rate, sc.load.burstiness, sc.load.seed)
                   if key.rate is not None else None)
        return PointJob(key=key, prompts=wl.measured, warmup=wl.warmup, repeats=1, first_repeat=repeat,
                        arrivals=offsets)

    @property
    def n_points(self) -> int:
        return len(self.points())

    def n_requests(self, turns_per_prompt: float = 1.0) -> int:
        sc = self.scenario
        per_point = (round(self.n_prompts * turns_per_prompt) + self.n_warmup) * sc.repeats  # warmup per server
        return per_point * self.n_points


def _schedule(sc: Scenario, inventory: list[int] | None,
              engine: Engine) -> tuple[dict[str, list[int] | None], list[list[str]]]:
    """Assign GPU sets and group arms into concurrent waves; sequential without GPUs."""
    waves = schedule_scenario(sc, inventory, engine)
    gpu_sets = {p.arm: (list(p.gpus) if p.gpus is not None else None) for w in waves for p in w}
    return gpu_sets, [[p.arm for p in w] for w in waves]


def build_plan(sc: Scenario, *, inventory: list[int] | None = None, n_prompts: int | None = None,
               overrides: list[str] | None = None) -> Plan:
    engine = engine_for(sc)
    gpu_sets, waves = _schedule(sc, inventory, engine)
    arms = [ArmPlan(arm=a, launch=engine.launch_spec(sc, a, gpu_sets.get(a.name))) for a in sc.arms]
    return Plan(
        scenario=sc,
        engine=engine,
        arms=arms,
        waves=waves,
        n_prompts=n_prompts if n_prompts is not None else (sc.workload.num_prompts or 0),
        n_warmup=sc.workload.warmup,
        overrides=list(overrides or []),
    )


# What the dry-run shows where each server's port goes when server.port is unset: a free
# port is chosen when the server starts, so no number printed before then would be true.
PORT_AT_START = "PORT"
# An impossible port (above 65535), rendered and then replaced by PORT_AT_START, so the
# docker argv, container name and labels all carry the placeholder without their own code.
_UNSET_PORT = 99_999


def port_chosen_at_start(sc: Scenario) -> bool:
    return sc.server.port is None


def display_argv(sc: Scenario, ap: ArmPlan, port: int | None = None, *, measurement: bool = True) -> list[str]:
    """The argv a user could paste: for docker the full `docker run`, else the vLLM command.
    ``measurement=False``: the scenario's own command, without speedbench's measurement flags.
    Without a port and without server.port, the port reads ``PORT`` (chosen at start)."""
    if port is None and sc.server.port is None:
        argv = display_argv(sc, ap, _UNSET_PORT, measurement=measurement)
        return [a.replace(str(_UNSET_PORT), PORT_AT_START) for a in argv]
    port = port if port is not None else sc.server.port
    assert port is not None  # one of the two is set (checked above)
    if not measurement and ap.launch.measurement:
        launch = replace(ap.launch, argv=ap.launch.argv[:len(ap.launch.argv) - len(ap.launch.measurement)],
                         measurement=[], measurement_env={})
        ap = ArmPlan(arm=ap.arm, launch=launch)
    if sc.server.launcher == "docker":
        return docker_run_argv(ap.launch, sc.server.docker, port, container_name(sc.name, ap.arm.name, port),
                               labels=container_labels(sc.name, ap.arm.name, port))
    return ap.launch.argv_with_port(port)


def display_env(sc: Scenario, ap: ArmPlan) -> dict[str, str]:
    """The scenario's own environment (the measurement environment is shown apart)."""
    extra = (sc.server.api_key_env,) if sc.server.api_key_env else ()
    return redact_env(replace(ap.launch, measurement_env={}).env_with_gpus(), extra)


def shell_line(argv: list[str], env: dict[str, str]) -> str:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (prefix + " " if prefix else "") + shlex.join(argv)
