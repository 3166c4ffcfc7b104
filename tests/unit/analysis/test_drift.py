"""Drift analysis and its report section: synthetic rows with known answers."""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from speedbench.workload.padding import context_buckets
from speedbench.analysis.drift import (
    conditional_of,
    context_curves,
    depth_curves,
    optimal_k,
    series_of,
    speculative_config_for,
)
from speedbench.analysis.separation import eagle_pairs, separation
from speedbench.engine.vllm import VllmEngine
from speedbench.metrics.registry import SummaryRow
from speedbench.engine.vllm.command import launch_spec
from speedbench.report.drift import (
    drift_section_html,
    drift_section_md,
    drift_table,
    plot_al_vs_context,
    plot_al_vs_k,
    plot_conditional,
    plot_separation,
    plot_tps_vs_k,
)
from speedbench.scenario import load_scenario, resolved_dict

ROOT = Path(__file__).resolve().parents[3]
NAN = math.nan


@dataclass
class FakeRun:
    """Stand-in for speedbench.results.load_run(): the duck type drift_section_* reads."""

    summary: dict = field(default_factory=dict)
    scenario: dict | None = None
    engine: VllmEngine = field(default_factory=VllmEngine)

    @property
    def rows(self) -> list:
        return list(self.summary.get("rows") or [])


ROW_DEFAULTS = {"template": None, "speedup": NAN, "lo": NAN, "hi": NAN, "tps": NAN, "proxy": NAN, "al": NAN,
                "al_prom": NAN, "cond": (), "joint": (), "eagle": "", "method": "draft_model", "status": "ok"}


def row(arm, k=None, c=1, variant="", **given):
    """A summary row; ``given``: any of ROW_DEFAULTS."""
    assert set(given) <= set(ROW_DEFAULTS), set(given) - set(ROW_DEFAULTS)
    o = {**ROW_DEFAULTS, **given}
    return SummaryRow.from_dict({
        "arm": arm, "template": o["template"] or arm, "concurrency": c, "variant": variant,
        "speculative": k is not None, "method": o["method"] if k is not None else "", "num_speculative_tokens": k,
        "eagle_version": o["eagle"], "status": o["status"], "failure": "", "per_user_tps_mean": o["tps"],
        "speedup_mean": o["speedup"], "speedup_ci_low": o["lo"], "speedup_ci_high": o["hi"],
        "proxy_speedup": o["proxy"], "al_tokens": o["al"], "al_prometheus": o["al_prom"],
        "per_position_conditional": list(o["cond"]), "per_position_joint": list(o["joint"]),
    })


def sd(k, c, speedup, lo, hi, proxy=NAN, variant=""):
    return row(f"self-draft-k{k}", k, c, variant, template="self-draft", speedup=speedup, lo=lo, hi=hi,
               tps=100 * speedup / c, proxy=proxy, al=k + 1.0, al_prom=k + 1.0, cond=[1.0] * k)


# c=1: k=3 has the highest mean, but its CI overlaps k=2's, whose lower bound is higher -> k=2.
# c=4: k=1 is clearly best -> k=1, no tie.
# c=16: k=2 has the highest mean; k=1's CI overlaps with an equal lower bound -> smaller k=1.
SWEEP = [
    row("baseline", c=1, tps=100.0), row("baseline", c=4, tps=25.0), row("baseline", c=16, tps=6.25),
    sd(1, 1, 1.20, 1.10, 1.25, proxy=1.3), sd(2, 1, 1.50, 1.45, 1.55, proxy=1.5),
    sd(3, 1, 1.60, 1.30, 1.90, proxy=1.7), sd(5, 1, 1.10, 1.00, 1.20, proxy=1.4),
    sd(1, 4, 1.30, 1.20, 1.40, proxy=1.25), sd(2, 4, 1.10, 1.00, 1.15, proxy=1.2),
    sd(3, 4, 1.00, 0.90, 1.10, proxy=1.1), sd(5, 4, 0.80, 0.70, 0.90, proxy=0.9),
    sd(1, 16, 1.10, 1.00, 1.20), sd(2, 16, 1.15, 1.00, 1.30),
]
ARMS_SPEC = {f"self-draft-k{k}": {"method": "draft_model", "model": ".fixtures/tiny/target",
                                   "num_speculative_tokens": k}
             for k in (1, 2, 3, 5)}


# ---- sweep expansion ------------------------------------------------------------------------


