"""Metrics on synthetic records with hand-worked answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from speedbench.metrics.acceptance import per_position_rates
from speedbench.metrics.breakdown import CATEGORY_KEYS, category_rows, prompt_rows
from speedbench.metrics.rows import ArmInfo, PointInfo, summarize
from speedbench.metrics.inputs import fold_rounds
from speedbench.metrics.table import itl_values, request_table
from speedbench.metrics.registry import row_keys
from speedbench.records import RequestRecord, SpecStats
from speedbench.client.scrape import SpecCounters
from speedbench.metrics.bootstrap import paired_ratio_ci, unpaired_ratio_ci

S = 1_000_000_000  # ns per second
nan = math.nan


MK_MORE = {"error": None, "warmup": False, "conc": 1, "turn": 0, "repeat": 0, "category": "", "variant": "",
           "queued": None}


def mk(arm="a", idx=0, sent=1.0, chunks=(), end=None, out=None, spec=None, **more) -> RequestRecord:
    """chunks: [(time_s, tokens)]; times are seconds on an arbitrary clock; ``more``: any of MK_MORE."""
    assert set(more) <= set(MK_MORE), set(more) - set(MK_MORE)
    o = {**MK_MORE, **more}
    chunk_ns = [int(t * S) for t, _ in chunks]
    end = end if end is not None else (chunks[-1][0] if chunks else sent) + 0.01
    queued = o["queued"] if o["queued"] is not None else sent
    return RequestRecord(
        arm=arm, concurrency=o["conc"], prompt_index=idx, prompt_id=f"p{idx}", variant=o["variant"],
        repeat=o["repeat"], turn=o["turn"], category=o["category"], warmup=o["warmup"], t_queued_ns=int(queued * S),
        t_sent_ns=int(sent * S), t_end_ns=int(end * S), chunk_ns=chunk_ns, chunk_tokens=[n for _, n in chunks],
        output_tokens=out, spec=spec, error=o["error"],
    )


def spec(steps, accepted, hist=(), k=3):
    return SpecStats(num_spec_steps=steps, num_draft_tokens=steps * k, num_accepted_tokens=accepted,
                     acceptance_histogram=list(hist))


def one_row(records, **kw):
    rows = summarize(records, kw.pop("prom", None), kw.pop("baseline", None), kw.pop("arm_info", {}),
                     kw.pop("points", None))
    assert len(rows) == 1
    return rows[0]


def test_per_request_worked_example():
    # sent 1.000; tokens: 1 at 1.100, 2 at 1.150, 1 at 1.250; end 1.260
    r = mk(sent=1.0, chunks=[(1.1, 1), (1.15, 2), (1.25, 1)], end=1.26, queued=0.998)
    row = request_table([r]).iloc[0]
    assert row.n_out == 4
    assert row.ttft_ms == pytest.approx(100)
    assert row.e2e_s == pytest.approx(0.26)
    assert row.tpot_ms == pytest.approx(50)  # 150 ms / (4 - 1)
    assert row.per_user_tps == pytest.approx(20)  # (4 - 1) / 0.150 s
    assert row.per_user_e2e_tps == pytest.approx(4 / 0.26)
    assert row.queue_wait_ms == pytest.approx(2)
    chunk, token = itl_values([r])
    assert chunk.tolist() == pytest.approx([50, 100])
    assert token.tolist() == pytest.approx([25, 25, 100])  # 50 ms over 2 tokens, counted twice


def test_one_token_and_single_chunk_outputs_have_no_decode_rate():
    one = mk(idx=0, chunks=[(1.1, 1)], end=1.2)
    packed = mk(idx=1, chunks=[(1.1, 5)], end=1.2)  # all tokens in one chunk: equal times
    empty = mk(idx=2, chunks=[], end=1.2, out=0)
    t = request_table([one, packed, empty])
    assert t.per_user_tps.isna().all() and t.tpot_ms.isna().all()
    assert t.ttft_ms.tolist()[:2] == pytest.approx([100, 100]) and math.isnan(t.ttft_ms[2])
    assert t.per_user_e2e_tps.tolist() == pytest.approx([1 / 0.2, 5 / 0.2, 0])
    row = one_row([one, packed, empty])
    assert math.isnan(row["per_user_tps_mean"]) and row["ttft_ms_mean"] == pytest.approx(100)
    assert math.isnan(row["itl_chunk_ms_median"])


def test_usage_count_wins_over_chunk_fallback():
    # text-delta fallback saw 3 chunks of "1 token", usage says 7 tokens
    r = mk(chunks=[(1.1, 1), (1.2, 1), (1.4, 1)], out=7)
    assert request_table([r]).per_user_tps[0] == pytest.approx(6 / 0.3)


def test_errors_and_warmup_in_point_summary():
    good = mk(idx=0, sent=1.0, chunks=[(1.1, 1), (1.2, 1), (1.3, 1)], end=1.3)  # tps 10
    good2 = mk(idx=1, sent=1.0, chunks=[(1.1, 1), (1.15, 1), (1.2, 1)], end=1.4)  # tps 20
    bad = mk(idx=2, sent=1.0, chunks=[(1.1, 1)], end=1.5, error="truncated")
    warm = mk(idx=0, sent=0.0, chunks=[(0.01, 1), (0.011, 100)], end=0.02, warmup=True)
    row = one_row([good, good2, bad, warm])
    assert (row["n_requests"], row["n_ok"], row["n_errors"]) == (3, 2, 1)
    assert row["error_rate"] == pytest.approx(1 / 3)
    assert row["per_user_tps_mean"] == pytest.approx(15) and row["per_user_tps_median"] == pytest.approx(15)
    assert row["per_user_tps_p10"] == pytest.approx(11) and row["per_user_tps_p90"] == pytest.approx(19)
    # output_tps: every measured output token (errored streams too) / wall (1.0 -> 1.5)
    assert row["output_tps"] == pytest.approx(7 / 0.5)
    assert row["status"] == "partial" and "truncated x1" in row["failure"]
    assert row["e2e_s_mean"] == pytest.approx(0.35)
    assert row["ttft_ms_p90"] == pytest.approx(100)
    assert tuple(row) == row_keys()


def test_point_info_wall_time_and_failed_points():
    r = mk(chunks=[(1.1, 1), (1.2, 3)], end=1.2)
    pts = {("a", 1, ""): PointInfo(wall_s=2.0, loop_lag_ms_max=1.5),
           ("a", 4, ""): PointInfo(status="failed", failure="died")}
    rows = summarize([r], None, None, {"a": ArmInfo(template="t")}, pts)
    assert rows[0]["output_tps"] == pytest.approx(2.0) and rows[0]["loop_lag_ms_max"] == 1.5
    assert rows[0]["template"] == "t" and rows[0]["status"] == "ok" and rows[0]["failure"] is None
    assert rows[1]["concurrency"] == 4 and rows[1]["status"] == "failed" and rows[1]["failure"] == "died"
    assert rows[1]["n_requests"] == 0 and math.isnan(rows[1]["per_user_tps_mean"])
    assert all(tuple(r) == row_keys() for r in rows)


def test_a_dead_arm_fails_only_its_unmeasured_points():
    r = mk(chunks=[(1.1, 1), (1.2, 3)], conc=1)
    pts = {("a", 1, ""): PointInfo(wall_s=1.0), ("a", 4, ""): PointInfo(status="failed", failure="died at c=4"),
           ("a", 16, ""): PointInfo()}
    rows = summarize([r], None, None, {"a": ArmInfo(status="failed", failure="arm a died")}, pts)
    assert [(x["concurrency"], x["status"], x["failure"]) for x in rows] == [
        (1, "ok", None), (4, "failed", "died at c=4"), (16, "failed", "arm a died")]


def test_point_info_from_results_folds_repeats():
    class R:  # duck-typed PointResult
        def __init__(self, wall, lag, aborted=None):
            self.wall_s, self.loop_lag_ms, self.aborted = wall, {"max": lag}, aborted

    info = PointInfo.from_results([R(1.0, 2.0), R(2.0, 1.0, "server died")])
    assert (info.wall_s, info.loop_lag_ms_max, info.status, info.failure) == (3.0, 2.0, "failed", "server died")
    assert PointInfo.from_results([R(1.0, 2.0, "interrupted")]).failure == "interrupted"


def test_fold_rounds_is_the_one_fold_of_a_points_rounds():
    # out of order, as a run folder's files may list them; the worst status wins with its failure
    rounds = [(1, {"status": "failed", "failure": "died", "wall_s": 2.0, "loop_lag_ms_max": 9.0}),
              (0, {"status": "ok", "failure": None, "wall_s": 1.0, "loop_lag_ms_max": 3.0, "n_errors": 0}),
              (2, {"status": "partial", "failure": None, "wall_s": None, "loop_lag_ms_max": None})]
    folded = fold_rounds(rounds)
    assert folded["repeats"] == [0, 1, 2] and folded["wall_s"] == 3.0 and folded["loop_lag_ms_max"] == 9.0
    assert (folded["status"], folded["failure"], folded["n_errors"]) == ("failed", "died", 0)
    info = PointInfo.from_point(folded)
    assert (info.wall_s, info.loop_lag_ms_max, info.status, info.failure) == (3.0, 9.0, "failed", "died")
    # an interrupted round is reported failed; an old folder's lag dict is read; ok derives from records
    assert PointInfo.from_point({"status": "interrupted", "failure": ""}).failure == "interrupted"
    assert PointInfo.from_point({"status": "interrupted"}).status == "failed"
    assert PointInfo.from_point({"status": "ok", "loop_lag_ms": {"max": 4.0}}).loop_lag_ms_max == 4.0
    assert PointInfo.from_point({"status": "ok"}).status is None


def test_acceptance_lengths_histogram_and_positions():
    r1 = mk(idx=0, chunks=[(1.1, 1), (1.2, 3), (1.3, 3)], spec=spec(4, 8, [0, 0, 4, 0]), category="coding")
    r2 = mk(idx=1, chunks=[(1.1, 1), (1.2, 1)], spec=spec(1, 0, [1, 0, 0, 0]), category="math")
    prom = {("sd", 1, ""): SpecCounters(drafts=5, draft_tokens=15, accepted=8, per_position=[4, 4, 0])}
    for r in (r1, r2):
        r.arm = "sd"
    row = one_row([r1, r2], prom=prom,
                  arm_info={"sd": {"speculative": True, "method": "eagle3", "num_speculative_tokens": 3}})
    assert row["al_tokens"] == pytest.approx(2.6)  # 1 + 8 / 5
    assert row["al_requests"] == pytest.approx(2.0)  # mean(3, 1)
    assert row["al_prometheus"] == pytest.approx(2.6) and row["al_agree"] is True
    assert row["draft_acceptance_rate"] == pytest.approx(8 / 15)
    assert row["acceptance_histogram"] == [1, 0, 4, 0]
    assert row["per_position_joint"] == pytest.approx([0.8, 0.8, 0.0])
    assert row["per_position_conditional"] == pytest.approx([0.8, 1.0, 0.0])
    assert row["speculative"] is True and row["method"] == "eagle3"
    prom[("sd", 1, "")] = SpecCounters(drafts=5, draft_tokens=15, accepted=9, per_position=[4, 4, 1])
    assert one_row([r1, r2], prom=prom)["al_agree"] is False  # 2.8 vs 2.6
    cats = {c["category"]: c for c in category_rows([r1, r2])}
    assert cats["coding"]["al_tokens"] == pytest.approx(3.0) and cats["math"]["al_tokens"] == pytest.approx(1.0)
    assert cats["coding"]["n_ok"] == 1


def test_breakdowns_do_not_depend_on_the_order_records_come_in():
    # A gathered Slurm run concatenates its jobs' records in the order the jobs ended:
    # the spec arm's may come first. The rows follow the scenario's arm order regardless.
    recs = [mk(arm=a, idx=i, chunks=[(1.1, 1), (1.1 + 10 / t, 10)], conc=c, category=cat)
            for a, t in (("base", 10.0), ("sd", 20.0)) for c in (4, 1) for i, cat in enumerate(("math", "coding"))]
    for fn in (category_rows, prompt_rows):
        forward, backward = fn(recs, "base", ["base", "sd"]), fn(recs[::-1], "base", ["base", "sd"])
        assert repr(forward) == repr(backward)  # repr: the rows hold NaNs, and nan != nan
        keys = [(r["arm"], r["concurrency"]) if isinstance(r, dict) else (r.arm, r.concurrency) for r in forward]
        assert keys[::2] == [("base", 1), ("base", 4), ("sd", 1), ("sd", 4)]
        assert repr(fn(recs[::-1], "base")) == repr(forward)  # no order given: the baseline first
        first = fn(recs, "base", ["sd", "base"])[0]
        assert (first["arm"] if isinstance(first, dict) else first.arm) == "sd"
    assert [r["category"] for r in category_rows(recs[::-1], "base")][:2] == ["coding", "math"]


def test_category_and_prompt_rows_are_one_builder_and_a_stopped_point_is_at_its_look_level():
    recs = [*_tps_records("base", [10, 20, 30, 15, 25, 12]), *_tps_records("sd", [20, 30, 60, 33, 41, 20])]
    by_cat = category_rows(recs, "base")
    (sd,) = [r for r in by_cat if r["arm"] == "sd"]
    # one category: its row holds what the prompt rows hold, summed over prompts
    by_prompt = [r for r in prompt_rows(recs, "base") if r.arm == "sd"]
    assert sd["n_ok"] == sum(r.n_ok for r in by_prompt) == 6
    assert sd["per_user_tps_mean"] == pytest.approx(np.mean([r.per_user_tps for r in by_prompt]))
    assert [r.speedup for r in by_prompt] == pytest.approx([2.0, 1.5, 2.0, 2.2, 1.64, 20 / 12])
    # a point the run stopped after several looks: its category interval is taken at the look
    # level, as its row's is, so it is wider than the 95% one from the same requests
    (looked,) = [r for r in category_rows(recs, "base", levels={("sd", 1, ""): 0.99}) if r["arm"] == "sd"]
    assert looked["speedup_mean"] == sd["speedup_mean"]
    assert looked["speedup_ci_low"] < sd["speedup_ci_low"] < sd["speedup_ci_high"] < looked["speedup_ci_high"]


def test_a_rows_workload_is_stored_never_read_from_its_label():
    from speedbench.records import PointKey
    recs = [mk(arm="a", idx=i, chunks=[(1.1, 1), (1.5, 5)], conc=8, variant="code@2rps") for i in range(2)]
    info = PointInfo(request_rate=2.0)
    (row,) = summarize(recs, None, None, {"a": {}}, {PointKey.at_rate("a", 8, "code", 2.0): info})
    assert (row["variant"], row["workload"]) == ("code@2rps", "code")
    # a rate point whose key holds only the label (a folder from before the workload was stored)
    (row,) = summarize(recs, None, None, {"a": {}}, {PointKey("a", 8, "code@2rps"): info})
    assert row["workload"] is None
    (row,) = summarize([mk(arm="a", chunks=[(1.1, 1), (1.5, 5)], variant="chat")], None, None, {"a": {}})
    assert row["workload"] == "chat"  # a closed-loop point's variant is its workload


def test_positions_from_histogram_when_no_counters():
    joint, cond = per_position_rates(None, [2, 1, 1])  # 4 steps; >=1 accepted: 2, >=2: 1
    assert joint == pytest.approx([0.5, 0.25]) and cond == pytest.approx([0.5, 0.5])
    assert per_position_rates(None, []) == ([], [])


def test_no_spec_arm_has_nan_acceptance():
    row = one_row([mk(chunks=[(1.1, 1), (1.2, 1)])])
    assert math.isnan(row["al_tokens"]) and math.isnan(row["al_prometheus"]) and row["al_agree"] is None
    assert row["acceptance_histogram"] == [] and row["per_position_joint"] == []


def _tps_records(arm, tps_list, first_index=0):
    # 11 tokens, first at 1.1 s, last after 10 / tps seconds
    return [mk(arm=arm, idx=first_index + i, chunks=[(1.1, 1), (1.1 + 10 / t, 10)]) for i, t in enumerate(tps_list)]


def test_speedup_mean_median_and_paired_ci():
    base = _tps_records("base", [10, 20, 30])
    sd = _tps_records("sd", [20, 30, 60])
    rows = summarize(base + sd, None, "base", {"base": {}, "sd": {"speculative": True}})
    b, s = rows
    assert math.isnan(b["speedup_mean"]) and b["speedup_pairs"] == 0
    assert s["speedup_mean"] == pytest.approx((110 / 3) / 20)
    assert s["speedup_median"] == pytest.approx(1.5)
    assert s["speedup_pairs"] == 3
    assert s["speedup_ci_low"] <= s["speedup_mean"] <= s["speedup_ci_high"]
    again = summarize(base + sd, None, "base", {"base": {}, "sd": {}})[1]
    assert (again["speedup_ci_low"], again["speedup_ci_high"]) == (s["speedup_ci_low"], s["speedup_ci_high"])


def test_unpaired_when_prompts_do_not_match():
    base = _tps_records("base", [10, 20, 30])
    sd = _tps_records("sd", [20, 30, 60], first_index=100)
    s = summarize(base + sd, None, "base", {})[1]
    assert s["speedup_pairs"] == 0 and s["speedup_ci_low"] < s["speedup_ci_high"]


def test_pairing_removes_prompt_difficulty_from_the_ci():
    base = np.array([10.0, 100.0, 1000.0, 50.0, 5.0])
    paired = paired_ratio_ci(2 * base, base)
    assert paired == pytest.approx((2.0, 2.0))  # every pair is exactly 2x
    lo, hi = unpaired_ratio_ci(2 * base, base)
    assert lo < 1.5 and hi > 3  # the same data unpaired is very uncertain
    assert math.isnan(paired_ratio_ci([1.0], [2.0])[0])
    assert paired_ratio_ci([2, 4, nan, 6], [1, 2, 3, nan]) == pytest.approx((2.0, 2.0))  # NaN pairs dropped
    med = paired_ratio_ci(2 * base, base, statistic="median")
    assert med == pytest.approx((2.0, 2.0))


def test_proxy_speedup():
    # baseline: 11 tokens over 1.0 s of decode -> 0.1 s per step
    base = mk(arm="base", idx=0, chunks=[(1.0, 1), (2.0, 10)])
    # spec: 4 steps over 0.6 s -> 0.15 s per step; AL = 1 + 8/4 = 3 -> S = 0.1 * 3 / 0.15 = 2
    sd = mk(arm="sd", idx=0, chunks=[(1.0, 1), (1.15, 3), (1.3, 3), (1.45, 2), (1.6, 3)], spec=spec(4, 8))
    s = summarize([base, sd], None, "base", {})[1]
    assert s["proxy_speedup"] == pytest.approx(2.0)
    assert s["al_tokens"] == pytest.approx(3.0)
    # a baseline burst (every token in one read: a window of 0 s) is delivery, not
    # decoding: it leaves the proxy as it was, and an all-burst baseline gives none, not 0
    burst = mk(arm="base", idx=1, chunks=[(2.0, 11)])
    sd1 = mk(arm="sd", idx=1, chunks=[(1.0, 1), (1.15, 3), (1.3, 3), (1.45, 2), (1.6, 3)], spec=spec(4, 8))
    assert summarize([base, burst, sd, sd1], None, "base", {})[1]["proxy_speedup"] == pytest.approx(2.0)
    assert math.isnan(summarize([burst, sd1], None, "base", {})[1]["proxy_speedup"])


def test_repeats_and_turns_pair_separately():
    base = [mk(arm="base", idx=0, turn=t, repeat=r, chunks=[(1.1, 1), (1.2, 10)]) for t in (0, 1) for r in (0, 1)]
    sd = [mk(arm="sd", idx=0, turn=t, repeat=r, chunks=[(1.1, 1), (1.15, 10)]) for t in (0, 1) for r in (0, 1)]
    s = summarize(base + sd, None, "base", {})[1]
    assert s["speedup_pairs"] == 4 and s["speedup_mean"] == pytest.approx(2.0)


def test_empty_input():
    assert summarize([], None, None, {}) == [] and category_rows([]) == []


def test_speedup_point_estimate_and_ci_use_the_same_requests():
    # the speculative arm lost its slowest-decoding prompt (index 3) to a timeout: the
    # headline must describe the three pairs its CI describes
    base = _tps_records("base", [10, 20, 30, 5])
    sd = _tps_records("sd", [20, 40, 60, 10])
    sd[3].error = "timeout"
    s = summarize(base + sd, None, "base", {"base": {}, "sd": {"speculative": True}})[1]
    assert s["speedup_pairs"] == 3
    assert s["speedup_mean"] == pytest.approx(2.0)  # (20+40+60)/(10+20+30)
    assert s["speedup_ci_low"] <= s["speedup_mean"] <= s["speedup_ci_high"]
    assert s["speedup_mean_all"] == pytest.approx(40 / 16.25)  # all ok requests of each arm
    assert any("different prompts" in w for w in s["warnings"])
    full = summarize(base + _tps_records("sd", [20, 40, 60, 10]), None, "base", {})[1]
    assert math.isnan(full["speedup_mean_all"]) and not full["warnings"]


def test_overcount_share_flags_tokens_counted_but_never_emitted():
    # 1 + steps + accepted = tokens vLLM's counters imply; request 1 was cut inside its
    # last step's accepted drafts (2 tokens short), request 2 is 5 short (> k = 3)
    recs = [
        mk(idx=0, chunks=[(1.0, 1), (1.1, 4), (1.2, 4)], out=9, spec=spec(2, 6)),
        mk(idx=1, chunks=[(1.0, 1), (1.1, 4), (1.2, 2)], out=7, spec=spec(2, 6)),
        mk(idx=2, chunks=[(1.0, 1), (1.1, 3)], out=4, spec=spec(2, 6)),
    ]
    row = one_row(recs, arm_info={"a": {"speculative": True, "num_speculative_tokens": 3}})
    assert row["spec_overcount_share"] == pytest.approx(2 / 3)
    assert row["spec_overcount_gt_k_share"] == pytest.approx(1 / 3)
    # n-gram steps that drafted nothing deliver a token without being a spec step: more
    # tokens delivered than the counters imply is no overcount (seen on real vLLM)
    ngram = one_row([mk(idx=0, chunks=[(1.0, 1), (1.1, 1), (1.2, 4)], out=6, spec=spec(1, 3))],
                    arm_info={"a": {"speculative": True, "num_speculative_tokens": 3}})
    assert ngram["spec_overcount_share"] == 0 and ngram["spec_overcount_gt_k_share"] == 0
    assert not any("accepted" in w for w in ngram["warnings"])
    assert any("truncation" in w for w in row["warnings"])


def test_malformed_spec_requests_are_counted_not_failed():
    good = mk(idx=0, chunks=[(1.0, 1), (1.1, 4)], out=5, spec=spec(1, 3))
    bad = mk(idx=1, chunks=[(1.0, 1), (1.1, 4)], out=5)
    bad.spec_error = "TypeError: int() argument must be ... not 'NoneType'"
    row = one_row([good, bad], arm_info={"a": {"speculative": True, "num_speculative_tokens": 3}})
    assert row["n_ok"] == 2 and row["n_spec_malformed"] == 1 and row["al_tokens"] == pytest.approx(4.0)
    assert any("malformed" in w for w in row["warnings"])


def test_category_rows_carry_both_al_definitions():
    # request-weighted vs step-weighted: one long request with AL 4, one short with AL 1
    recs = [mk(idx=0, chunks=[(1.0, 1), (1.1, 4)], out=41, spec=spec(10, 30), category="coding"),
            mk(idx=1, chunks=[(1.0, 1), (1.1, 1)], out=3, spec=spec(2, 0), category="coding")]
    (row,) = category_rows(recs)
    assert row["al_requests"] == pytest.approx((4.0 + 1.0) / 2)
    assert row["al_tokens"] == pytest.approx(1 + 30 / 12)


def test_category_rows_per_user_tps_and_paired_speedup():
    # baseline: 2 coding prompts at 10 and 20 tok/s, 2 math prompts at 10; the arm: 2x on coding, 1x on math
    def r(arm, idx, tps, cat, sp=None):
        return mk(arm=arm, idx=idx, chunks=[(1.0, 1), (1.0 + 10 / tps, 10)], out=11, category=cat, spec=sp)

    recs = [r("base", 0, 10, "coding"), r("base", 1, 20, "coding"), r("base", 2, 10, "math"), r("base", 3, 10, "math"),
            r("sd", 0, 20, "coding", spec(5, 5)), r("sd", 1, 40, "coding", spec(5, 5)),
            r("sd", 2, 10, "math", spec(10, 0)), r("sd", 3, 10, "math", spec(10, 0))]
    rows = {(c["arm"], c["category"]): c for c in category_rows(recs, "base")}
    assert rows[("base", "coding")]["per_user_tps_mean"] == pytest.approx(15)
    assert math.isnan(rows[("base", "coding")]["speedup_mean"])
    coding, math_ = rows[("sd", "coding")], rows[("sd", "math")]
    assert coding["speedup_mean"] == pytest.approx(2.0) and coding["speedup_pairs"] == 2
    assert coding["speedup_ci_low"] == pytest.approx(2.0) and coding["speedup_ci_high"] == pytest.approx(2.0)
    assert math_["speedup_mean"] == pytest.approx(1.0) and math_["al_tokens"] == pytest.approx(1.0)
    assert coding["al_tokens"] == pytest.approx(2.0) and coding["al_requests"] == pytest.approx(2.0)
    assert list(coding) == list(CATEGORY_KEYS)


def test_prompt_rows_trace_speedup_to_questions():
    def r(arm, idx, tps, repeat=0, sp=None):
        return mk(arm=arm, idx=idx, chunks=[(1.0, 1), (1.0 + 10 / tps, 10)], out=11, repeat=repeat, spec=sp,
                  category="qa")

    recs = [r("base", 0, 10), r("base", 0, 30, repeat=1), r("base", 1, 10),
            r("sd", 0, 40, sp=spec(4, 6)), r("sd", 0, 40, repeat=1, sp=spec(5, 5)), r("sd", 1, 5, sp=spec(10, 0))]
    rows = {(p.arm, p.prompt_id): p for p in prompt_rows(recs, "base")}
    assert rows[("sd", "p0")].baseline_per_user_tps == pytest.approx(20) and rows[("sd", "p0")].n_ok == 2
    assert rows[("sd", "p0")].speedup == pytest.approx(2.0)
    assert rows[("sd", "p0")].al_requests == pytest.approx((2.5 + 2.0) / 2)
    assert rows[("sd", "p1")].speedup == pytest.approx(0.5)  # the prompt that regressed
    assert math.isnan(rows[("base", "p1")].speedup) and rows[("base", "p1")].category == "qa"


def test_a_window_compressed_below_half_the_engines_is_a_burst():
    """The engine took 300 ms from first to last token; the client saw 4 tokens over
    150 ms (half: delivery kept pace within reason) or over 20 ms (the first token alone,
    then the rest together: delivery, not decoding)."""
    from dataclasses import replace

    from speedbench.records import EngineTiming

    eng = EngineTiming(generation_ms=300.0)
    paced = replace(mk(idx=0, chunks=[(1.1, 1), (1.2, 2), (1.25, 1)]), engine=eng)
    squeezed = replace(mk(idx=1, chunks=[(1.1, 1), (1.12, 3)]), engine=eng)
    no_engine = mk(idx=2, chunks=[(1.1, 1), (1.12, 3)])
    t = request_table([paced, squeezed, no_engine])
    assert t.burst.tolist() == [False, True, False]
    assert t.per_user_tps[0] == pytest.approx(3 / 0.15) and math.isnan(t.per_user_tps[1])
    assert t.per_user_tps[2] == pytest.approx(3 / 0.02)  # without the engine's clock nothing says otherwise
    assert t.engine_tps.tolist()[:2] == pytest.approx([10.0, 10.0])
