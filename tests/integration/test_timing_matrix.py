"""Timing accuracy on every request path, against scripted emission times.

The fake server (a child process, so it shares no GIL with the client) writes like
vLLM's HTTP stack: headers when the request is accepted (long before the first token),
no role chunk on /v1/completions, a chat role chunk alone or in one TCP write with the
first token, chunked encoding whose terminator comes in its own write after [DONE], and
keep-alive. It logs when it wrote each token chunk; per-user TPS and TTFT computed from
those times are the truth.

The matrix: {chat, chat with role+first token in one write, completions} x {c=1, 4, 16}
x {fresh connection per request, connections reused from warmup}. Per point: mean
per-user TPS within 0.1% of the truth (0.25% at c=16), mean and median TTFT within
1 ms, speedup within 0.2% with the true speedup inside its 95% CI, AL exact; each bound
widened to what the client's own measured event-loop lag explains when that is larger
(a stamp can be late by the lag: lag / decode window for TPS, the lag for TTFT), so a
busy host's load is not read as a stamping bug. A point out of bounds is measured once
more on fresh servers and must pass then: a process stalled by other load on a 2-core
machine hits one measurement, a stamping bug every one.

With the stamping of the first landing (any received bytes, headers and terminators
included, stamped the next body read) every point failed: TTFT read 20-170 ms short and
per-user TPS 5-22% low (benchmarks/timing_accuracy.py prints the table).
"""

from __future__ import annotations

import numpy as np
import pytest

from speedbench.metrics.table import request_table
from speedbench.testing.accuracy import KEYS, measure, run_matrix, servers
from tests.helpers.bounds import client_pairs, high


@pytest.fixture(scope="module")
def matrix():
    return run_matrix()


def _errors(pt) -> list[str]:
    """What is wrong with one point (empty: within every bound), printing its figures."""
    path, conn, c = pt.key
    bad, true_mean, slack = [], {}, {}
    for arm in ("base", "sd"):
        recs = pt.records[arm]
        if not recs or not all(r.ok for r in recs):
            return [f"{arm}: failed requests {[r.error_detail for r in recs if not r.ok]}"]
        table = request_table(recs)
        true_tps = np.array([pt.truth_tps[(arm, i)] for i in table.prompt_index])
        true_ttft = np.array([pt.truth_ttft_ms[(arm, i)] for i in table.prompt_index])
        true_mean[arm] = true_tps.mean()
        tps_err = pt.rows[arm]["per_user_tps_mean"] / true_tps.mean() - 1
        ttft_err = table.ttft_ms.to_numpy() - true_ttft
        lag = pt.rows[arm]["loop_lag_ms_max"]
        window_ms = np.mean([(r.chunk_ns[-1] - r.chunk_ns[0]) / 1e6 for r in recs])
        # A stamp is taken on the client's event loop, so it can be late by as much as that
        # loop lagged (the run measures it): a decode window read off by up to the lag,
        # TTFT likewise. What the measured lag explains is the host's load, not a stamping
        # bug (which biased TTFT by 20-170 ms and TPS by 5-22% whatever the load).
        slack[arm] = lag / window_ms
        print(f"{path} {conn} c={c} {arm}: per-user TPS {tps_err:+.4%}, TTFT mean {ttft_err.mean():+.3f} ms "
              f"(max |err| {np.abs(ttft_err).max():.3f} ms), client loop lag max {lag:.1f} ms "
              f"({slack[arm]:.3%} of the {window_ms:.0f} ms decode window)")
        # the bar: 0.1% at c <= 4, 0.25% at c = 16 (two cores host 16 streams,
        # the fake and the client), or what the client's lag explains when that is more
        if abs(tps_err) >= max(0.001 if c <= 4 else 0.0025, slack[arm]):
            bad.append(f"{arm}: per-user TPS off by {tps_err:+.3%}")
        if abs(ttft_err.mean()) >= max(1.0, lag) or np.median(np.abs(ttft_err)) >= max(1.0, lag):
            bad.append(f"{arm}: TTFT off by {ttft_err.mean():+.2f} ms (mean)")
    sd = pt.rows["sd"]
    true_speedup = true_mean["sd"] / true_mean["base"]
    lagged = slack["base"] + slack["sd"]  # a ratio of two lag-read figures
    if abs(sd["speedup_mean"] / true_speedup - 1) >= max(0.002, lagged):
        bad.append(f"speedup {sd['speedup_mean']:.4f} vs true {true_speedup:.4f}")
    if not sd["speedup_ci_low"] / (1 + lagged) <= true_speedup <= high(sd["speedup_ci_high"]) * (1 + lagged):
        bad.append(f"true speedup {true_speedup:.4f} outside the CI "
                   f"[{sd['speedup_ci_low']:.4f}, {high(sd['speedup_ci_high']):.4f}]")
    return bad


@pytest.mark.parametrize("path,conn,c", KEYS, ids=[f"{p}-{conn}-c{c}" for p, conn, c in KEYS])
def test_timing_matches_emission(matrix, path, conn, c):
    pt = matrix[(path, conn, c)]
    bad = _errors(pt)
    if bad:
        # One re-measurement, on fresh servers: a stalled process on a busy machine
        # delays one point, while a stamping bug biases every measurement the same way
        # (the first landing's stamping fails 18 of 18 points, retried or not).
        with servers() as srvs:
            again = measure(srvs, (path, conn, c), attempt=1)
        bad_again = _errors(again)
        assert not bad_again, f"twice out of bounds: first {bad}, then {bad_again}"
        pt = again
    sd = pt.rows["sd"]
    # every prompt pairs, less those a busy host made into bursts (no client-side TPS)
    assert sd["speedup_pairs"] == client_pairs(pt.records["sd"] + pt.records["base"], "sd", "base")
    assert sd["speedup_pairs"] <= max(4, c)
    assert sd["al_agree"] is True and sd["al_tokens"] == pytest.approx(sd["al_prometheus"], abs=1e-12)


def test_matrix_exercised_both_connection_modes(matrix):
    """The fresh/reused split is real, seen from the server: in fresh mode every request
    came on a new connection; in reused mode every measured request came on a
    connection a warmup request had opened."""
    for (_path, conn, c), pt in matrix.items():
        for arm in ("base", "sd"):
            warm, measured = pt.ports[arm]
            if conn == "fresh":
                assert not warm and len(set(measured)) == len(measured)
            else:
                assert len(warm) == c and set(measured) <= set(warm)