def test_cpu_drift_expands_to_one_arm_per_k_with_that_k_in_argv():
    sc = load_scenario(ROOT / "scenarios/cpu_drift.yaml")
    names = [a.name for a in sc.arms]
    assert names == ["baseline", *[f"eagle3-k{k}" for k in (1, 3, 5)], *[f"eagle3.1-k{k}" for k in (1, 3, 5)],
                     *[f"self-draft-k{k}" for k in (1, 3)]]
    for arm in sc.arms[1:]:
        argv = launch_spec(sc, arm).argv
        cfg = json.loads(argv[argv.index("--speculative-config") + 1])
        assert cfg["num_speculative_tokens"] == arm.sweep_values["k"] == int(arm.name.rsplit("-k", 1)[1])
        assert arm.template == arm.name.rsplit("-k", 1)[0]
        if arm.template == "self-draft":
            assert cfg["model"] == ".fixtures/tiny/target"
        else:  # the two trained drafts, same method: only the checkpoint differs
            assert cfg["method"] == "eagle3" and cfg["model"] == f".fixtures/tiny/{arm.template}"
    assert "--speculative-config" not in launch_spec(sc, sc.arms[0]).argv
    assert context_buckets(resolved_dict(sc)) == {"ctx128": 128, "ctx512": 512}


def test_kimi_drift_crosses_drafts_and_k():
    sc = load_scenario(ROOT / "scenarios/kimi_drift.yaml")
    spec = [a for a in sc.arms if a.is_speculative]
    assert len(spec) == 2 * 5
    models = {a.speculative_config.model for a in spec}
    assert models == {"lightseekorg/kimi-k2.6-eagle3-mla", "lightseekorg/kimi-k2.6-eagle3.1-mla"}
    for a in spec:
        argv = launch_spec(sc, a).argv
        cfg = json.loads(argv[argv.index("--speculative-config") + 1])
        assert cfg["num_speculative_tokens"] == a.sweep_values["k"] and cfg["model"] == a.sweep_values["draft"]
        # the series is stored at expansion and read from the row; a row of a run folder from
        # before it was stored gets the same from the arm name
        assert a.series == "eagle-" + a.sweep_values["draft"].split("/")[-1]
        assert series_of(SummaryRow(arm=a.name, num_speculative_tokens=a.sweep_values["k"], series=a.series)) \
            == series_of(SummaryRow(arm=a.name, num_speculative_tokens=a.sweep_values["k"])) == a.series
    assert context_buckets(resolved_dict(sc)) == {f"ctx{n}k": n * 1024 for n in (1, 2, 8, 16, 32)}


def test_series_is_read_from_the_row_not_the_name():
    sc = load_scenario(ROOT / "scenarios/cpu_drift.yaml")
    assert {a.name: a.series for a in sc.arms}["eagle3.1-k3"] == "eagle3.1"
    assert {a.name: a.series for a in sc.arms}["baseline"] == "baseline"
    # hand-named arms are their own series unless they share a `series:`
    assert series_of(SummaryRow(arm="x-k3", num_speculative_tokens=3, series="x-k3")) == "x-k3"
    assert series_of(SummaryRow(arm="a", num_speculative_tokens=3, series="mine")) == "mine"
    # an arm a run saved before the series was stored (expanded: it has sweep values) keeps
    # none, and its rows fall back to the name
    from speedbench.scenario import ArmSpec, expand_arms
    (old,) = expand_arms([ArmSpec(name="e-k3", template="e", sweep_values={"k": 3})])
    assert old.series is None
    assert series_of(SummaryRow(arm="e-k3", num_speculative_tokens=3, series="")) == "e"


# ---- optimal k -----------------------------------------------------------------------------


def test_optimal_k_known_answers_and_tie_rule():
    by_c = {o.concurrency: o for o in optimal_k(SWEEP, arms_spec=ARMS_SPEC)}
    assert set(by_c) == {1, 4, 16}
    o1, o4, o16 = by_c[1], by_c[4], by_c[16]
    assert (o1.argmax_k, o1.best_k, o1.contenders, o1.tie) == (3, 2, (2, 3), True)
    assert (o1.speedup, o1.ci_low, o1.ci_high) == (1.50, 1.45, 1.55) and o1.best_arm == "self-draft-k2"
    assert (o4.best_k, o4.tie) == (1, False)
    assert (o16.argmax_k, o16.best_k, o16.contenders) == (2, 1, (1, 2))  # equal lower bounds -> smaller k
    assert (o1.proxy_best_k, o1.proxy_speedup) == (3, 1.7) and o4.proxy_best_k == 1 and o16.proxy_best_k is None
    assert all(o.series == "self-draft" and o.template == "self-draft" for o in by_c.values())


