"""The measurement environment (PYTHONFAULTHANDLER): on every launched server by
default, shown apart from the scenario's own environment, off with measurement_flags."""

from pathlib import Path

import yaml

from speedbench.engine.vllm.command import launch_spec
from speedbench.run.plan import build_plan, display_env
from speedbench.scenario import apply_overrides, validate_data

CPU_TINY = Path(__file__).resolve().parents[3] / "scenarios" / "cpu_tiny.yaml"


def _scenario(*overrides):
    return validate_data(apply_overrides(yaml.safe_load(CPU_TINY.read_text()), list(overrides)), str(CPU_TINY))


def test_faulthandler_on_every_launched_server_apart_from_the_scenario_env():
    sc = _scenario()
    for arm in sc.arms:
        spec = launch_spec(sc, arm)
        assert spec.measurement_env == {"PYTHONFAULTHANDLER": "1"}
        assert spec.env_with_gpus()["PYTHONFAULTHANDLER"] == "1"
        assert "PYTHONFAULTHANDLER" not in spec.env
    plan = build_plan(sc)
    assert all("PYTHONFAULTHANDLER" not in display_env(sc, ap) for ap in plan.arms)


def test_measurement_flags_false_and_the_scenarios_own_value():
    sc = _scenario("server.measurement_flags=false")
    assert all(launch_spec(sc, a).measurement_env == {} for a in sc.arms)
    sc = _scenario("server.env.PYTHONFAULTHANDLER=0")
    spec = launch_spec(sc, sc.arms[0])
    assert spec.measurement_env == {} and spec.env_with_gpus()["PYTHONFAULTHANDLER"] == "0"
