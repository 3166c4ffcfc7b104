"""Run-to-run noise: repeats as rounds of fresh server starts in ABBA order, the
two-level bootstrap, and the A/A check's noise floor.

The fake server is launched by ``speedbench run`` as vLLM would be, so every round
really starts and stops a process.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from tests.helpers.trust import assert_run_ok_or_controls_failed
from tests.helpers.cli_runs import fake_local, scenario, write_prompts, write_yaml
from tests.integration.test_reliability import out_of, sb, the_run
from tests.helpers.simulate import aa_point
from tests.helpers.bounds import high

from speedbench.metrics.bootstrap import cluster_paired_ratio_ci, paired_ratio_ci
from speedbench.metrics.noise_floor import floor_entries
from speedbench.metrics.speedup import pooled_round_spread
from speedbench.records import PointKey


@pytest.fixture(scope="module")
def rounds_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("noise")
    prompts = write_prompts(tmp / "p.jsonl", [f"prompt {i}" for i in range(6)])
    # 20 ms a step: a request spans 100 ms or more, so a busy host's stall rarely delivers
    # a whole round as bursts (no client-side TPS; the rows would still count the round)
    sc = scenario("noise", prompts, server=fake_local(**{"t-step": "0.02", "output-tokens": "12"}),
                  arms=[{"name": "base"}, {"name": "spec", "args": {"k": "3", "acceptance": "2,1"}}],
                  concurrency=[1, 2], repeats=2, aa_check=True)
    path = write_yaml(tmp / "noise.yaml", sc)
    res = sb(["run", str(path), "-o", str(tmp / "out"), "--skip-doctor"], tag="noise", cwd=tmp, timeout=300)
    run = the_run(tmp / "out")
    # the A/A twin runs at other times than its baseline: a host whose load moved the same
    # way in both rounds can fail that control, and the run then rightly exits 1, saying so
    assert_run_ok_or_controls_failed(res, run)
    return run, json.loads((run / "summary.json").read_text()), out_of(res)


def test_each_repeat_is_a_round_of_fresh_servers_in_abba_order(rounds_run):
    run, _, out = rounds_run
    assert "round 1 of 2: fresh servers, base -> base-aa -> spec" in out
    assert "round 2 of 2: fresh servers, spec -> base-aa -> base" in out
    recs = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    by_arm_round: dict = {}
    for r in recs:
        if not r["warmup"]:
            by_arm_round.setdefault((r["arm"], r["repeat"]), []).append(r["t_sent_ns"])
    # the order in time: base, aa, spec in round 0, then spec, aa, base in round 1
    order = sorted(by_arm_round, key=lambda k: min(by_arm_round[k]))
    assert order == [("base", 0), ("base-aa", 0), ("spec", 0), ("spec", 1), ("base-aa", 1), ("base", 1)]
    # each round has its own Prometheus snapshots (a fresh server's counters start at 0)
    names = {p.name for p in (run / "prometheus").iterdir()}
    assert "spec__c1__default__before.txt" in names and "spec__c1__default__r1__before.txt" in names


def test_rows_carry_the_spread_between_rounds(rounds_run):
    _, summary, _ = rounds_run
    spec = [r for r in summary["rows"] if r["arm"] == "spec"]
    assert spec and all(len(r["speedup_by_repeat"]) == 2 for r in spec)
    for r in spec:
        # a null high end: unbounded by the client's lag on a busy host (docs/metrics.md)
        assert r["speedup_ci_low"] <= r["speedup_mean"] <= high(r["speedup_ci_high"])
        # the spread between rounds comes from the rounds that have a ratio (a round whose
        # every request was a burst has none): both, unless a busy host took one away
        measured = [v for v in r["speedup_by_repeat"] if v is not None]
        assert measured and (len(measured) == 2) == math.isfinite(r["speedup_between_sd"] or math.nan)
        assert r["n_requests"] == 12  # 6 prompts x 2 rounds
        assert math.isfinite(r["per_user_tps_engine_mean"]) and r["tps_agree"] is not None


def test_noise_floor_comes_from_the_aa_arm(rounds_run):
    _, summary, _ = rounds_run
    floor = summary["noise_floor"]
    assert [f["concurrency"] for f in floor] == [1, 2]
    for f in floor:
        assert set(f) >= {"concurrency", "speedup", "ci_low", "ci_high", "level"}
        assert f["level"] == pytest.approx(1 - 0.05 / 2)  # simultaneous over the 2 points
        # a null high end: unbounded by the client's lag on a busy host (docs/metrics.md)
        assert f["ci_low"] <= f["speedup"] <= high(f["ci_high"])
        assert f["engine_ci_low"] <= f["speedup_engine"] <= f["engine_ci_high"]
        assert f["contains_one"] == (f["ci_low"] <= 1.0 <= high(f["ci_high"])
                                     and f["engine_ci_low"] <= 1.0 <= f["engine_ci_high"])
    # the A/A arm's own rows keep their per-point 95% intervals, inside the floor's
    aa = {r["concurrency"]: r for r in summary["rows"] if r["arm"] == "base-aa"}
    for f in floor:
        row = aa[f["concurrency"]]
        assert f["speedup"] == pytest.approx(row["speedup_mean"])
        assert f["ci_low"] <= row["speedup_ci_low"] and high(row["speedup_ci_high"]) <= high(f["ci_high"])


def test_resolved_scenario_reloads_with_its_aa_arm(rounds_run):
    run, _, _ = rounds_run
    res = sb(["report", str(run)], tag="noise", cwd=run)
    assert res.returncode == 0, out_of(res)


def test_cluster_bootstrap_is_paired_bootstrap_with_one_round_and_wider_with_spread():
    rng = np.random.default_rng(1)
    base = rng.normal(100, 10, 40)
    spec = base * 1.5 * rng.normal(1, 0.02, 40)
    one = cluster_paired_ratio_ci(spec, base, np.zeros(40))
    assert one == paired_ratio_ci(spec, base)
    # the same pairs split into 4 rounds whose servers ran 10% apart: the interval widens
    rounds = np.repeat(np.arange(4), 10)
    shifted = spec * np.array([0.9, 1.1, 0.95, 1.05])[rounds]
    flat = paired_ratio_ci(shifted, base)
    clustered = cluster_paired_ratio_ci(shifted, base, rounds)
    assert (clustered[1] - clustered[0]) > 1.5 * (flat[1] - flat[0])


def test_cluster_bootstrap_covers_a_server_effect(tmp_path):
    """Coverage on simulated rounds: each round's servers draw a speed factor (sd 8%), and
    prompts add noise. The 95% interval must hold the true 1.5x in most of 200 runs."""
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(200):
        rounds = np.repeat(np.arange(4), 12)
        base = rng.normal(100, 15, 48) * rng.normal(1, 0.08, 4)[rounds]
        spec = (1.5 * base / rng.normal(1, 0.08, 4)[rounds]) * rng.normal(1, 0.08, 4)[rounds] * rng.normal(1, 0.03, 48)
        lo, hi = cluster_paired_ratio_ci(spec, base, rounds, n_resamples=400)
        hits += lo <= 1.5 <= hi
    print(f"coverage {hits / 200:.2f}")
    assert hits / 200 >= 0.93  # R = 4 is few; the t widening keeps it near nominal


def test_pooled_spread_covers_time_local_noise_with_narrower_intervals():
    """The noise seen on the CPU host: every point of every round runs at its own speed
    (sd 8%, drawn for each arm's point separately), prompts add 3%. Three concurrencies of
    3 rounds, an A/A pair (truth 1.0). Pooling the spread over the concurrencies must keep
    coverage near 95% and give narrower intervals than each point's own 2 df."""
    rng = np.random.default_rng(11)
    hits_pooled = hits_own = 0
    width_pooled, width_own = [], []
    n_sims, rounds = 150, np.repeat(np.arange(3), 10)
    for _ in range(n_sims):
        points = []
        for _c in range(3):
            difficulty = rng.normal(100, 15, 10)[np.arange(30) % 10]
            base = difficulty * rng.lognormal(0, 0.08, 3)[rounds] * rng.normal(1, 0.03, 30)
            spec = difficulty * rng.lognormal(0, 0.08, 3)[rounds] * rng.normal(1, 0.03, 30)
            points.append((spec, base))
        by_round = [[s[rounds == r].mean() / b[rounds == r].mean() for r in range(3)] for s, b in points]
        spread = pooled_round_spread(by_round)
        for s, b in points:
            lo, hi = cluster_paired_ratio_ci(s, b, rounds, spread=spread, n_resamples=300)
            hits_pooled += lo <= 1.0 <= hi
            width_pooled.append(math.log(hi / lo))
            lo, hi = cluster_paired_ratio_ci(s, b, rounds, n_resamples=300)
            hits_own += lo <= 1.0 <= hi
            width_own.append(math.log(hi / lo))
    cov_pooled, cov_own = hits_pooled / (3 * n_sims), hits_own / (3 * n_sims)
    print(f"coverage pooled {cov_pooled:.3f} own {cov_own:.3f}; median log-width pooled "
          f"{np.median(width_pooled):.3f} own {np.median(width_own):.3f}")
    assert cov_pooled >= 0.93
    assert np.median(width_pooled) < 0.8 * np.median(width_own)


def _run(run_id: str, speedup: float, lo: float, hi: float, by_repeat: list[float] | None = None):
    from speedbench.results import Run

    row = {"arm": "eagle3", "concurrency": 1, "variant": "", "speculative": True, "status": "ok",
           "speedup_mean": speedup, "speedup_ci_low": lo, "speedup_ci_high": hi,
           "speedup_by_repeat": by_repeat or [], "per_user_tps_mean": 100.0}
    return Run(None, {"scenario": "nightly", "run_id": run_id, "baseline": "base", "rows": [row]})


def test_relative_gate_respects_the_night_to_night_spread():
    from speedbench.report.gate import evaluate_gates
    from speedbench.scenario import GateSpec

    gate = [GateSpec(metric="speedup", arm="eagle3", max_regression=0.05)]
    current, baseline = _run("now", 1.50, 1.40, 1.55), _run("before", 1.70, 1.60, 1.80)
    # beyond this run's interval, and no history: a regression
    assert evaluate_gates(current, gate, baseline)[0].status == "fail"
    # nights that moved by sd ~0.15: a 0.2 drop is inside 2 sd, so not counted
    noisy = [_run(f"n{i}", v, v - 0.05, v + 0.05) for i, v in enumerate([1.5, 1.8, 1.6, 1.75, 1.45])]
    res = evaluate_gates(current, gate, baseline, noisy)[0]
    assert res.status == "pass" and "night-to-night" in res.message
    # steady nights: the same drop is real (the dashboard's detector needs 5 earlier nights)
    steady = [_run(f"s{i}", v, v - 0.05, v + 0.05) for i, v in enumerate([1.69, 1.70, 1.71, 1.70, 1.69])]
    res = evaluate_gates(current, gate, baseline, steady)[0]
    assert res.status == "fail" and "night-to-night sd" in res.message and "detector calls it" in res.message
    # fewer than 5 earlier nights: no spread to judge by, the rule without history
    res = evaluate_gates(current, gate, baseline, steady[:3])[0]
    assert res.status == "fail" and "night-to-night" not in res.message


def test_compare_uses_the_two_level_intervals_when_runs_have_rounds():
    from speedbench.report.compare import _ci_diff

    a = _run("a", 1.50, 1.30, 1.70, [1.4, 1.6]).rows[0]
    b = _run("b", 1.62, 1.42, 1.82, [1.5, 1.7]).rows[0]
    iv = _ci_diff(a, b)
    assert iv.value == pytest.approx(0.12) and not iv.excludes_zero  # inside the server-to-server noise
    c = _run("c", 2.20, 2.10, 2.30, [2.15, 2.25]).rows[0]
    assert _ci_diff(a, c).excludes_zero


def test_a_run_of_identical_servers_fails_the_check_about_one_time_in_twenty():
    """150 simulated runs of 3 concurrencies x 3 rounds: the share of runs with any A/A
    interval (3 points, 2 clocks) excluding 1.0 stays near 5% at the simultaneous level,
    where 95% intervals read one at a time flag more correct runs."""
    rng = np.random.default_rng(7)
    n_runs = 150
    fail_family = fail_single = 0
    for _ in range(n_runs):
        pairs = {PointKey("aa", c): aa_point(rng, 0.08) for c in (1, 4, 16)}
        fail_family += any(f["contains_one"] is False for f in floor_entries(pairs))
        single = floor_entries(pairs, family=1 - 0.05 * 3)  # each interval at 95%
        assert single[0]["level"] == pytest.approx(0.95)
        fail_single += any(f["contains_one"] is False for f in single)
    print(f"runs failing the A/A check: simultaneous {fail_family}/{n_runs}, one at a time {fail_single}/{n_runs}")
    assert fail_family / n_runs <= 0.09
    assert fail_single > fail_family
