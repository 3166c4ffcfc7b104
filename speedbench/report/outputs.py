"""Each point's outputs verdict, worded for the views: the compact cell beside a speedup,
the mark on a lossy point's speedup, the report's opening lines, its Outputs section and
the terminal's few lines.

At temperature 0 speculative decoding must return the target's own tokens: a speedup
with other outputs is no speedup, so every view that shows one shows this beside it.
metrics/outputs.py decides the verdicts and results/output_summary.py stores them; this
module reads them only through ``Run.outputs_of`` / ``Run.outputs`` (an old folder reads
"not checked (not recorded)") and only words them.
"""

from __future__ import annotations

from typing import Any

from speedbench.metrics import outputs as cmp
from speedbench.metrics.stored_outputs import OutputsEntry
from speedbench.results import Run

DIFFER = "outputs differ"  # the mark on a lossy point's speedup, wherever it is shown
SHORT = {cmp.IDENTICAL: "identical", cmp.NUMERICS: "within numerics", cmp.LOSSY: "LOSSY",
         cmp.NOT_CHECKED: "not checked"}
NOT_RECORDED = "not recorded"
OLD_FOLDER = ("Outputs: not checked (not recorded): a run folder from before outputs were kept and compared, "
              "so nothing says its speculative arms returned the target's own tokens.")
HEADERS = ("point", "against", "floor", "verdict", "identical", "divergences", "first divergence (median token)",
           "checked / near-ties", "why")
FLOORS = {"A/A": "A/A floor (twin vs baseline)", "batch shape": "batch-shape floor (baseline vs its lowest c)"}


def lossy_reason(run: Run, arm: str, concurrency: int, variant: str = "") -> str:
    """Why the point's outputs differ from its reference's; "" when they do not (or were not checked)."""
    e = run.outputs_of(arm, concurrency, variant)
    return str(e.reason or "lossy") if e.lossy else ""


def mark(run: Run, row: Any) -> str:
    """What follows a summary row's speedup in a table: " (outputs differ)" where the
    point is lossy, "" otherwise."""
    if row.arm is None or row.concurrency is None:
        return ""
    return f" ({DIFFER})" if lossy_reason(run, str(row.arm), int(row.concurrency), str(row.variant or "")) else ""


def percent(e: OutputsEntry) -> str:
    f = e.identical_fraction
    return "" if f is None else f"{100 * float(f):.0f}% identical"


def word(e: OutputsEntry) -> str:
    """The verdict in a word or two: "identical", "within numerics", "LOSSY", "not checked"
    ("not checked (not recorded)" for a folder from before outputs were compared)."""
    v = e.verdict_text
    if v == cmp.NOT_CHECKED and e.reason == NOT_RECORDED:
        return f"{SHORT[v]} ({NOT_RECORDED})"
    return SHORT.get(v, v)


def short(e: OutputsEntry) -> str:
    """The compact cell beside a speedup: :func:`word`, with the identical fraction where
    some outputs differ ("within numerics (92% identical)", "LOSSY (80% identical)")."""
    pct = percent(e)
    return f"{word(e)} ({pct})" if pct and e.verdict_text in (cmp.NUMERICS, cmp.LOSSY) else word(e)


def cell(run: Run, arm: str, concurrency: int, variant: str = "") -> str:
    return short(run.outputs_of(arm, concurrency, variant))


def _floor(e: OutputsEntry) -> str:
    """The floor an entry measures, in a few words ("A/A floor"); "" for an arm's point."""
    return FLOORS.get(str(e.floor or ""), "").split(" (")[0]


def _where(e: OutputsEntry) -> str:
    return e.key.label + (f" ({_floor(e)})" if _floor(e) else "")


def _arms_first(run: Run) -> list[OutputsEntry]:
    """Every point's entry, the arms' points first and the floors after them."""
    entries = list(run.outputs.values())
    return sorted(entries, key=lambda e: bool(e.floor))


