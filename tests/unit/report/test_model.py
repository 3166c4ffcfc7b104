"""The report model (report/model.py): the sections a run's facts call for, each table
builder called once per build, and the renderers formatting that one model."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console
from tests.helpers.runfactory import make_run

from speedbench.cli import main
from speedbench.report import breakdowns, header, headlines, model, notes, tables
from speedbench.report.html import render_html
from speedbench.report.markdown import render_markdown
from speedbench.report.model import Lines, Speedups, Table, Tables, build_report
from speedbench.report.render import render_report
from speedbench.report.terminal import print_report, print_summary
from speedbench.results import RunDir
from speedbench.results.loader import load_run

CPU_TINY = Path(__file__).resolve().parents[2] / "data" / "cpu_tiny_runs" / "float16"
ALWAYS = ["speedup", "measured", "plots", "points"]

# Every table builder the model calls; each must run once per build.
BUILDERS = [(tables, n) for n in ("speedup_tables", "category_al", "position_curves")] + [
    (notes, "run_warnings"), (notes, "measured_lines")] + [
    (header, "noise_lines"), (headlines, "arm_headlines")] + [
    (breakdowns, n) for n in ("screening_table", "rate_table", "detail_rows", "latency_table", "category_rows",
                              "category_table", "prompt_tables", "position_rows", "plain_rows")]
TERMINAL_ONLY = {"plain_rows"}  # built only when there is no speedup table


@pytest.fixture(scope="module")
def rd(tmp_path_factory) -> RunDir:
    return make_run(tmp_path_factory.mktemp("m"), n_prompts=4, concurrencies=(1, 2))


@pytest.fixture
def calls(monkeypatch) -> Counter:
    counts: Counter = Counter()

    def counting(fn, name):
        def counted(*a, **k):
            counts[name] += 1
            return fn(*a, **k)
        return counted

    for mod, name in BUILDERS:
        monkeypatch.setattr(mod, name, counting(getattr(mod, name), name))
    return counts


def _edited(tmp_path, edit, **kw) -> RunDir:
    """A run folder whose summary.json ``edit`` changed (as an older or other run's would read)."""
    rd = make_run(tmp_path, n_prompts=4, concurrencies=(1, 2), **kw)
    s = json.loads(rd.summary_path.read_text())
    edit(s)
    rd.write_summary(s)
    return rd


def _keys(run) -> list[str]:
    return [s.key for s in build_report(run).sections]


def test_a_closed_loop_run_has_its_sections_in_report_order(rd):
    report = build_report(load_run(rd.path))
    keys = [s.key for s in report.sections]
    assert keys == [k for k, _ in model.SECTIONS if k in keys]  # the declared order
    for k in ALWAYS + ["category_al", "category", "prompts", "positions"]:
        assert k in keys, k
    # nothing in this run calls for them (its rows carry no latency block, as older runs' do not)
    for k in ("rate", "screening", "failures", "per_arm", "latency"):
        assert k not in keys, k
    speed = report.section("speedup")
    assert speed and isinstance(speed.content, Speedups) and len(speed.content.tables) == 2 and not speed.note
    prompts = report.section("prompts")
    assert prompts and isinstance(prompts.content, Tables)
    assert [t.title for t in prompts.content.tables] == ["eagle3 c=1", "eagle3 c=2", "eagle3.1 c=1", "eagle3.1 c=2"]
    assert report.headlines and report.headlines[0].startswith("eagle3 (EAGLE 3): ")
    assert report.hardware == "1x NVIDIA H200 (synthetic)" and report.baseline == "baseline"


def test_rate_section_only_with_rate_points(tmp_path):
    def rate(s):
        for r in s["rows"]:
            r.update(request_rate=2.0 if r["concurrency"] == 1 else 0.5, goodput=1.0, goodput_share=0.5)

    report = build_report(load_run(_edited(tmp_path, rate).path))
    s = report.section("rate")
    assert s and isinstance(s.content, Table) and s.note == model.RATE_NOTE
    assert [row[:2] for row in s.content.rows[:2]] == [("baseline", "0.5"), ("baseline", "2")]  # rate order
    assert len(s.content.rows) == 6 and len(s.content.align) == len(s.content.headers)


def test_screening_section_only_with_screening_entries(tmp_path, rd):
    assert "screening" not in _keys(load_run(rd.path))

    def screen(s):
        s["screening"] = [{"arm": "eagle3", "concurrency": 4, "al_tokens": 2.5, "al_requests": 2.4, "promoted": True,
                           "predicted": [{"concurrency": 1, "speedup": 1.8, "ci_low": 1.6, "ci_high": 2.0}]}]

    s = build_report(load_run(_edited(tmp_path, screen).path)).section("screening")
    assert s and isinstance(s.content, Table) and s.note == model.SCREEN_NOTE
    assert s.content.rows == (("eagle3", "4", "2.500", "2.400", "1.80× [1.60, 2.00]", "yes"),)


def test_failures_and_warnings_of_a_failed_arm(tmp_path):
    report = build_report(load_run(make_run(tmp_path, n_prompts=4, concurrencies=(1,), failed_arms=("eagle3",),
                                            error_arms={"eagle3.1": 2}).path))
    failures = report.section("failures")
    assert failures and isinstance(failures.content, Table)
    ((arm, c, message),) = failures.content.rows
    assert (arm, c) == ("eagle3", "1") and message.startswith("arm eagle3 failed to start")
    warnings = report.section("warnings")
    assert warnings and isinstance(warnings.content, Lines) and warnings.content.bulleted
    assert warnings.content.lines[0] == f"arm eagle3 FAILED: {message}"


def test_no_speculative_arm_the_speedup_section_says_so_and_the_terminal_gets_its_table(tmp_path):
    run = load_run(make_run(tmp_path, n_prompts=4, concurrencies=(1,), arms=[{"name": "a"}, {"name": "b"}]).path)
    report = build_report(run)
    speed = report.section("speedup")
    assert speed and isinstance(speed.content, Speedups) and speed.content.tables == ()
    assert speed.note == model.NO_SPEEDUP_NOTE and speed.page_note == model.NO_SPEEDUP_NOTE_HTML
    per_arm = report.section("per_arm")
    assert per_arm and isinstance(per_arm.content, Table) and [r[0] for r in per_arm.content.rows] == ["a", "b"]
    for k in ("positions", "prompts", "category_al"):  # no speculative arm: no acceptance to show
        assert k not in [s.key for s in report.sections], k
    assert model.NO_SPEEDUP_NOTE in render_markdown(report) and "per-arm results" not in render_markdown(report)
    html = render_html(report)
    assert f"<p>{model.NO_SPEEDUP_NOTE_HTML}</p>" in html and "per-arm results" not in html
    buf = io.StringIO()
    print_report(report, Console(file=buf, width=200, highlight=False, color_system=None))
    assert "per-arm results" in buf.getvalue()


def test_only_builds_the_asked_sections(rd, calls):
    report = build_report(load_run(rd.path), only=("speedup", "measured"))
    assert [s.key for s in report.sections] == ["speedup", "measured"]
    assert calls["prompt_tables"] == calls["latency_table"] == calls["detail_rows"] == 0
    assert calls["speedup_tables"] == 1 and report.headlines  # the head is always there


def test_each_builder_is_called_once_per_build(rd, calls):
    build_report(load_run(rd.path))
    assert {name: calls[name] for _, name in BUILDERS} == {
        name: 0 if name in TERMINAL_ONLY else 1 for _, name in BUILDERS}


def test_markdown_and_html_share_one_build(rd, calls):
    render_report(load_run(rd.path))
    assert all(calls[name] == (0 if name in TERMINAL_ONLY else 1) for _, name in BUILDERS), calls


def test_speedbench_report_prints_and_writes_one_build(tmp_path, calls, capsys):
    rd = make_run(tmp_path, n_prompts=4, concurrencies=(1,))
    assert main(["report", str(rd.path)]) == 0
    assert rd.report_md_path.exists() and rd.report_html_path.exists()
    assert all(calls[name] == (0 if name in TERMINAL_ONLY else 1) for _, name in BUILDERS), calls
    assert "speedup [95% CI]" in capsys.readouterr().out


def test_the_terminal_builds_only_what_it_shows(rd, calls):
    print_summary(rd.path, Console(file=io.StringIO(), width=200))
    assert calls["speedup_tables"] == calls["run_warnings"] == calls["measured_lines"] == 1
    for name in ("prompt_tables", "latency_table", "detail_rows", "category_al", "position_curves"):
        assert calls[name] == 0, name


def test_notes_are_the_models_and_each_page_keeps_its_wording(rd):
    report = build_report(load_run(rd.path))
    md, html = render_markdown(report), render_html(report)
    pos = report.section("positions")
    assert pos and pos.note == model.POSITION_NOTE and pos.page_note == model.POSITION_NOTE_HTML
    assert model.POSITION_NOTE in md and model.POSITION_NOTE_HTML in html
    assert model.CATEGORY_AL_NOTE in md and model.CATEGORY_AL_NOTE.split(",")[0] not in html
    for s in report.sections:  # every title in the page that shows the section
        if s.key in ("plots", "failures", "prompts"):
            assert s.title in html and f"## {s.title}" not in md
        elif s.key != "per_arm":
            assert f"## {s.title}" in md and s.title in html


def test_latency_section_with_the_rows_latency_block():
    report = build_report(load_run(CPU_TINY))
    s = report.section("latency")
    assert s and isinstance(s.content, Table) and s.note == model.LATENCY_NOTE and s.content.left == 3
    assert model.LATENCY_NOTE in render_markdown(report)
    assert "Over ok measured requests, in ms." in render_html(report)  # escaped there ("chunk&#x27;s")


def test_table_alignment():
    t = model.table(["arm", "c", "x"], [["a", "1", "2"]])
    assert t.align == "lrr" and t.left == 1 and t.rows == (("a", "1", "2"),)
    assert Table(("a", "b", "c"), (), "llr").left == 2 and Table((), (), "").left == 0