def test_speculative_config_flag_parses_as_json():
    o = next(o for o in optimal_k(SWEEP, arms_spec=ARMS_SPEC) if o.concurrency == 1)
    assert o.speculative_config == {"method": "draft_model", "model": ".fixtures/tiny/target",
                                    "num_speculative_tokens": 2}
    # The report pastes what vLLM's engine makes of it: the flag and compact JSON, quoted for a shell.
    vllm = VllmEngine()
    flag, value = shlex.split(shlex.join(vllm.speculative_args(o.speculative_config)))
    assert flag == "--speculative-config" and json.loads(value) == o.speculative_config
    # Without the resolved scenario the row's method still gives a usable config; quotes survive.
    odd = speculative_config_for(7, "eagle3", {"method": "eagle3", "model": "o'brien/draft", "extra": 1})
    assert json.loads(shlex.split(shlex.join(vllm.speculative_args(odd)))[1]) == {
        "method": "eagle3", "model": "o'brien/draft", "num_speculative_tokens": 7, "extra": 1}
    assert speculative_config_for(3, "ngram") == {"method": "ngram", "num_speculative_tokens": 3}


def test_optimal_k_skips_failed_arms_and_single_k_series():
    rows = [replace(r, status="failed") if r.arm == "self-draft-k2" else r for r in SWEEP]
    rows.append(row("eagle3", 3, 1, speedup=2.0, lo=1.9, hi=2.1, eagle="3"))
    o1 = next(o for o in optimal_k(rows) if o.concurrency == 1)
    assert o1.best_k == 3 and [p.k for p in o1.points] == [1, 3, 5]
    assert {o.series for o in optimal_k(rows)} == {"self-draft"}
    assert optimal_k(rows, template="nothing") == []


def test_optimal_k_without_baseline_uses_per_user_tps():
    rows = [row(f"x-k{k}", k, 1, template="x", tps=t) for k, t in ((1, 50.0), (2, 70.0), (4, 60.0))]
    (o,) = optimal_k(rows)
    assert (o.best_k, o.tie, o.per_user_tps) == (2, False, 70.0)


# ---- curves and separation ------------------------------------------------------------------


def test_depth_curves_and_conditional_from_joint():
    (c1, c4, c16) = depth_curves(SWEEP)
    assert (c1.ks, c1.al, c4.concurrency) == ((1, 2, 3, 5), (2.0, 3.0, 4.0, 6.0), 4)
    assert c1.conditional[1] == (1.0, 1.0)
    # joint = accepted_at_pos / drafts; conditional = accepted_at_pos[i] / accepted_at_pos[i-1]
    assert conditional_of(row("a", 3, joint=[0.8, 0.4, 0.1])) == pytest.approx([0.8, 0.5, 0.25])


def test_context_curves_and_buckets():
    rows = [row("e3", 3, 1, v, al=a, eagle="3", method="eagle3")
            for v, a in (("ctx8k", 2.2), ("ctx1k", 3.0), ("chat", 9.0))]
    rows.append(row("baseline", None, 1, "ctx1k", tps=10.0))
    (cur,) = context_curves(rows, {"ctx1k": 1024, "ctx8k": 8192})
    assert (cur.arm, cur.variants, cur.tokens, cur.al) == ("e3", ("ctx1k", "ctx8k"), (1024, 8192), (3.0, 2.2))
    # a length is stored (input_tokens) or the dataset's own (a throughput config), never
    # read from a name
    sc = {"workload": {"variants": [{"name": "a", "input_tokens": 300}, {"name": "b", "config": "throughput_2k"},
                                    {"name": "ctx4k"}, {"name": "ctx64"}, {"name": "plain"}]}}
    assert context_buckets(sc) == {"a": 300, "b": 2048}


def eagle_rows(als3, als31, *, c=1, variant="", prom31=None):
    rows = []
    for ks_als, name, ver in ((als3, "eagle-e3", "3"), (als31, "eagle-e31", "3.1")):
        for k, al in ks_als.items():
            prom = (prom31 or {}).get(k, al) if ver == "3.1" else al
            rows.append(row(f"{name}-k{k}", k, c, variant, template="eagle", al=al, al_prom=prom, eagle=ver,
                            method="eagle3"))
    return rows


def test_separation_depth_first_point_beyond_noise():
    rows = eagle_rows({1: 2.0, 2: 2.6, 3: 3.0, 5: 3.2}, {1: 2.01, 2: 2.62, 3: 3.2, 5: 3.6})
    assert eagle_pairs(rows) == [("eagle-e3", "eagle-e31")]
    s = separation(rows, "eagle-e3", "eagle-e31")
    assert (s.axis, s.first, s.leader) == ("depth", 3, "eagle-e31")
    assert [p.separated for p in s.points] == [False, False, True, True]
    # The 3.1 rows' own AL measurements disagree by 0.4 at k=3: a 0.2 gap there is noise.
    noisy = separation(eagle_rows({1: 2.0, 2: 2.6, 3: 3.0, 5: 3.2}, {1: 2.01, 2: 2.62, 3: 3.2, 5: 3.6},
                                  prom31={3: 3.6}), "eagle-e3", "eagle-e31")
    assert noisy.first == 5
    same = separation(eagle_rows({1: 2.0, 3: 3.0}, {1: 2.0, 3: 3.01}), "eagle-e3", "eagle-e31")
    assert same.first is None and same.leader is None


