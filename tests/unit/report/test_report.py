"""report.md / report.html / terminal table / live progress."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from tests.helpers.runfactory import make_run

from speedbench.cli import main
from speedbench.records import PointKey, RequestRecord
from speedbench.report.model import build_report
from speedbench.report.render import render_report, write_report
from speedbench.run.live import LiveProgress
from speedbench.report.terminal import print_report, print_summary
from speedbench.results.loader import load_run

EVIL = "<script>alert(1)</script>"
EVIL_IMG = '<img src=x onerror="alert(2)">'


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return load_run(make_run(tmp_path_factory.mktemp("r"), n_prompts=8).path)


@pytest.fixture(scope="module")
def evil_run(tmp_path_factory):
    arms = [{"name": "baseline"},
            {"name": f"eagle{EVIL}", "speedup": 1.8, "al": 2.8, "draft": f"org/{EVIL_IMG}", "eagle_version": "3"}]
    rd = make_run(tmp_path_factory.mktemp("evil"), arms=arms, model=f"target{EVIL}", n_prompts=6,
                  hardware=f"GPU {EVIL}", categories=(f"cat{EVIL}", "math|pipe"))
    return load_run(rd.path)


def console(width: int = 200) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width, highlight=False, color_system=None), buf


def test_render_report_contents(run):
    md, html = render_report(run)
    assert md.startswith("# speedbench report: cpu\\_tiny")
    assert ("| concurrency | baseline per-user TPS (client clock) | eagle3.1 per-user TPS (client clock) "
            "| speedup \\[95% CI\\] (headline clock) | outputs | AL (pooled over steps) | reference speedup |") in md
    row = run.row("eagle3.1", 1)
    assert f"{row.speedup_mean:.2f}× \\[{row.speedup_ci_low:.2f}, {row.speedup_ci_high:.2f}\\]" in md
    assert "2.03×" in md  # reference figure beside the measured one
    assert "## Acceptance length per category" in md and "## Per-position acceptance" in md
    # per category: per-user TPS, speedup with CI, both ALs; per question in the HTML
    cat = next(c for c in run.categories
               if c.arm == "eagle3.1" and c.concurrency == 4 and c.category == "math")
    assert "## Per category" in md and "<h2>Per category</h2>" in html
    assert (f"| eagle3.1 | 4 | math | {cat.n_ok} | {cat.per_user_tps_mean:.1f} | {cat.speedup_mean:.2f}× "
            f"\\[{cat.speedup_ci_low:.2f}, {cat.speedup_ci_high:.2f}\\] | {cat.al_tokens:.3f} | "
            f"{cat.al_requests:.3f} |") in md
    assert "<h2>Per question</h2>" in html and "<summary>eagle3.1 c=4 (8 questions)</summary>" in html
    assert '<th class="l">question_id</th>' in html
    # self-contained html: plots inline, nothing fetched, nothing executed
    assert html.count("<svg") == 5 and "<path" in html
    assert "<script" not in html.lower()
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html) + re.findall(r"url\(([^)]*)\)", html)
    assert all(r.startswith("#") for r in refs), refs  # only in-page references (SVG clip paths)
    assert "Content-Security-Policy" in html


def test_untrusted_strings_are_escaped(evil_run):
    md, html = render_report(evil_run)
    assert "<script" not in html.lower() and "<img" not in html.lower() and "onerror=\"" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # report.md is plain Markdown: every "<" backslash-escaped (no tag can open), no HTML entities
    assert re.search(r"(?<!\\)<", md) is None
    assert "\\<script>alert(1)\\</script>" in md and "&lt;" not in md
    assert "math\\|pipe" in md  # a pipe cannot break a markdown table
    buf_console, buf = console()
    print_report(build_report(evil_run), buf_console)  # rich markup in names must not be interpreted or crash
    assert "<script>alert(1)</script>" in buf.getvalue()


def test_terminal_table_shape(run):
    c, buf = console()
    print_report(build_report(run), c)
    out = buf.getvalue()
    assert "eagle3.1 (EAGLE 3.1)" in out and "eagle3 (EAGLE 3)" in out
    for head in ("concurrency", "per-user TPS", "speedup [95% CI]", "AL", "reference"):
        assert head in out
    base = run.row("baseline", 16).per_user_tps_mean
    assert f"{base:.1f}" in out
    assert "hardware 1x NVIDIA H200 (synthetic)" in out and "vLLM 0.32.0" in out
    # the bare-summary path used right after a run
    c2, buf2 = console()
    print_summary(run.summary, c2)
    assert "speedup [95% CI]" in buf2.getvalue()
    assert "target unknown model" in buf2.getvalue()  # a bare dict has no scenario to read
    c3, buf3 = console()
    print_summary(run.dir, c3)  # a folder: provenance and scenario are read too
    assert "target tiny/target" in buf3.getvalue()


def test_facts_from_provenance_when_summary_lacks_them(run):
    from speedbench.report import facts
    from speedbench.results import Run

    bare = Run(run.dir, {k: v for k, v in run.summary.items() if k != "hardware"}, run.engine)
    assert facts.hardware(bare) == "1x NVIDIA H200 (synthetic)"  # from provenance's hardware.summary
    assert facts.engine_version(bare) == ("vLLM", "0.32.0")
    bare.__dict__["scenario"] = {}  # no scenario: the draft comes from provenance
    assert facts.draft_model(bare, "eagle3.1") == "org/eagle3.1-draft"
    assert facts.target_model(bare) == "tiny/target"


def test_warnings(tmp_path):
    rd = make_run(tmp_path, n_prompts=6, failed_arms=("eagle3",), error_arms={"eagle3.1": 2})
    summary = json.loads(rd.summary_path.read_text())
    for r in summary["rows"]:
        if r["arm"] == "eagle3.1" and r["concurrency"] == 4:
            r["al_agree"] = False
            r["loop_lag_ms_max"] = 25.0
    rd.write_summary(summary)
    run = load_run(rd.path)
    c, buf = console(300)
    print_report(build_report(run), c)
    out = buf.getvalue()
    assert "arm eagle3 FAILED: arm eagle3 failed to start" in out
    # the same cause at several points is one line naming them
    failed = [ln for ln in out.splitlines() if "2 of 6 requests failed" in ln]
    assert len(failed) == 1 and "eagle3.1 c=1" in failed[0] and "c=4" in failed[0], out
    assert "eagle3.1 c=4: AL sources disagree" in out
    assert "event-loop lag reached 25 ms" in out
    # the headline table comes before the warnings
    assert out.index("speedup [95% CI]") < out.index("warning:")
    md, html = render_report(run)
    assert "failed" in md and "AL sources disagree" in html
    assert md.index("## Speedup") < md.index("## Warnings")


def test_write_report_and_cli(tmp_path, capsys):
    rd = make_run(tmp_path, n_prompts=4, concurrencies=(1, 2))
    md_path, html_path = write_report(rd.path)
    assert md_path.read_text().startswith("# speedbench report")
    html_path.unlink()
    assert main(["report", str(rd.path)]) == 0
    assert html_path.exists()
    assert "speedup [95% CI]" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "missing")]) == 2


def test_drift_sections_included(run, monkeypatch):
    from speedbench.report import render

    monkeypatch.setattr(render, "drift_sections", lambda r: ("## Drift\n\nAL drops with context.",
                                                            "<h2>Drift</h2><p>AL drops with context.</p>"))
    md, html = render_report(run)
    assert "AL drops with context." in md and "<h2>Drift</h2>" in html
    # a broken drift section costs a section, not the report
    monkeypatch.setattr(render, "drift_sections", lambda r: 1 / 0)
    md, html = render_report(run)
    assert "drift analysis failed: ZeroDivisionError" in md


def _rec(i, err=None):
    return RequestRecord(arm="eagle3", concurrency=4, prompt_index=i, prompt_id=str(i), output_tokens=50, error=err)


def test_live_progress_plain():
    t = [0.0]
    c, buf = console(80)
    log = "/results/run/logs/server-eagle3.log"
    with LiveProgress(c, clock=lambda: t[0]) as live:
        assert live.plain  # a StringIO console is not a terminal
        live.server_starting("eagle3", Path(log))
        for _ in range(4):
            t[0] += 20
            live.server_progress("eagle3", t[0], "loading (no answer on /health yet)")
        live.server_ready("eagle3", t[0])
        live.point_started(PointKey("eagle3", 4), 8)
        for i in range(8):
            t[0] += 0.5
            live.record_done(_rec(i, "timeout" if i == 3 else None))
        live.point_done(PointKey("eagle3", 4))
        live.message("done [red]x[/red]")
    out = buf.getvalue().splitlines()
    assert out[0] == "eagle3: starting server"
    assert sum("still starting" in line for line in out) == 2  # throttled to one per 30 s
    # the phase, how long and where the log is, wrapped at 80 columns with the path whole
    assert out[1:3] == ["eagle3: still starting after 40 s, loading (no answer on /health yet); its log:",
                        f"    {log}"], out[1:3]
    assert "eagle3: server ready after 80.0 s" in out
    assert "eagle3 c=4: 2/8 done, 100 output tok/s, 0 errors" in out
    assert "eagle3 c=4: 8/8 requests in 4.0 s, 88 output tok/s, 1 errors" in out
    assert out[-1] == "done [red]x[/red]"
    assert len(out) < 14  # not one line per request
    assert max(map(len, out)) <= 80


def test_live_progress_terminal():
    buf = io.StringIO()
    c = Console(file=buf, force_terminal=True, width=120)
    with LiveProgress(c) as live:
        assert not live.plain
        live.server_starting("eagle[3]")
        live.server_progress("eagle[3]", 5.0, "x" * 300)
        live.server_ready("eagle[3]", 6.0)
        live.point_started(PointKey("eagle[3]", 1, "v"), 2)
        live.record_done(_rec(0))
        live.record_done(RequestRecord(arm="other", concurrency=1, prompt_index=0, prompt_id="0"))  # unknown: ignored
        live.point_done(PointKey("eagle[3]", 1, "v"))
    assert "server ready after 6.0 s" in buf.getvalue()


def _with_engine_and_predicted(rd) -> None:
    """Every column the headline table can have: engine-clock and predicted speedups too."""
    summary = json.loads(rd.summary_path.read_text())
    for r in summary["rows"]:
        if r.get("speedup_mean") is not None:
            r.update(speedup_engine_mean=r["speedup_mean"], speedup_engine_ci_low=r["speedup_ci_low"],
                     speedup_engine_ci_high=r["speedup_ci_high"], speedup_predicted=1.9,
                     speedup_predicted_ci_low=1.85, speedup_predicted_ci_high=1.95)
    rd.write_summary(summary)


@pytest.mark.parametrize("every_column", [False, True])
def test_headline_headers_read_whole_at_80_columns(tmp_path, every_column):
    """No terminal (a CI job, ``> log``): rich draws 80 columns. Every header of the
    headline table reads whole, and no header or cell is cut to "…"."""
    arms = [{"name": "baseline"}, {"name": "eagle3.1", "speedup": 1.8, "al": 2.8, "eagle_version": "3.1"}]
    rd = make_run(tmp_path, arms=arms, n_prompts=6)
    if every_column:
        _with_engine_and_predicted(rd)
    c = Console(file=io.StringIO(), width=80, force_terminal=False, record=True, highlight=False)
    print_summary(rd.path, c)
    out = c.export_text()
    heads = ["concurrency", "baseline", "eagle3.1", "per-user TPS", "speedup [95% CI]", "AL", "reference", "speedup"]
    if every_column:
        heads += ["other clock", "predicted speedup"]
    assert "…" not in out, out
    assert all(h in out for h in heads), out
    assert all(len(line) <= 80 for line in out.splitlines())
    row = load_run(rd.path).row("eagle3.1", 16)
    assert f"{row.speedup_mean:.2f}× [{row.speedup_ci_low:.2f}, {row.speedup_ci_high:.2f}]" in out
