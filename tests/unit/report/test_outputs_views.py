"""Same outputs, or no speedup: every view that shows a speedup shows the point's outputs
verdict beside it, marks a lossy point's speedup "outputs differ", and reads a folder from
before outputs were compared as "not checked (not recorded)" without failing."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console
from tests.helpers.runfactory import make_run

from speedbench.metrics import outputs as cmp
from speedbench.report import checkpoints
from speedbench.report.compare import compare_arms, compare_runs, print_comparison, render_comparison_html
from speedbench.report.headlines import arm_headlines
from speedbench.report.header import noise_lines
from speedbench.report.model import build_report
from speedbench.report.render import render_report
from speedbench.report.tables import fmt_speedup, speedup_tables
from speedbench.report.terminal import print_report, print_summary
from speedbench.results.loader import load_run

LOSSY_REASON = "2 of 2 divergences with the arm's token at least 0.5 nats below the target's (worst 3.10)"
FIGURES = {  # verdict -> (identical of 10, divergences, first divergence, checked, near-ties, reason)
    cmp.IDENTICAL: (10, 0, None, 0, 0, "10 of 10 identical"),
    cmp.NUMERICS: (9, 1, {"min": 37, "median": 37.0, "max": 37}, 1, 1,
                   "1 divergences, all near-ties (under 0.5 nats)"),
    cmp.LOSSY: (8, 2, {"min": 12, "median": 20.5, "max": 29}, 2, 0, LOSSY_REASON),
}


def entry(arm: str, c: int, verdict: str, floor: str = "", ref_c: int | None = None) -> dict:
    same, divs, first, checked, ties, reason = FIGURES[verdict]
    ref = {"arm": "baseline", "concurrency": c if ref_c is None else ref_c, "variant": ""}
    return {"arm": arm, "concurrency": c, "variant": "", "reference": ref, "floor": floor, "verdict": verdict,
            "reason": reason, "pairs": 10, "identical": same, "identical_fraction": same / 10,
            "divergences": divs, "first_divergence": first, "checked": checked, "near_ties": ties,
            "largest_margins": []}


def block(verdicts: dict[tuple[str, int], str], not_checked: str = "") -> dict:
    """summary.json's outputs block: the arms' points, then both floors."""
    points = [entry(arm, c, v) for (arm, c), v in verdicts.items()]
    points += [entry("baseline-aa", 1, cmp.IDENTICAL, "A/A"),
               entry("baseline", 4, cmp.NUMERICS, "batch shape", ref_c=1),
               entry("baseline", 16, cmp.IDENTICAL, "batch shape", ref_c=1)]
    out = {"near_tie_nats": 0.5, "top": 20, "checks_per_point": 32, "points": points}
    if not_checked:
        out["not_checked"] = not_checked
        for p in points:
            p.update(verdict=cmp.NOT_CHECKED, reason=not_checked, identical_fraction=None, pairs=0)
    return out


CLEAN = {(arm, c): cmp.IDENTICAL for arm in ("eagle3", "eagle3.1") for c in (1, 4, 16)} | {
    ("eagle3.1", 4): cmp.NUMERICS}
LOSSY_AT = CLEAN | {("eagle3", 4): cmp.LOSSY}


def with_outputs(root, verdicts: dict | None, seed: int = 0, not_checked: str = ""):
    """A run folder with an outputs block in its summary (None: none, as an older folder)."""
    rd = make_run(root, seed=seed, n_prompts=6)
    if verdicts is not None:
        s = json.loads(rd.summary_path.read_text())
        s["outputs"] = block(verdicts, not_checked)
        rd.write_summary(s)
    return load_run(rd.path)


@pytest.fixture(scope="module")
def lossy(tmp_path_factory):
    return with_outputs(tmp_path_factory.mktemp("lossy"), LOSSY_AT)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return with_outputs(tmp_path_factory.mktemp("clean"), CLEAN)


@pytest.fixture(scope="module")
def old(tmp_path_factory):
    return with_outputs(tmp_path_factory.mktemp("old"), None)


def figure(run, arm: str, c: int) -> str:
    r = next(r for t in speedup_tables(run) if t.arm == arm for r in t.rows if r.concurrency == c)
    return fmt_speedup(r.speedup, r.ci_low, r.ci_high)


def terminal(run, width: int = 250) -> str:
    c = Console(file=io.StringIO(), width=width, record=True, highlight=False, color_system=None)
    print_report(build_report(run), c)
    return c.export_text()


def lines_with(text: str, fig: str) -> list[str]:
    # markdown escapes brackets; compare on the plain figure
    return [ln.replace("\\", "") for ln in text.splitlines() if fig in ln.replace("\\", "")]


def test_speedup_cells_headline_and_opening_lines_mark_the_lossy_point(lossy):
    cells = {(t.arm, r.concurrency): (r.speedup_cell, r.outputs) for t in speedup_tables(lossy) for r in t.rows}
    assert cells[("eagle3", 4)][0].endswith("(outputs differ)") and cells[("eagle3", 4)][1] == "LOSSY (80% identical)"
    assert [k for k, (sp, _) in cells.items() if "outputs differ" in sp] == [("eagle3", 4)]
    assert cells[("eagle3", 1)][1] == "identical"
    assert cells[("eagle3.1", 4)][1] == "within numerics (90% identical)"
    heads = arm_headlines(lossy)
    assert heads[0].startswith("eagle3 (") and heads[0].endswith("; OUTPUTS DIFFER (lossy at c=4)")
    assert "OUTPUTS DIFFER" not in heads[1]
    named = [ln for ln in noise_lines(lossy) if ln.startswith("OUTPUTS DIFFER")]
    assert named == [f"OUTPUTS DIFFER: eagle3 c=4: {LOSSY_REASON}."]
    tally = next(ln for ln in noise_lines(lossy) if ln.startswith("Outputs compared"))
    assert "4 identical, 1 lossless within numerics, 1 LOSSY" in tally  # the floors are not in the tally


def test_terminal_marks_the_lossy_speedup_and_lists_outputs(lossy):
    out = terminal(lossy)
    assert all("(outputs differ)" in ln for ln in lines_with(out, figure(lossy, "eagle3", 4)))
    for arm, c in (("eagle3", 1), ("eagle3.1", 4), ("eagle3.1", 16)):
        assert not any("outputs differ" in ln for ln in lines_with(out, figure(lossy, arm, c))), (arm, c)
    assert "Outputs eagle3: c=1 identical, c=4 LOSSY (80% identical), c=16 identical" in out
    assert "Outputs A/A floor: baseline-aa c=1 identical" in out
    assert "batch-shape floor: baseline c=4 within numerics (90% identical)" in out
    detail = next(ln for ln in out.splitlines() if ln.startswith("  eagle3 c=4: lossy"))
    assert "identical 8 of 10 (80.0%), divergences 2, first at token 20.5 (12–29)" in detail
    narrow = terminal(lossy, 80)
    assert all(len(ln) <= 80 for ln in narrow.splitlines()) and "(outputs differ)" in narrow


def test_markdown_and_html_mark_the_lossy_speedup_and_show_the_outputs_section(lossy):
    md, html = render_report(lossy)
    assert all("(outputs differ)" in ln for ln in lines_with(md, figure(lossy, "eagle3", 4)))
    assert not any("outputs differ" in ln for ln in lines_with(md, figure(lossy, "eagle3", 1)))
    assert "## Outputs" in md and "| point | against | floor | verdict | identical |" in md
    assert (f"| eagle3 c=4 | baseline c=4 |  | LOSSY (outputs differ) | 8 of 10 (80.0%) | 2 | 20.5 (12–29) | "
            f"2 / 0 | {LOSSY_REASON} |") in md.replace("\\", "")
    assert "| baseline-aa c=1 | baseline c=1 | A/A floor (twin vs baseline) | identical |" in md
    assert "| baseline c=4 | baseline c=1 | batch-shape floor (baseline vs its lowest c) |" in md
    lossy_cell = re.search(r'<td class="big bad" title="([^"]*)">([^<]*)</td>', html)
    assert lossy_cell and lossy_cell.group(2) == f"{figure(lossy, 'eagle3', 4)} (outputs differ)"
    assert html.count('class="big bad"') == 1 and "<h2>Outputs</h2>" in html
    assert '<td class="bad" title=' in html and "LOSSY (80% identical)" in html


def test_identical_and_within_numerics_are_not_marked(clean):
    md, html = render_report(clean)
    out = terminal(clean) + terminal(clean, 80)
    for text in (md, html, out, *arm_headlines(clean), *noise_lines(clean)):
        assert "outputs differ" not in text.lower()
    assert "within numerics (90% identical)" in md and "within numerics (90% identical)" in out
    assert "class=\"big bad\"" not in html and "LOSSY (" not in md
    assert any(ln.startswith("Outputs compared prompt by prompt") and "5 identical, 1 lossless within numerics" in ln
               for ln in noise_lines(clean))


def test_an_old_summary_reads_not_recorded_everywhere(old):
    assert "outputs" not in old.summary
    cells = {r.outputs for t in speedup_tables(old) for r in t.rows}
    assert cells == {"not checked (not recorded)"}
    md, html = render_report(old)
    out = terminal(old, 80)
    for text in (md, html, out):
        assert "not checked (not recorded)" in text and "outputs differ" not in text.lower()
    assert any(ln.startswith("Outputs: not checked (not recorded)") for ln in noise_lines(old))
    assert all("OUTPUTS DIFFER" not in h for h in arm_headlines(old))
    buf = io.StringIO()
    print_summary(old.summary, Console(file=buf, width=120))  # a bare summary dict: no folder behind it
    assert "not checked (not recorded)" in buf.getvalue()


def test_sampling_says_outputs_cannot_be_compared(tmp_path):
    why = "sampling at temperature 0.7: outputs cannot be compared token for token"
    run = with_outputs(tmp_path, LOSSY_AT, not_checked=why)
    assert f"Outputs: not checked: {why}; the speedups stand without that check." in noise_lines(run)
    md, _ = render_report(run)
    assert f"Not checked: {why}." in md
    assert {r.outputs for t in speedup_tables(run) for r in t.rows} == {"not checked"}
    assert f"Outputs: not checked: {why}." in terminal(run)
    assert "outputs differ" not in md.lower()


def test_compare_runs_and_arms_show_the_verdict_and_mark_lossy(lossy, clean, capsys):
    cmp_runs = compare_runs([lossy, clean])
    sec = next(s for s in cmp_runs.sections if s.title == "Speedup: eagle3")
    assert sec.headers[-2:] == ["R1 outputs", "R2 outputs"]
    rows = {r[0]: r for r in sec.rows}
    assert rows["4"][1].endswith("(outputs differ)") and "outputs differ" not in rows["4"][2]
    assert rows["4"][-2:] == ["LOSSY (80% identical)", "identical"]
    assert not any("outputs differ" in rows[c][1] for c in ("1", "16"))
    arms = {r[0]: r for r in compare_arms(lossy, "eagle3", "eagle3.1").sections[0].rows}
    assert arms["4"][1].endswith("(outputs differ)") and "outputs differ" not in arms["4"][2]
    assert arms["4"][-2:] == ["LOSSY (80% identical)", "within numerics (90% identical)"]
    print_comparison(cmp_runs, Console(width=400, highlight=False, color_system=None))
    assert "(outputs differ)" in capsys.readouterr().out
    assert "(outputs differ)" in render_comparison_html(cmp_runs)


def test_compare_reads_an_old_run_as_not_recorded(old, clean):
    sec = next(s for s in compare_runs([old, clean]).sections if s.title == "Speedup: eagle3")
    assert all(r[-2:] == ["not checked (not recorded)", "identical"] for r in sec.rows)


def test_compare_checkpoints_marks_a_lossy_night(tmp_path, lossy, old):
    runs = [with_outputs(tmp_path / f"n{i}", CLEAN, seed=i) for i in range(2)] + [lossy]
    comps = checkpoints.compare_all({"cpu_tiny": runs})
    text = checkpoints.text_lines(comps)
    e3 = next(x for x in text if x.strip().startswith("speedup (client clock) c=4") and "LOSSY" in x)
    assert "outputs OUTPUTS DIFFER: LOSSY on 1 of 3 nights, identical on 2 of 3 nights, lowest 80% identical" in e3
    assert any("c=1" in x and "outputs identical on 3 of 3 nights" in x for x in text)
    ck = next(c for c in checkpoints.as_json(comps)[0]["checkpoints"] if c["checkpoint"].startswith("eagle3 ·"))
    c4 = next(p for p in ck["pooled"] if p["point"] == "c=4")
    assert [n["verdict"] for n in c4["outputs"]] == [cmp.IDENTICAL, cmp.IDENTICAL, cmp.LOSSY]
    olds = checkpoints.text_lines(checkpoints.compare_all({"cpu_tiny": [old]}))
    assert any("outputs not checked (not recorded) on 1 of 1 nights" in x for x in olds)