def test_separation_context():
    rows = []
    for v, (a3, a31) in {"ctx1k": (3.0, 3.02), "ctx8k": (2.6, 2.9), "ctx32k": (1.8, 2.7)}.items():
        rows += eagle_rows({3: a3}, {3: a31}, variant=v)
    s = separation(rows, "eagle-e3", "eagle-e31", "context",
                   variant_tokens={"ctx1k": 1024, "ctx8k": 8192, "ctx32k": 32768})
    assert ([p.x for p in s.points], s.first, s.fixed) == ([1024, 8192, 32768], 8192, "k=3")


# ---- plots and sections ----------------------------------------------------------------------


def test_plots_render_svg():
    rows = eagle_rows({1: 2.0, 2: 2.6, 3: 3.0}, {1: 2.0, 2: 2.7, 3: 3.3})
    svgs = [
        plot_al_vs_k(depth_curves(SWEEP)), plot_conditional(depth_curves(SWEEP)),
        plot_tps_vs_k(optimal_k(SWEEP)), plot_separation([separation(rows, "eagle-e3", "eagle-e31")]),
        plot_al_vs_context(context_curves([row("e", 3, 1, v, al=a) for v, a in (("s", 3.0), ("l", 2.0))],
                                          {"s": 128, "l": 512})),
    ]
    for svg in svgs:
        assert svg.startswith("<svg") and "<path" in svg and svg.rstrip().endswith("</svg>")
        assert "<text" not in svg  # text drawn as paths: nothing from a run is markup


EVIL = "<script>alert(1)</script>"


def evil_run() -> FakeRun:
    rows = [replace(r, arm=r.arm.replace("self-draft", EVIL), template=EVIL) if r.arm != "baseline" else r
            for r in SWEEP]
    rows += eagle_rows({1: 2.0, 2: 2.6, 3: 3.0}, {1: 2.0, 2: 2.7, 3: 3.3})
    scenario = {"arms": [{"name": "baseline"}], "workload": {"variants": []}}
    return FakeRun({"rows": rows, "baseline": "baseline"}, scenario)


def test_sections_render_and_escape():
    run = evil_run()
    md, page = drift_section_md(run), drift_section_html(run)
    assert EVIL not in page and "<script" not in page and "&lt;script&gt;" in page
    # report.md is plain Markdown: "<" backslash-escaped, so no tag opens, and no entities
    assert re.search(r"(?<!\\)<", md) is None and "\\<script>" in md and "&lt;" not in md
    for text in (md, page):
        assert "Optimal k per concurrency" in text and "EAGLE 3 vs EAGLE 3.1" in text
    assert "report.html" in md and "<svg" not in md
    assert page.count("<svg") >= 4 and page.startswith('<section class="drift">')
    # the markdown flag stays copy-pasteable: quotes are not turned into entities
    assert '`--speculative-config \'{"method":"draft_model","num_speculative_tokens":2}\'`' in md
    assert "&quot;num_speculative_tokens&quot;:2" in page


def test_drift_table_rows():
    table = drift_table(SWEEP, VllmEngine(), ARMS_SPEC)
    assert [t.best_k for t in table] == ["2 (tie with k=3; by CI)", "1", "1 (tie with k=2; by CI)"]
    assert table[0].speedup == "1.50× [1.45, 1.55]" and table[0].proxy_best_k == "3"
    assert table[2].proxy_best_k == "n/a"


def test_no_sweep_no_context_gives_empty_sections():
    rows = [row("baseline", c=1, tps=100.0), row("eagle3", 3, 1, speedup=2.0, lo=1.9, hi=2.1, al=3.0, eagle="3")]
    scenario = {"arms": [{"name": "baseline"}, {"name": "eagle3"}], "workload": {"variants": [{"name": "think"}]}}
    for run in (FakeRun({"rows": rows}, scenario), FakeRun({"rows": []}, None), FakeRun({}, {})):
        assert drift_section_md(run) == "" and drift_section_html(run) == ""


def test_context_only_run_renders():
    rows = [row("e3", 3, 1, v, al=a, eagle="3", method="eagle3") for v, a in (("ctx128", 3.0), ("ctx512", 2.5))]
    run = FakeRun({"rows": rows}, {"workload": {"variants": [{"name": "ctx128", "input_tokens": 128},
                                                              {"name": "ctx512", "input_tokens": 512}]}})
    md = drift_section_md(run)
    assert "Acceptance length vs context length" in md and "| e3 | 1 | 3.00 | 2.50 |" in md
    assert "Optimal k" not in md and "<svg" in drift_section_html(run)
