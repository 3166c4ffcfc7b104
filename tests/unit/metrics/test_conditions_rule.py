"""The confounding rule: two arms' rounds compared, and the summary block."""

from __future__ import annotations

from speedbench.metrics import conditions as cond
from speedbench.metrics.stored_blocks import Conditions
from speedbench.records import PointKey


def _c(other: float, cpus: int = 2, steal: float = 0.0, busy: float | None = None, **more) -> dict:
    """One round's conditions; the host saturated unless ``busy`` says otherwise."""
    return {"cpus": cpus, "other_cores": other, "steal_share": steal, "engine_cores": 0.9,
            "host_busy_cores": cpus if busy is None else busy, "load_1m": [1.0, 2.0], "not_checked": [], **more}


def _rounds(arm_other: float, base_other: float = 0.02, arm: str = "eagle3") -> dict:
    marks = [{"arm": "baseline", "concurrency": 16, "variant": "", "repeat": 0, "status": "ok",
              "conditions": _c(base_other)},
             {"arm": arm, "concurrency": 16, "variant": "", "repeat": 0, "status": "ok", "conditions": _c(arm_other)}]
    return {(PointKey(m["arm"], 16, ""), 0): m for m in marks}


def test_a_hog_between_the_arms_confounds_the_comparison():
    block = cond.conditions_block(_rounds(arm_other=1.0), "baseline")
    (e,) = block["points"]
    assert e["confounded"] is True
    why = Conditions.from_dict(block).confounded("eagle3", 16)
    assert why is not None and "left 1.00 CPUs to the engine and client vs 1.98 for the baseline" in why
    assert "baseline: 1.98 of 2 CPUs left by other work (host saturated)" in why
    assert cond.CHECKED_CPU in block["checked"] and cond.NO_GPU in block["not_checked"]


def test_equal_conditions_are_not_confounded_even_when_busy():
    block = cond.conditions_block(_rounds(arm_other=0.95, base_other=1.0), "baseline")
    assert block["points"][0]["confounded"] is False
    assert Conditions.from_dict(block).confounded("eagle3", 16) is None


def test_the_threshold_is_a_ratio_of_the_cpus_left():
    assert cond.differences(_c(0.18), _c(0.0)) == []  # 1.82 vs 2.00 CPUs: 1.099x, under the threshold
    assert cond.differences(_c(0.2), _c(0.0))  # 1.80 vs 2.00: 1.11x
    assert cond.differences(_c(6.0, cpus=128), _c(0.0, cpus=128)) == []  # 122 vs 128 CPUs: a big host barely notices


def test_other_work_on_a_host_with_cpus_to_spare_takes_nothing_from_the_engine():
    assert cond.differences(_c(0.8, busy=1.5), _c(0.0, busy=0.7)) == []
    assert cond.differences(_c(0.8, busy=1.95), _c(0.0, busy=0.7))
    assert cond.differences(_c(0.0, steal=0.08), _c(0.0, steal=0.0)) == ["CPU steal 8% vs 0% for the baseline"]


def test_a_gpu_clock_change_between_arms_is_named():
    gpu = {"index": 0, "sm_clock_mhz": [1980, 1980], "power_w": [700, 690], "temperature_c": [60, 61]}
    slow = {"index": 0, "sm_clock_mhz": [1400, 1410], "power_w": [690, 700], "temperature_c": [62, 63]}
    why = cond.differences(_c(0.0, gpus=[slow]), _c(0.0, gpus=[gpu]))
    assert why == ["GPU 0 SM clock 1405 vs 1980 MHz"]


def test_an_old_folder_says_conditions_were_not_recorded():
    marks = {(PointKey("baseline", 1, ""), 0): {"arm": "baseline", "concurrency": 1, "repeat": 0}}
    block = cond.conditions_block(marks, "baseline")
    assert block["checked"] == [] and block["points"] == []
    assert block["not_checked"][0].startswith("run conditions: not recorded")


def _two_rounds(arm_others: tuple[float, float], base_others: tuple[float, float]) -> dict:
    out = {}
    for rnd in (0, 1):
        for arm, other in (("baseline", base_others[rnd]), ("eagle3", arm_others[rnd])):
            out[(PointKey(arm, 4, ""), rnd)] = {"arm": arm, "concurrency": 4, "variant": "", "repeat": rnd,
                                                "status": "ok", "conditions": {**_c(other), "wall_s": 10.0}}
    return out


def test_rounds_are_pooled_as_the_speedup_pools_them():
    # a load that fell on the arm in round 1 and on the baseline in round 2 (ABBA) is in both
    # sides' figures and in the interval; one that stayed on the arm is a bias
    assert cond.conditions_block(_two_rounds((1.0, 0.0), (0.0, 1.0)), "baseline")["points"][0]["confounded"] is False
    (e,) = cond.conditions_block(_two_rounds((1.0, 0.8), (0.0, 0.1)), "baseline")["points"]
    assert e["confounded"] is True and e["rounds"] == 2
    assert "over 2 rounds" in Conditions.from_dict(cond.conditions_block(_two_rounds((1.0, 0.8), (0.0, 0.1)),
                                                                    "baseline")).confounded("eagle3", 4)


def test_a_failed_round_is_not_pooled_and_a_missing_baseline_is_named():
    rounds = _two_rounds((1.0, 0.0), (0.0, 0.0))
    rounds[(PointKey("eagle3", 4, ""), 0)]["status"] = "failed"  # the hogged round's records are not in the speedup
    assert cond.conditions_block(rounds, "baseline")["points"][0]["confounded"] is False
    only_arm = {k: v for k, v in _rounds(arm_other=1.0).items() if k[0].arm == "eagle3"}
    block = cond.conditions_block(only_arm, "baseline")
    assert block["points"] == [] and "eagle3 c=16: the baseline's conditions were not recorded" in block["not_checked"]


def test_an_mtp_head_naming_the_target_is_not_a_self_draft():
    from speedbench.metrics.controls import control_of

    assert control_of({"speculative_config": {"method": "mtp", "model": "org/target"}}, "org/target") is None
    assert control_of({"speculative_config": {"method": "draft_model", "model": "./x/target/"}}, "x/target") \
        == "self_draft"
