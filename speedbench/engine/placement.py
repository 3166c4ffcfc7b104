"""Which GPUs each arm's server gets, and which arms may run at the same time.

Pure functions. Arms keep their scenario order: a wave is a run of consecutive arms
whose GPU sets are disjoint, so they can be served concurrently; an arm that does
not fit next to the others starts the next wave. On a host without GPUs every arm
is its own wave (CPU servers would fight over the same cores). How many GPUs one arm's
server spans is the engine's answer (``Engine.gpus_per_server``; vLLM's reads its
parallel sizes), so nothing here knows an engine's flags.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from speedbench.engine.base import Engine
from speedbench.errors import ScenarioError
from speedbench.scenario import ArmSpec, Scenario


@dataclass(frozen=True)
class Placement:
    arm: str
    gpus: tuple[int, ...] | None  # None: let the server see what it sees (CPU / no inventory)
    explicit: bool = False  # the scenario named these GPUs


Wave = list[Placement]


def schedule(arms: Sequence[ArmSpec], inventory: Sequence[int] | None,
             needs: Mapping[str, int]) -> list[Wave]:
    """Assign GPU sets to arms and group them into waves of concurrent arms.

    ``needs[arm]`` is the number of GPUs one server of that arm uses. External arms
    (``base_url``) take no GPU here and always run alone.
    """
    inv = list(inventory or [])
    if not inv:
        # No inventory: nothing to split, and concurrent servers would share one device.
        return [[Placement(a.name, tuple(a.gpus) if a.gpus is not None else None, a.gpus is not None)]
                for a in arms]
    # Automatic arms avoid GPUs that some arm names explicitly, so both can run together.
    reserved = {g for a in arms if a.gpus is not None for g in a.gpus}
    inv.sort(key=lambda g: g in reserved)  # stable: keeps the inventory order otherwise
    waves: list[Wave] = []
    current: Wave = []
    used: set[int] = set()
    for arm in arms:
        if arm.base_url:
            waves += [w for w in (current, [Placement(arm.name, None)]) if w]
            current, used = [], set()
            continue
        need = needs.get(arm.name, 1)
        if need > len(inv) and arm.gpus is None:
            raise ScenarioError(
                f"arm '{arm.name}' needs {need} GPUs (tensor x pipeline x data parallel) but the host "
                f"has {len(inv)}: {inv} -- fix: lower the parallel sizes or list server.gpus"
            )
        gpus = _pick(arm, inv, need, used)
        if gpus is None:  # does not fit beside the current wave: start a new one
            waves.append(current)
            current, used = [], set()
            gpus = _pick(arm, inv, need, used)
        assert gpus is not None  # an empty wave holds any arm that fits the host, checked above
        current.append(Placement(arm.name, gpus, arm.gpus is not None))
        used |= set(gpus)
    if current:
        waves.append(current)
    return waves


def _pick(arm: ArmSpec, inv: list[int], need: int, used: set[int]) -> tuple[int, ...] | None:
    if arm.gpus is not None:
        return None if used & set(arm.gpus) else tuple(arm.gpus)
    free = [g for g in inv if g not in used]
    return tuple(free[:need]) if len(free) >= need else None


def schedule_scenario(sc: Scenario, inventory: Sequence[int] | None, engine: Engine) -> list[Wave]:
    """``schedule`` with each arm's GPU need asked of the engine, from the arm's launch;
    at least one, as the doctor counts (a CPU server, which needs none, is placed as one GPU).

    ``server.gpus``, when set, replaces the detected inventory.
    """
    inv = sc.server.gpus if sc.server.gpus is not None else inventory
    needs = {}
    for arm in sc.arms:
        launch = engine.launch_spec(sc, arm)
        needs[arm.name] = max(1, engine.gpus_per_server(launch.argv, launch.env))
    return schedule(sc.arms, inv, needs)


def describe(waves: Sequence[Wave]) -> list[str]:
    """One line per wave, for --dry-run."""
    lines = []
    for i, wave in enumerate(waves, 1):
        parts = [f"{p.arm} on " + ("GPUs " + ",".join(map(str, p.gpus)) if p.gpus is not None else "default devices")
                 for p in wave]
        lines.append(f"wave {i}: " + ("; ".join(parts)) + (" (concurrent)" if len(wave) > 1 else ""))
    return lines
