"""The outputs verdict over nights: each point's identical fraction is a series like the
speedup's (a drop is a change, with what changed in the provenance), a lossy night is a
missing night of its speedup series and is marked on the dashboard; nights from before
the outputs block load as "not recorded" and add no series."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.helpers.histories import Plant, load_nights, write_history

from speedbench.cli import main
from speedbench.report import nightly
from speedbench.report.dashboard import build_dashboard

DROP = 10  # the first night whose outputs differ
NIGHTS = 14


def _with_outputs(folders: list[Path], drop: int = DROP, low: float = 0.4) -> None:
    """eagle3's points identical on every night before ``drop``, then ``low`` of them: lossy."""
    for i, folder in enumerate(folders):
        s = json.loads((folder / "summary.json").read_text())
        points = []
        for r in s["rows"]:
            if r["arm"] != "eagle3":
                continue
            frac = 1.0 if i < drop else low
            points.append({"arm": "eagle3", "concurrency": r["concurrency"], "variant": r.get("variant") or "",
                           "reference": {"arm": "baseline", "concurrency": r["concurrency"], "variant": ""},
                           "floor": "", "verdict": "identical" if frac == 1.0 else "lossy",
                           "reason": "" if frac == 1.0 else "3 of 3 divergences with the arm's token at least 0.5 "
                                                            "nats below the target's (worst 4.10)",
                           "pairs": 10, "identical": round(10 * frac), "identical_fraction": frac})
        s["outputs"] = {"near_tie_nats": 0.5, "top": 20, "checks_per_point": 32, "points": points}
        (folder / "summary.json").write_text(json.dumps(s))


def _history(root: Path) -> list[Path]:
    plant = Plant("eagle3", DROP, "speedup", 0.0, provenance={"vllm_version": "0.33.0"})
    folders = write_history(root, NIGHTS, [plant])
    _with_outputs(folders)
    return folders


def test_a_drop_in_identical_outputs_is_a_regression_with_its_cause(tmp_path, capsys):
    ns = load_nights(_history(tmp_path / "r"))
    vs = {v.series.key: v for v in nightly.verdicts({"cpu_tiny": ns})}
    for c in (1, 4, 16):
        v = vs[("cpu_tiny", "eagle3", nightly.IDENTICAL_OUTPUTS, f"c={c}")]
        assert v.status == "regression" and v.began == ns[DROP].created, nightly.describe(v)
        assert v.change is not None and (v.change.before, v.change.after) == (1.0, 0.4)
        assert "eagle3 vLLM: 0.32.0 → 0.33.0" in v.what_changed
        assert v.series.deps == ("eagle3", "baseline")  # the arm and the arm it is held against
    # points without an entry (older arms' here) are "not recorded": no series, no change
    assert not any(k[1] == "eagle3.1" and k[2] == nightly.IDENTICAL_OUTPUTS for k in vs)
    assert main(["changes", str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert re.search(r"REGRESSION: eagle3 identical outputs c=4: 1\.000 → 0\.400 \(−60\.0%", out), out


def test_a_lossy_night_is_missing_from_its_speedup_series(tmp_path):
    ns = load_nights(_history(tmp_path / "r"))
    series = {s.key: s for s in nightly.collect("cpu_tiny", ns)}
    speed = series[("cpu_tiny", "eagle3", "speedup", "c=4")]
    assert speed.nights == list(range(DROP))  # the lossy nights are not speedups of the same computation
    assert series[("cpu_tiny", "eagle3", "per-user TPS", "c=4")].nights == list(range(NIGHTS))
    assert series[("cpu_tiny", "eagle3.1", "speedup", "c=4")].nights == list(range(NIGHTS))
    assert series[("cpu_tiny", "eagle3", nightly.IDENTICAL_OUTPUTS, "c=4")].values[DROP - 1:DROP + 1] == [1.0, 0.4]


def test_steady_identical_outputs_are_no_change(tmp_path):
    folders = write_history(tmp_path / "r", NIGHTS, [])
    _with_outputs(folders, drop=NIGHTS)  # identical every night
    vs = nightly.verdicts({"cpu_tiny": load_nights(folders)})
    mine = [v for v in vs if v.series.metric == nightly.IDENTICAL_OUTPUTS]
    assert len(mine) == 3 and {v.status for v in mine} == {"no change"}


def test_sampled_nights_add_no_identical_outputs_series(tmp_path):
    folders = write_history(tmp_path / "r", 6, [])
    _with_outputs(folders, drop=3)
    for f in folders:  # sampled at temperature 0.7: outputs cannot be compared token for token
        s = json.loads((f / "summary.json").read_text())
        s["outputs"]["not_checked"] = "sampling at temperature 0.7: outputs cannot be compared token for token"
        (f / "summary.json").write_text(json.dumps(s))
    assert not any(s.metric == nightly.IDENTICAL_OUTPUTS for s in nightly.collect("cpu_tiny", load_nights(folders)))


def test_nights_from_before_the_outputs_block_load_as_not_recorded(tmp_path):
    ns = load_nights(write_history(tmp_path / "r", 6, []))
    run = ns[-1].run
    assert run.outputs_of("eagle3", 4).to_dict() == {"verdict": "not checked", "reason": "not recorded",
                                                     "identical_fraction": None}
    series = nightly.collect("cpu_tiny", ns)
    assert not any(s.metric == nightly.IDENTICAL_OUTPUTS for s in series)
    assert any(s.metric == "speedup" and s.arm == "eagle3" and len(s.values) == 6 for s in series)


def test_the_dashboard_marks_a_lossy_night(tmp_path):
    _history(tmp_path / "results")
    page = build_dashboard(tmp_path / "results", tmp_path / "site").index.read_text()
    latest = page[page.index("Latest runs"):]
    assert "outputs differ</span>" in latest  # the lossy nights' status
    rows = re.findall(r"<tr>.*?</tr>", latest, flags=re.S)
    newest = next(r for r in rows if "2026-11-14" in r)
    oldest = next(r for r in rows if "2026-11-01" in r)
    assert "eagle3 " in newest and "measured (outputs differ)" in newest
    assert "(outputs differ)" not in oldest and ">ok</span>" in oldest
    verdict = page[page.index('id="verdict"'):page.index("Latest runs")]
    assert "identical outputs c=4" in verdict and "eagle3 vLLM: 0.32.0 → 0.33.0" in verdict
    # the leaderboard (the latest night): eagle3's speedups marked, never starred as the best
    assert len(re.findall(r"<td>[^<★]*× \[[^<]*\] \(outputs differ\)</td>", page[:page.index("Latest runs")])) == 3
