"""Checkpoints compared across nights (issue 48): `speedbench compare --checkpoints`, its
JSON, the reference by arm or draft path, insufficient nights, and the dashboard section."""

from __future__ import annotations

import json

import pytest
from tests.helpers.histories import Plant, load_nights, write_history

from speedbench.cli import main
from speedbench.report import checkpoints
from speedbench.report.dashboard import build_dashboard


def _compare(tmp_path, nights, plants, reference="eagle3.1", seed=0):
    ns = load_nights(write_history(tmp_path, nights, plants, seed=seed, report=False))
    return checkpoints.compare_scenario("cpu_tiny", [n.run for n in ns], reference)


def _eagle3(sc):
    (r,) = [r for r in sc.checkpoints if r.name.startswith("eagle3 ·")]
    return {c.figure: c for c in r.comparisons}, r


def test_a_checkpoint_5_percent_faster_is_better_at_every_concurrency(tmp_path):
    # the eagle3.1 slot carries eagle3 (same truth), and eagle3's speedup is 5% higher
    sc = _compare(tmp_path, 6, [Plant("eagle3.1", 0, swap_with="eagle3", size=0.0),
                                Plant("eagle3", 0, "speedup", 0.05)])
    comps, r = _eagle3(sc)
    assert sc.reference == "eagle3.1 · .fixtures/tiny/eagle3"
    for c in ("c=1", "c=4", "c=16"):
        k = comps[("speedup", c)]
        assert k.contrast.nights == 6 and k.contrast.low <= 1.05 <= k.contrast.high and k.call == "better"
    assert comps[("AL", "pooled")].call == "no difference"
    assert r.verdict.startswith("speedup better at c=1, c=4 and c=16; AL pooled no difference")
    assert r.pooled[("speedup", "c=4")].nights == 6


def test_fewer_than_3_nights_is_insufficient(tmp_path):
    sc = _compare(tmp_path, 2, [Plant("eagle3", 0, "speedup", 0.20)])
    comps, r = _eagle3(sc)
    assert r.verdict.startswith("insufficient nights (2 shared")
    assert all(c.call == "insufficient nights" for c in comps.values())


def test_the_reference_by_draft_path_and_a_missing_one(tmp_path):
    sc = _compare(tmp_path, 3, [], reference=".fixtures/tiny/eagle-random")
    assert sc.reference.startswith("eagle3-untrained ·")
    assert _compare(tmp_path, 3, [], reference=None).reference.startswith("eagle3 ·")  # the first seen
    with pytest.raises(Exception, match="no such checkpoint"):
        _compare(tmp_path, 3, [], reference="nope")


def test_compare_checkpoints_cli_text_and_json(tmp_path, capsys):
    write_history(tmp_path, 5, [], report=False)
    assert main(["compare", "--checkpoints", str(tmp_path), "--reference", "eagle3"]) == 0
    out = capsys.readouterr().out
    assert "cpu_tiny: reference eagle3 · .fixtures/tiny/eagle3 (5 nights)" in out
    assert "eagle3-untrained · .fixtures/tiny/eagle-random (5 nights): speedup worse at c=1, c=4 and c=16" in out
    assert main(["compare", "--checkpoints", str(tmp_path), "--json"]) == 0
    (sc,) = json.loads(capsys.readouterr().out)
    assert sc["fdr_q"] == 0.05 and sc["min_nights"] == 3
    untrained = next(c for c in sc["checkpoints"] if c["checkpoint"].startswith("eagle3-untrained"))
    speed = [v for v in untrained["versus_reference"] if v["metric"] == "speedup"]
    assert len(speed) == 3 and all(v["high"] < 1 and v["call"] == "worse" and v["nights"] == 5 for v in speed)
    assert main(["compare", "--checkpoints", str(tmp_path), "--reference", "nope"]) == 2
    assert main(["compare", "--reference", "eagle3"]) == 2


def test_the_dashboard_has_a_checkpoint_section_with_nights(tmp_path):
    write_history(tmp_path / "r", 4, [])
    page = build_dashboard(tmp_path / "r", tmp_path / "site").index.read_text()
    i = page.index("Checkpoints across nights · cpu_tiny")
    assert page.index("Checkpoints side by side") < i < page.index("Latest runs")
    assert "(4 nights)" in page and "reference <b>eagle3 · .fixtures/tiny/eagle3</b>" in page


def test_two_weight_sets_under_one_name_are_two_checkpoints(tmp_path):
    # a bad upload: from night 3 the eagle3.1 slot loads other weights at the same path
    weights = {"_arm_only": True, "draft": {"model": ".fixtures/tiny/eagle3.1", "weights_sha256": "a" * 64}}
    swapped = {"_arm_only": True, "draft": {"model": ".fixtures/tiny/eagle3.1", "weights_sha256": "b" * 64}}
    sc = _compare(tmp_path, 6, [Plant("eagle3.1", 0, size=0.0, provenance=weights),
                                Plant("eagle3.1", 3, "al", -0.10, provenance=swapped)], reference=None)
    names = {r.name: r for r in sc.checkpoints}
    first = "eagle3.1 · .fixtures/tiny/eagle3.1 (weights aaaaaaaa)"
    second = "eagle3.1 · .fixtures/tiny/eagle3.1 (weights bbbbbbbb)"
    assert names[first].nights == 3 and names[second].nights == 3
    assert "eagle3 · .fixtures/tiny/eagle3" in names  # one weight set: named as before
    # the arm names the first weight set; the default reference is the scenario's checkpoint_reference
    assert checkpoints.resolve("eagle3.1", list(names)) == first
    assert checkpoints.resolve(None, list(names), default="eagle3-untrained").startswith("eagle3-untrained ·")
    assert checkpoints.resolve(None, list(names)) == next(iter(names))
