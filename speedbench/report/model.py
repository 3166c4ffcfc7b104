"""The report model: everything report.md, report.html and the terminal show of one run,
as plain data, built once by :func:`build_report`.

A :class:`Report` holds the head (scenario, run id, hardware, noise lines, headlines) and
an ordered tuple of :class:`Section` s, each with its key, title, note and content: a
:class:`Table`, :class:`Lines`, the speedup tables, titled tables or the plots' data. A
section a run has nothing for (no rate points, no screening, no failures) is absent. The
renderers (markdown.py, html.py, terminal.py) only format it, each skipping the sections
it does not show; titles and notes are declared here, once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import cached_property

from speedbench.metrics.cells import al_of, num
from speedbench.report import breakdowns, facts, header, headlines, notes, tables
from speedbench.report import outputs as outs
from speedbench.results import Run

REPORT_TITLE = "speedbench report"

NO_SPEEDUP_NOTE = "No speculative arm with a baseline in this run."
NO_SPEEDUP_NOTE_HTML = "No speculative arm with a baseline."

SCREEN_NOTE = ("Screening: each arm's server ran once, at one concurrency, with no baseline. The speedups "
               "are predicted from AL by the system's calibration, not measured (docs/metrics.md, "
               "\"Calibration and screening\").")

RATE_NOTE = ("Open loop: requests arrive on a fixed-seed schedule (the same in every arm) whatever is in flight. "
             "Speedup: per-user TPS against the baseline at the same rate. Goodput: requests meeting every SLO "
             "of the scenario's `slo:` per second of the point; within SLO: their share of all requests.")

LATENCY_NOTE = ("Over ok measured requests, in ms. TTFT, TPOT and E2E: one value per request. "
                "ITL per token: each inter-chunk gap divided by the chunk's tokens, counted once per token; "
                "ITL per chunk: one value per gap. std is the population standard deviation.")

CATEGORY_AL_NOTE = ("Mean over requests of each request's AL, the definition SPEED-Bench publishes per category "
                    "(the main table also gives the AL pooled over steps and from Prometheus).")

CATEGORY_NOTE = ("Ok measured requests of each category. Speedup: per-user TPS against the baseline arm's requests "
                 "of the same category at the same concurrency, paired by prompt, with a 95% bootstrap CI, on the "
                 "point's headline clock (marked (engine) where that is the engine's). "
                 "AL pooled over steps: 1 + Σaccepted / Σsteps; AL mean over requests: SPEED-Bench's per-category "
                 "definition.")

PROMPT_NOTE = ("One row per question_id of each speculative point (every turn and repeat of the prompt pooled), "
               "the lowest speedup first: where a regression comes from.")

# report.md and report.html word the conditional probability differently; each keeps its own.
POSITION_NOTE = "Joint: P(at least i drafts accepted in a step). Conditional: P(position i accepted | i-1 accepted)."
POSITION_NOTE_HTML = ("Joint: P(at least i drafts accepted in a step). "
                      "Conditional: P(position i accepted | position i-1 accepted).")


@dataclass(frozen=True)
class Table:
    """Rows of strings under ``headers``; ``align``: one "l" (text) or "r" (number) per column."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align: str
    title: str = ""

    @property
    def left(self) -> int:
        """How many leading columns hold text."""
        return len(self.align) - len(self.align.lstrip("l"))


@dataclass(frozen=True)
class Lines:
    """Lines of text; ``bulleted``: a list of items rather than paragraphs."""

    lines: tuple[str, ...]
    bulleted: bool = False


@dataclass(frozen=True)
class Speedups:
    """The published-shape speedup tables, one per speculative arm and variant."""

    tables: tuple[tables.SpeedupTable, ...]


@dataclass(frozen=True)
class Tables:
    """Titled tables under one heading (per question: one per speculative point)."""

    tables: tuple[Table, ...]


@dataclass(frozen=True)
class Plots:
    """What the report's plots draw, keyed by arm label (arm [variant])."""

    labels: tuple[str, ...]  # every arm and variant, in colour order
    tps: dict[str, list[tuple[int, float]]]  # per-user TPS per concurrency
    speedups: dict[str, list[tuple[int, float, float, float]]]  # (c, speedup, CI low, CI high)
    references: dict[str, list[tuple[int, float]]]  # reference speedups, keyed by arm
    groups: list[str]  # "c=1", ...
    al: dict[str, dict[str, float]]  # AL pooled over steps per arm and group
    positions: dict[str, tuple[list[float], list[float]]]  # (joint, conditional)
    categories: list[str]
    category_al: dict[str, dict[str, float]]  # AL mean over requests per arm and category
    category_reference: dict[str, float]


