"""The nightly answer over histories generated from a real CPU run folder
(tests/helpers/histories.py): the detector's recall and false-regression rate, the
`speedbench changes` exit code and its provenance lines, the untrained-draft night, and
the dashboard's verdict block."""

from __future__ import annotations

import json
import re

import pytest
from tests.helpers.histories import Plant, load_nights, replay_flat, score_detector, write_history

from speedbench.cli import main
from speedbench.report import nightly
from speedbench.report.dashboard import build_dashboard


@pytest.fixture(scope="module")
def score(tmp_path_factory):
    return score_detector(tmp_path_factory.mktemp("score"), n_planted=8, n_flat=6, n_drift=2)


def test_recall_of_steps_of_3_sd_and_more(score):
    assert score.planted >= 40
    assert score.recall >= 0.9, score


def test_false_regressions_on_histories_with_no_change(score):
    assert score.series_nights >= 5000
    assert score.false_regressions_per_100 <= 1.0, score


def test_changes_exits_1_on_a_planted_regression_and_names_the_new_vllm(tmp_path, capsys):
    write_history(tmp_path / "bad", 30, [Plant("eagle3", 26, "speedup", -0.10, provenance={"vllm_version": "0.33.0"})])
    assert main(["changes", str(tmp_path / "bad")]) == 1
    out = capsys.readouterr().out
    assert re.search(r"REGRESSION: eagle3 speedup c=\d+: .* → .*from 2026-11-27", out), out
    assert "eagle3 vLLM: 0.32.0 → 0.33.0" in out
    assert main(["changes", str(tmp_path / "bad"), "--json", "-o", str(tmp_path / "v.json")]) == 1
    items = json.loads((tmp_path / "v.json").read_text())
    reg = [i for i in items if i["status"] == "regression" and i["metric"] == "speedup"]
    assert {i["arm"] for i in reg} == {"eagle3"} and all(i["relative"] < -0.05 for i in reg)
    assert main(["changes", str(tmp_path / "bad"), "--since", "2026-11-29"]) == 1  # news before --since, still open


def test_changes_exits_0_with_no_change(tmp_path, capsys):
    write_history(tmp_path / "flat", 20, [], seed=2)
    assert main(["changes", str(tmp_path / "flat")]) == 0
    assert "0 regression" in capsys.readouterr().out
    assert main(["changes", str(tmp_path / "nope")]) == 2
    assert main(["changes", str(tmp_path / "flat"), "--since", "yesterday"]) == 2


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_untrained_draft_nights_are_a_regression_with_the_draft_hash_named(tmp_path, dtype):
    # from night 18 on, the eagle3.1 slot carries the real run's eagle3-untrained arm
    plant = Plant("eagle3.1", 18, swap_with="eagle3-untrained", size=0.0)
    ns = load_nights(write_history(tmp_path, 20, [plant], dtype=dtype))
    vs = {v.series.key: v for v in nightly.verdicts({"cpu_tiny": ns})}
    for point in ("c=1", "c=4", "c=16"):
        v = vs[("cpu_tiny", "eagle3.1", "speedup", point)]
        assert v.status == "regression" and v.began == ns[18].created
        assert "eagle3.1 draft config sha256: ca58ce99f04e → 3d5dacfe13c3" in v.what_changed
        assert "eagle3.1 draft: .fixtures/tiny/eagle3.1 → .fixtures/tiny/eagle-random" in v.what_changed
    assert vs[("cpu_tiny", "eagle3.1", "AL", "pooled")].status == "regression"
    assert vs[("cpu_tiny", "eagle3", "speedup", "c=4")].status == "no change"


def test_one_night_is_suspicious_and_few_nights_are_insufficient(tmp_path):
    ns = load_nights(write_history(tmp_path / "a", 20, [Plant("eagle3", 19, "speedup", -0.12)]))
    vs = {v.series.key: v for v in nightly.verdicts({"cpu_tiny": ns})}
    assert vs[("cpu_tiny", "eagle3", "speedup", "c=4")].status == "suspicious"
    ns = load_nights(write_history(tmp_path / "b", 4, []))
    assert {v.status for v in nightly.verdicts({"cpu_tiny": ns})} == {"insufficient data"}


def test_dashboard_opens_with_the_verdict_block(tmp_path):
    write_history(tmp_path / "results", 14, [Plant("eagle3", 11, "speedup", -0.12,
                                                    provenance={"vllm_version": "0.33.0"})])
    page = build_dashboard(tmp_path / "results", tmp_path / "site").index.read_text()
    verdict, latest = page.index('id="verdict"'), page.index("Latest runs")
    assert verdict < latest and page.index("<svg") > latest
    block = page[verdict:latest]
    n = int(re.search(r"<b>(\d+)</b> regression", block).group(1))
    assert 3 <= n <= 6  # eagle3 speedup at c=1, 4, 16 (and its per-user TPS, which moved with it)
    assert "eagle3 vLLM: 0.32.0 → 0.33.0" in block and "from 2026-11-12" in block
    links = re.findall(r'href="(runs/[^"]+)"', block)
    assert any("20261111" in h for h in links) and any("20261112" in h for h in links)  # before and after


