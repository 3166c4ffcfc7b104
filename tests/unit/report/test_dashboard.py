"""The static dashboard: scanning, copied reports, links, escaping (no browser needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

from tests.helpers.runfactory import make_history, make_run

from speedbench.cli import main
from speedbench.report.render import write_report
from speedbench.report.dashboard import build_dashboard
from speedbench.results import SCHEMA_VERSION


def test_dashboard_site(tmp_path):
    runs = make_history(tmp_path / "results")
    write_report(runs[0])  # one run with its own report; the others get one rendered into the site
    newer = runs[1].path.parent / "20991231T000000Z-ffffff"
    newer.mkdir()
    (newer / "summary.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "rows": []}))
    d = build_dashboard(tmp_path / "results", tmp_path / "site")
    assert len(d.runs) == len(runs)
    assert len(d.problems) == 1 and "newer than this speedbench" in d.problems[0]
    html = d.index.read_text()
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert "&lt;script&gt;" in html
    links = re.findall(r'href="(runs/[^"]+)"', html)
    assert len(set(links)) == len(runs)  # every run once (the leaderboard links the latest ones again)
    for link in links:  # relative links that resolve inside the site
        target = tmp_path / "site" / unquote(link)
        assert target.exists() and target.read_text().startswith("<!DOCTYPE html>")
        assert "<script" not in target.read_text().lower()
    assert (tmp_path / "site/runs/cpu_tiny" / runs[0].name / "report.html").read_bytes() == \
        runs[0].report_html_path.read_bytes()
    assert not runs[1].report_html_path.exists()  # rendering for the site leaves the run folder alone
    for heading in ("Latest runs", "Acceptance length: category × checkpoint", "Scenario cpu_tiny",
                    "Scenario kimi_coding", "Speedup in per-user TPS over time", "Per-position acceptance"):
        assert heading in html
    assert "eagle3.1 · org/eagle3.1-draft" in html  # checkpoint = arm + draft model
    assert html.count("<svg") == 10  # 5 charts per scenario (the fifth: what each run cost)


def test_dashboard_cli_and_empty(tmp_path, capsys):
    """A folder with no runs is bad input (issue 47): a 0-run site would pass every night."""
    (tmp_path / "results").mkdir()
    assert main(["dashboard", str(tmp_path / "results"), "-o", str(tmp_path / "site")]) == 2
    assert "no run folders" in capsys.readouterr().err
    assert not (tmp_path / "site" / "index.html").exists()
    assert main(["dashboard", str(tmp_path / "nope"), "-o", str(tmp_path / "site")]) == 2
    make_run(tmp_path / "results")
    assert main(["dashboard", str(tmp_path / "results"), "-o", str(tmp_path / "site")]) == 0
    assert "(1 runs)" in capsys.readouterr().out


def test_site_inside_results_is_not_rescanned(tmp_path):
    make_history(tmp_path / "results", n=1, planted=False)
    site = tmp_path / "results" / "site"
    first = build_dashboard(tmp_path / "results", site)
    second = build_dashboard(tmp_path / "results", site)
    assert len(first.runs) == len(second.runs) == 2
    assert Path(site / "index.html").exists()