Content = Table | Lines | Speedups | Tables | Plots


@dataclass(frozen=True)
class Section:
    """One part of the report. ``html_note``: report.html's wording of the note where it
    differs from the others' ("" for none there); None: the same."""

    key: str
    title: str
    content: Content
    note: str = ""
    html_note: str | None = None

    @property
    def page_note(self) -> str:
        return self.note if self.html_note is None else self.html_note


@dataclass(frozen=True)
class Report:
    scenario: str
    run_id: str
    created: str  # "" when unknown
    hardware: str
    baseline: str | None
    noise: tuple[str, ...]  # header.noise_lines: read before any speedup
    headlines: tuple[str, ...]  # one verdict line per speculative arm
    sections: tuple[Section, ...]

    def section(self, key: str) -> Section | None:
        return next((s for s in self.sections if s.key == key), None)


def table(headers: list[str], rows: list[list[str]], align: str | None = None, title: str = "") -> Table:
    """A :class:`Table` from a builder's lists; ``align`` defaults to text then numbers."""
    return Table(tuple(headers), tuple(tuple(r) for r in rows), align or "l" + "r" * (len(headers) - 1), title)


class _Facts:
    """What several sections share, each built once, when first needed."""

    def __init__(self, run: Run):
        self.run = run

    @cached_property
    def speedups(self) -> tuple[tables.SpeedupTable, ...]:
        return tuple(tables.speedup_tables(self.run))

    @cached_property
    def category_al(self) -> tuple[list[str], dict[tuple[str, str], dict[str, float]]]:
        return tables.category_al(self.run)

    @cached_property
    def category_reference(self) -> list[float]:
        return [tables.reference_al(self.run, c) for c in self.category_al[0]]

    @cached_property
    def curves(self) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
        return tables.position_curves(self.run)


def _speedup(f: _Facts) -> Section:
    if f.speedups:
        return Section("speedup", "Speedup", Speedups(f.speedups))
    return Section("speedup", "Speedup", Speedups(()), NO_SPEEDUP_NOTE, NO_SPEEDUP_NOTE_HTML)


def _outputs(f: _Facts) -> Section:
    """Each point's outputs against its reference, the floors labelled (report/outputs.py);
    a folder from before outputs were compared says so in one line."""
    rows = outs.section_rows(f.run)
    if f.run.outputs_block is None:
        return Section("outputs", "Outputs", Lines((outs.OLD_FOLDER,)))
    if not rows:
        return Section("outputs", "Outputs", Lines(tuple(outs.brief_lines(f.run))))
    return Section("outputs", "Outputs", table(list(outs.HEADERS), rows, "lll" + "l" + "r" * 4 + "l"),
                   outs.section_note(f.run))


def _outputs_brief(f: _Facts) -> Section:
    """The terminal's few lines on outputs (report.md and report.html show the table)."""
    return Section("outputs_brief", "Outputs", Lines(tuple(outs.brief_lines(f.run))))


def _per_arm(f: _Facts) -> Section | None:
    """The terminal's table when there is no speedup to show."""
    if f.speedups:
        return None
    return Section("per_arm", "per-arm results",
                   table(breakdowns.PLAIN_HEADERS, breakdowns.plain_rows(f.run), "lrrrrrl"))


def _screening(f: _Facts) -> Section | None:
    heads, rows = breakdowns.screening_table(f.run)
    return Section("screening", "Screening", table(heads, rows), SCREEN_NOTE) if rows else None


def _warnings(f: _Facts) -> Section | None:
    warnings = notes.run_warnings(f.run)
    return Section("warnings", "Warnings (one per cause)", Lines(tuple(warnings), bulleted=True)) if warnings else None


def _measured(f: _Facts) -> Section:
    return Section("measured", "What was measured", Lines(tuple(notes.measured_lines(f.run))))


def _rate(f: _Facts) -> Section | None:
    rows = breakdowns.rate_table(f.run)
    if not rows:
        return None
    return Section("rate", "Request rate (open loop)", table(breakdowns.RATE_HEADERS, rows), RATE_NOTE)


