"""summary.json's ``outputs`` block: each point's outputs against its reference, and a verdict.

Read from the run folder alone: each round's outputs file (results/outputs.py), its
reference's (results/outputs.py's ``reference`` and ``round_pair``), and the check pass's
answers (outputs/checks.json, read once). Rounds are
pooled per point. A folder from before outputs were kept loads with ``not checked (not
recorded)``; so does a point whose engine sent no token ids, with that reason. Written as
plain dicts; read back typed (metrics/stored_outputs.py's OutputsBlock, served by Run).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from speedbench.metrics import outputs as cmp
from speedbench.metrics.stored_outputs import CheckAnswer, Margin, OutputsBlock, OutputsEntry, read_checks
from speedbench.records import PointKey
from speedbench.results import outputs as files

_KEEP_LOSSES = 5  # the worst divergences a point's entry lists


def outputs_block(run_dir: Any, baseline: str | None, temperature: float,
                  aa_arm: str | None = None) -> dict[str, Any]:
    rounds = run_dir.rounds()
    found = files.round_files(rounds)
    every = sorted({k for k, _ in rounds}, key=lambda k: (k.arm, k.variant, k.concurrency))
    block: dict[str, Any] = {"near_tie_nats": cmp.NEAR_TIE_NATS, "top": cmp.TOP,
                             "checks_per_point": cmp.CHECKS_PER_POINT, "points": []}
    why_not = (f"sampling at temperature {temperature:g}: outputs cannot be compared token for token"
               if temperature > 0 else "")
    if why_not:
        block["not_checked"] = why_not
    checks = read_checks(run_dir.read_json(files.CHECKS, []))  # every arm's, read once
    for key in every:
        ref = files.reference(key, baseline, every)
        if ref is None:
            continue
        done = sorted(rep for (k, rep), e in rounds.items() if k == key and e.done)
        entry = _point(run_dir.path, found, key, done, ref, why_not, checks)
        entry["floor"] = "A/A" if key.arm == aa_arm else ("batch shape" if key.arm == baseline else "")
        block["points"].append(entry)
    return block


def _point(root: Path, found: files.RoundFiles, key: PointKey, done: list[int], ref: PointKey, why_not: str,
           saved: list[CheckAnswer]) -> dict[str, Any]:
    """One point's entry, pooled over its finished rounds (``done``, in round order)."""
    pairs = same = 0
    divs: list[cmp.Divergence] = []
    checks: list[CheckAnswer] = []
    why = why_not
    for rep in done:
        mine, theirs, missing = files.round_pair(root, found, key, rep, ref)
        if mine is None or theirs is None:
            why = why or missing
            continue
        c = cmp.compare(mine, theirs)
        pairs, same, divs = pairs + c.pairs, same + c.identical, divs + list(c.divergences)
        checks += _checks(saved, key, rep, c)
    pooled = cmp.Comparison(pairs, same, tuple(divs)) if pairs else None
    verdict, reason = cmp.verdict(pooled, [] if why_not else checks, why or "not recorded")
    return {"arm": key.arm, "concurrency": key.concurrency, "variant": key.variant,
            "reference": {"arm": ref.arm, "concurrency": ref.concurrency, "variant": ref.variant},
            "verdict": verdict, "reason": reason, **_figures(pooled, checks)}


def _checks(saved: list[CheckAnswer], key: PointKey, rep: int, c: cmp.Comparison) -> list[CheckAnswer]:
    """The check pass's answers (``saved``) for this round's divergences (matched by request)."""
    mine = {(e.prompt_index, e.turn): e for e in saved
            if (e.arm, e.concurrency, e.variant, e.repeat) == (key.arm, key.concurrency, key.variant, rep)}
    out = []
    for d in c.divergences:
        e = mine.get((d.prompt_index, d.turn))
        if e is not None and e.position == d.position:
            out.append(e)
    return out


def _figures(c: cmp.Comparison | None, checks: list[CheckAnswer]) -> dict[str, Any]:
    if c is None:
        return {"pairs": 0, "identical": 0, "identical_fraction": None}
    pos = np.asarray([d.position for d in c.divergences], dtype=float)
    margins = [ch for ch in checks if ch.margin is not None]
    worst = sorted(margins, key=lambda ch: -(ch.margin or 0.0))[:_KEEP_LOSSES]
    return {
        "pairs": c.pairs, "identical": c.identical, "identical_fraction": c.identical_fraction,
        "divergences": len(c.divergences),
        "first_divergence": ({"min": int(pos.min()), "median": float(np.median(pos)), "max": int(pos.max())}
                             if pos.size else None),
        "checked": len(margins),
        "near_ties": sum(1 for ch in margins if cmp.is_loss(ch.margin, bool(ch.exact)) is False),
        "largest_margins": [Margin(prompt_index=ch.prompt_index, turn=ch.turn, position=ch.position, margin=ch.margin,
                                   exact=ch.exact).to_dict() for ch in worst],
    }


# A point without an entry of its own (the typed entries' keys in their stored order):
# before outputs were kept, nothing was recorded; the baseline's lowest point of each
# workload is what its other points are held against (results/outputs.py's ``reference``).
_BARE = ("verdict", "reason", "identical_fraction")
NOT_RECORDED = OutputsEntry(verdict=cmp.NOT_CHECKED, reason="not recorded", order=_BARE)
THE_REFERENCE = OutputsEntry(verdict=cmp.NOT_CHECKED, order=_BARE,
                             reason="the reference: the baseline's other points are held against it")


def point_outputs(block: OutputsBlock | None) -> dict[PointKey, OutputsEntry]:
    """Each point's entry in a summary's ``outputs`` block, by point; the one reader every
    view uses (Run.outputs). A point missing here reads as :func:`missing` says."""
    return {e.key: e for e in (block.points or ()) if e.arm is not None} if block is not None else {}


def missing(block: OutputsBlock | None, baseline: str | None, key: PointKey) -> OutputsEntry:
    """What a point without an entry reads: :data:`THE_REFERENCE` for the baseline's point
    in a summary that has the block (its lowest, held against nothing), else :data:`NOT_RECORDED`."""
    if block is not None and block.points is not None and key.arm == baseline:
        return THE_REFERENCE
    return NOT_RECORDED


# The columns every table export adds per point (formats.table_rows), from its entry.
OUTPUT_COLUMNS = ("outputs_verdict", "outputs_identical_fraction", "outputs_reason")


def output_columns(entry: OutputsEntry) -> dict[str, Any]:
    """A point's outputs entry as the exports' columns: verdict, identical fraction (None
    where nothing was compared), reason."""
    return {"outputs_verdict": entry.verdict_text, "outputs_identical_fraction": entry.fraction,
            "outputs_reason": entry.reason_text}


def outputs_reader(block: OutputsBlock | None, baseline: str | None) -> Callable[[str, int, str], OutputsEntry]:
    """``(arm, concurrency, variant) -> entry`` over a summary's typed block: ``Run.outputs_of``."""
    found = point_outputs(block)

    def of(arm: str, concurrency: int, variant: str = "") -> OutputsEntry:
        key = PointKey(arm, int(concurrency), variant or "")
        return found.get(key) or missing(block, baseline, key)

    return of


def summary_outputs(summary: Mapping[str, Any]) -> Callable[[str, int, str], OutputsEntry]:
    """:func:`outputs_reader` over a summary dict as it is written, for a writer that holds
    no Run (RunDir.write_summary's summary.csv)."""
    return outputs_reader(OutputsBlock.read(summary), summary.get("baseline"))