def opening_lines(run: Run) -> list[str]:
    """The report's opening lines on outputs: what was compared, a tally, and each lossy point named."""
    block = run.outputs_block
    if block is None:
        return [OLD_FOLDER]
    if block.not_checked:
        return [f"Outputs: not checked: {block.not_checked}; the speedups stand without that check."]
    arms = [e for e in _arms_first(run) if not e.floor]
    counts = {v: sum(e.verdict_text == v for e in arms) for v in (cmp.IDENTICAL, cmp.NUMERICS, cmp.LOSSY,
                                                                  cmp.NOT_CHECKED)}
    tally = ", ".join(f"{n} {v if v != cmp.LOSSY else 'LOSSY'}" for v, n in counts.items() if n) or "no points"
    lossy = [e for e in _arms_first(run) if e.lossy]
    line = (f"Outputs compared prompt by prompt with the baseline's at the same load: {tally}."
            + (f" {len(lossy)} point(s) LOSSY: at temperature 0 speculative decoding must return the target's "
               f"own tokens, so each is marked \"{DIFFER}\" beside its speedup." if lossy else ""))
    return [line] + [f"OUTPUTS DIFFER: {_where(e)}: {e.reason}." for e in lossy]


def _count(v: int | None) -> str:
    return "–" if v is None else str(v)


def _first(e: OutputsEntry) -> str:
    fd = e.first_divergence
    if fd is None:
        return "–"
    return f"{float(fd.median or 0):g} ({fd.min}–{fd.max})"


def _identical(e: OutputsEntry) -> str:
    if not e.pairs:
        return "–"
    return f"{e.identical} of {e.pairs} ({100 * float(e.identical_fraction or 0):.1f}%)"


def _checked(e: OutputsEntry) -> str:
    return "–" if e.checked is None else f"{e.checked} / {_count(e.near_ties)}"


def row(e: OutputsEntry) -> list[str]:
    """One point's row of the Outputs section (HEADERS)."""
    v = e.verdict_text
    against = e.reference.key.label if e.reference is not None else "–"
    return [e.key.label, against, FLOORS.get(str(e.floor or ""), ""),
            "LOSSY (" + DIFFER + ")" if v == cmp.LOSSY else v, _identical(e), _count(e.divergences), _first(e),
            _checked(e), e.reason_text]


def section_rows(run: Run) -> list[list[str]]:
    return [row(e) for e in _arms_first(run)]


def section_note(run: Run) -> str:
    """What the Outputs section compares and how a verdict is reached; the block's own
    figures (its near-tie threshold) where it has them."""
    block = run.outputs_block
    nats = block.near_tie_nats if block is not None and block.has("near_tie_nats") else cmp.NEAR_TIE_NATS
    note = ("At temperature 0 speculative decoding must return the target's own tokens. Each point's outputs are "
            "compared prompt by prompt with the baseline's at the same load. At a divergence the target's top "
            f"tokens decide: the arm's token {nats:g} nats or more below the baseline's is a loss (LOSSY), less is "
            "a near-tie that numerics flip (lossless within numerics). The floors show what numerics alone do: "
            "the A/A twin against the baseline (the same computation twice) and the baseline against its own "
            "lowest concurrency (batch shape). First divergence: tokens in common before it, median (min–max).")
    if block is not None and block.not_checked:
        note = f"Not checked: {block.not_checked}. " + note
    return note


def brief_lines(run: Run) -> list[str]:
    """The terminal's few lines: per arm its verdict at each load, the floors, and each
    arm's point that is not identical with its figures and reason (report.md and
    report.html give every point's, the floors' too)."""
    block = run.outputs_block
    if block is None:  # the opening lines say why at length
        return [f"Outputs: not checked ({NOT_RECORDED})."]
    if block.not_checked:
        return [f"Outputs: not checked: {block.not_checked}."]
    if not run.outputs:
        return ["Outputs: no point was compared (no baseline arm to compare with)."]
    groups: dict[str, list[str]] = {}
    for e in _arms_first(run):
        where = f"{e.arm} c={e.concurrency}" if e.floor else f"c={e.concurrency}"
        groups.setdefault(_floor(e) or str(e.arm), []).append(where + (f" [{e.variant}]" if e.variant else "")
                                                              + " " + short(e))
    out = [f"Outputs {name}: " + ", ".join(cells) for name, cells in groups.items()]
    for e in _arms_first(run):  # the arms' points that are not identical, with their figures
        if e.verdict_text != cmp.IDENTICAL and not e.floor:
            out.append(f"  {_where(e)}: {e.verdict_text}: {e.reason}; identical {_identical(e)}, divergences "
                       f"{_count(e.divergences)}, first at token {_first(e)}, checked / near-ties {_checked(e)}")
    return out
