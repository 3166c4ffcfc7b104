"""Open regressions stay on the first screen (issue 48): a regression called and not
recovered is listed first by `speedbench changes` and the dashboard whatever its age, makes
`changes` exit 1 until it recovers or RESULTS/acknowledged.yaml acknowledges it; a bad last
night alone is suspicious (exit 0, --strict 1)."""

from __future__ import annotations

import json
import re

from tests.helpers.histories import Plant, write_history

from speedbench.cli import main
from speedbench.report.dashboard import build_dashboard


def test_a_regression_20_nights_old_stays_open_and_exits_1(tmp_path, capsys):
    write_history(tmp_path, 30, [Plant("eagle3", 10, "speedup", -0.15)], report=False)
    assert main(["changes", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    first = out.splitlines()[1]
    assert first.startswith("  cpu_tiny · eagle3 ") and "open since 2026-11-11, 20 nights, −1" in first, out
    assert "0 regression" in out  # not news any more: the counts of the recent nights do not hold it
    assert main(["changes", str(tmp_path), "--since", "2026-11-25"]) == 1  # --since filters news, not open ones
    assert main(["changes", str(tmp_path), "--json", "-o", str(tmp_path / "v.json")]) == 1
    items = [i for i in json.loads((tmp_path / "v.json").read_text()) if "open_regression" in i]
    assert {i["arm"] for i in items} == {"eagle3"} and all(i["open_regression"]["nights"] == 20 for i in items)


def test_an_acknowledged_regression_is_listed_with_its_reason_and_exits_0(tmp_path, capsys):
    write_history(tmp_path, 30, [Plant("eagle3", 10, "speedup", -0.15)], report=False)
    ack = tmp_path / "acknowledged.yaml"
    ack.write_text("- series: eagle3\n  since: 2026-11-10\n  reason: wrong night\n")
    assert main(["changes", str(tmp_path)]) == 1  # another night's regression: not this one
    ack.write_text("- series: eagle3\n  scenario: cpu_tiny\n  since: 2026-11-11\n  reason: vLLM bump, accepted\n"
                   "- series: eagle3.1\n")
    capsys.readouterr()
    assert main(["changes", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "acknowledged: vLLM bump, accepted" in out and "entry 2 ignored" in out
    ack.write_text("- series: eagle3 speedup c=4\n  since: 2026-11-11\n  reason: only c=4\n")
    assert main(["changes", str(tmp_path)]) == 1  # the other points are still open


def test_a_recovered_regression_is_closed(tmp_path):
    write_history(tmp_path, 30, [Plant("eagle3", 10, "speedup", -0.15), Plant("eagle3", 18, "speedup", 1 / 0.85 - 1)],
                  report=False)
    assert main(["changes", str(tmp_path)]) == 0


def test_a_bad_last_night_is_suspicious_exit_0_and_strict_1(tmp_path, capsys):
    write_history(tmp_path, 20, [Plant("eagle3", 19, "speedup", -0.15)], report=False)
    assert main(["changes", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "SUSPICIOUS: eagle3 speedup" in out and "REGRESSION" not in out and "OPEN" not in out
    assert main(["changes", str(tmp_path), "--strict"]) == 1


def test_a_regression_older_than_the_judged_nights_is_not_forgotten(tmp_path, capsys):
    write_history(tmp_path, 80, [Plant("eagle3", 5, "speedup", -0.15)], report=False)
    assert main(["changes", str(tmp_path)]) == 1
    assert "open since 2026-11-06, 75 nights" in capsys.readouterr().out


def test_the_dashboard_lists_open_regressions_first(tmp_path):
    write_history(tmp_path / "r", 30, [Plant("eagle3", 10, "speedup", -0.15)])
    page = build_dashboard(tmp_path / "r", tmp_path / "site").index.read_text()
    verdict = page.index('id="verdict"')
    opened = page.index("Open regressions")
    assert verdict < opened < page.index("Last night · cpu_tiny") < page.index("Latest runs")
    assert re.search(r"eagle3 speedup c=4: open since 2026-11-11, 20 nights, −1\d\.\d%", page)


def test_an_arm_taken_out_has_no_open_regression(tmp_path):
    from tests.helpers.histories import load_nights

    from speedbench.report import nightly

    ns = load_nights(write_history(tmp_path, 30, [Plant("eagle3", 10, "speedup", -0.15)], report=False))
    for n in ns[20:]:  # eagle3 left the matrix after night 19
        n.run.rows[:] = [r for r in n.run.rows if r.arm != "eagle3"]
    vs = nightly.verdicts({"cpu_tiny": ns})
    assert not [v for v in vs if v.open is not None]
    assert [v for v in nightly.verdicts({"cpu_tiny": ns[:20]}) if v.open is not None]