def _plots(f: _Facts) -> Section:
    run = f.run
    tps: dict[str, list[tuple[int, float]]] = {}
    al: dict[str, dict[str, float]] = {}
    for r in run.rows:
        lab = tables.label(str(r.arm), str(r.variant or ""))
        tps.setdefault(lab, []).append((int(r.concurrency), num(r.per_user_tps_mean)))
        if tables.is_speculative(r):
            al.setdefault(lab, {})[f"c={r.concurrency}"] = al_of(r)[0]
    speed, ref = {}, {}
    for t in f.speedups:
        speed[tables.label(t.arm, t.variant)] = [(r.concurrency, r.speedup, r.ci_low, r.ci_high) for r in t.rows]
        pts = [(r.concurrency, r.reference) for r in t.rows if math.isfinite(r.reference)]
        if pts:
            ref[t.arm] = pts
    cats, cat_al = f.category_al
    return Section("plots", "Plots", Plots(
        labels=tuple(tables.label(a, v) for a in run.arms() for v in tables.variants(run)),
        tps=tps, speedups=speed, references=ref, groups=[f"c={c}" for c in tables.concurrencies(run)], al=al,
        positions={tables.label(*k): v for k, v in f.curves.items()}, categories=cats,
        category_al={tables.label(*k): v for k, v in cat_al.items()},
        category_reference=dict(zip(cats, f.category_reference))))


def _points(f: _Facts) -> Section:
    return Section("points", "All points", table(breakdowns.DETAIL_HEADERS, breakdowns.detail_rows(f.run),
                                                 "lllrrrrrrrr"))


def _failures(f: _Facts) -> Section | None:
    rows = [[str(r.arm), str(r.concurrency), str(r.failure)] for r in f.run.rows if r.failure]
    return Section("failures", "Failures", table(["arm", "concurrency", "failure"], rows, "lrl")) if rows else None


def _latency(f: _Facts) -> Section | None:
    headers, rows = breakdowns.latency_table(f.run)
    if not rows:
        return None
    return Section("latency", "Latency distributions", table(headers, rows, "lll" + "r" * (len(headers) - 3)),
                   LATENCY_NOTE)


def _category_al(f: _Facts) -> Section | None:
    cats, al = f.category_al
    headers, rows = breakdowns.category_rows(cats, al, f.category_reference, tables.reference_arm(f.run))
    if not rows:
        return None
    return Section("category_al", "Acceptance length per category", table(headers, rows), CATEGORY_AL_NOTE, "")


def _category(f: _Facts) -> Section | None:
    rows = breakdowns.category_table(f.run)
    if not rows:
        return None
    heads = breakdowns.CATEGORY_HEADERS
    return Section("category", "Per category", table(heads, rows, "lll" + "r" * (len(heads) - 3)), CATEGORY_NOTE)


def _prompts(f: _Facts) -> Section | None:
    found = breakdowns.prompt_tables(f.run)
    if not found:
        return None
    heads = breakdowns.PROMPT_HEADERS
    return Section("prompts", "Per question", Tables(tuple(
        table(heads, rows, "ll" + "r" * (len(heads) - 2), title) for title, rows in found)), PROMPT_NOTE)


def _positions(f: _Facts) -> Section | None:
    headers, rows = breakdowns.position_rows(f.curves)
    if not rows:
        return None
    return Section("positions", "Per-position acceptance", table(headers, rows, "ll" + "r" * (len(headers) - 2)),
                   POSITION_NOTE, POSITION_NOTE_HTML)


# Every section, in report order; each builder returns None when the run has nothing for it.
SECTIONS: tuple[tuple[str, Callable[[_Facts], Section | None]], ...] = (
    ("speedup", _speedup), ("outputs", _outputs), ("outputs_brief", _outputs_brief),
    ("per_arm", _per_arm), ("screening", _screening), ("warnings", _warnings),
    ("measured", _measured), ("rate", _rate), ("plots", _plots), ("points", _points), ("failures", _failures),
    ("latency", _latency), ("category_al", _category_al), ("category", _category), ("prompts", _prompts),
    ("positions", _positions),
)


def build_report(run: Run, only: Collection[str] | None = None) -> Report:
    """The report model of a run: each table builder called once. ``only``: the keys of
    the sections to build (a renderer that shows a few need not pay for the rest)."""
    f = _Facts(run)
    built = (build(f) for key, build in SECTIONS if only is None or key in only)
    return Report(scenario=run.scenario_name, run_id=run.run_id, created=run.created_utc,
                  hardware=facts.hardware(run), baseline=run.baseline, noise=tuple(header.noise_lines(run)),
                  headlines=tuple(headlines.arm_headlines(run, speedups=f.speedups)),
                  sections=tuple(s for s in built if s is not None))