def test_one_colour_per_checkpoint_on_every_chart(tmp_path):
    import datetime as dt

    from speedbench.report import plots
    from speedbench.report.dashboard import checkpoint_colors, scan

    write_history(tmp_path / "r", 6, [Plant("eagle3.1", 4, swap_with="eagle3-untrained", size=0.0)])
    colors = checkpoint_colors(scan(tmp_path / "r")[0])
    plain = [n for n in colors if not n.endswith(("(predicted)", "(outputs differ)"))]
    assert len(plain) == 6 and len({colors[n] for n in plain}) == 6  # the swapped slot is a sixth checkpoint
    assert all(colors[n + " (predicted)"] == colors[n] == colors[n + " (outputs differ)"] for n in plain)
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    one = {"a": [(t0, 1.0)], "b": [(t0, 2.0)]}
    mine = {"a": "#010203", "b": "#040506"}
    svg = plots.trend({"p": one}, "x", mine) + plots.position_curves({"a": ([0.5], [0.5])}, mine)
    assert svg.count("#010203") >= 2 and "#040506" in svg  # the page's colours, not each chart's own


def test_an_incremental_build_leaves_unchanged_runs_alone(tmp_path):
    import os

    folders = write_history(tmp_path / "r", 6, [])
    build_dashboard(tmp_path / "r", tmp_path / "site")
    copies = sorted((tmp_path / "site" / "runs").rglob("report.html"))
    assert len(copies) == 6
    for c in copies:
        os.utime(c, (1e10, 1e10))  # far in the future: a copy made after its source
    (folders[2] / "report.html").write_text("<!DOCTYPE html>\n<p>rewritten</p>\n")  # larger/smaller: stale
    build_dashboard(tmp_path / "r", tmp_path / "site")
    changed = [c for c in copies if c.stat().st_mtime != 1e10]
    assert [c.parent.name for c in changed] == [folders[2].name]
    assert "rewritten" in changed[0].read_text()


def test_leaderboard_of_the_latest_night(tmp_path):
    from tests.helpers.runfactory import make_run

    from speedbench.report.leaderboard import leaderboard
    from speedbench.results.loader import load_run

    run = load_run(make_run(tmp_path, n_prompts=8).path)
    card = leaderboard("cpu_tiny", run, "runs/x/report.html")
    assert "Checkpoints side by side · cpu_tiny" in card and 'href="runs/x/report.html"' in card
    assert card.count("★") >= 4  # the best speedup at each of 3 levels and the best AL (eagle3.1 here)
    assert re.search(r"★ 2\.\d\d× \[", card)  # eagle3.1's speedup at c=1 (about 2.03)
    assert "eagle3.1 − eagle3" in card and "from the stored intervals" in card  # as compare --arms
    assert "coding AL (requests)" in card and "math AL (steps)" in card
    synthetic = load_nights(write_history(tmp_path / "h", 1, []))[0].run  # no records: the rows' intervals serve
    assert "paired by prompt" not in leaderboard("cpu_tiny", synthetic, None)


def test_the_nightly_alert_replayed_night_by_night_on_histories_with_no_change(tmp_path):
    r = replay_flat(tmp_path, histories=3)
    assert r["nights"] == 75
    assert r["false_regressions"] <= 0.01 * r["series_nights"]
    assert r["nights_with_exit_1"] <= 0.1 * r["nights"], r  # measured: 5 of 300 nights (docs/dashboard.md)


def test_a_retrained_draft_at_the_same_path_is_named_by_its_weights_hash(tmp_path):
    # same path, same config.json: only the weights' hash tells the checkpoints apart
    ns = load_nights(write_history(tmp_path, 20, [
        Plant("eagle3.1", 0, size=0.0, provenance={"_arm_only": True, "draft": {"weights_sha256": "a" * 64}}),
        Plant("eagle3.1", 17, size=-0.12, provenance={"_arm_only": True, "draft": {"weights_sha256": "b" * 64}})]))
    vs = {v.series.key: v for v in nightly.verdicts({"cpu_tiny": ns})}
    v = vs[("cpu_tiny", "eagle3.1", "speedup", "c=4")]
    assert v.status == "regression" and v.began == ns[17].created
    assert f"eagle3.1 draft weights sha256: {'a' * 12} → {'b' * 12}" in v.what_changed
    assert not any("draft config sha256" in line for line in v.what_changed)


def test_weights_swapped_under_the_same_name_are_called_on_the_second_night_with_their_cause(tmp_path):
    # two nights only: the second loads other weights at the same path, and AL drops 10%
    weights = {"_arm_only": True, "draft": {"model": ".fixtures/tiny/eagle3.1", "weights_sha256": "a" * 64}}
    swapped = {"_arm_only": True, "draft": {"model": ".fixtures/tiny/eagle3.1", "weights_sha256": "b" * 64}}
    ns = load_nights(write_history(tmp_path, 2, [Plant("eagle3.1", 0, size=0.0, provenance=weights),
                                                 Plant("eagle3.1", 1, "al", -0.10, provenance=swapped)]))
    vs = {v.series.key: v for v in nightly.verdicts({"cpu_tiny": ns})}
    v = vs[("cpu_tiny", "eagle3.1", "AL", "pooled")]
    assert v.status == "suspicious" and v.began == ns[1].created
    assert v.what_changed == [f"eagle3.1 draft weights sha256: {'a' * 12} → {'b' * 12}"]
    assert "1 night before it, 5 needed to call more than suspicious" in nightly.describe(v)
    # the arm whose draft did not change has no known change point: two nights are too few
    assert vs[("cpu_tiny", "eagle3", "AL", "pooled")].status == "insufficient data"
