"""summary.json's ``outputs`` block: each point's outputs against its reference, and a verdict.

Read from the run folder alone: each round's outputs file (results/outputs.py), its
reference's (results/outputs.py's ``reference`` and ``round_pair``), and the check pass's
answers (outputs/checks.json, read once). Rounds are
pooled per point. A folder from before outputs were kept loads with ``not checked (not
recorded)``; so does a point whose engine sent no token ids, with that reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from speedbench.metrics import outputs as cmp
from speedbench.records import PointKey
from speedbench.results import outputs as files

_KEEP_LOSSES = 5  # the worst divergences a point's entry lists


def outputs_block(run_dir: Any, baseline: str | None, temperature: float, aa_arm: str | None = None) -> dict[str, Any]:
    rounds = run_dir.point_rounds()
    every = sorted({k for k, _ in rounds}, key=lambda k: (k.arm, k.variant, k.concurrency))
    block: dict[str, Any] = {"near_tie_nats": cmp.NEAR_TIE_NATS, "top": cmp.TOP,
                             "checks_per_point": cmp.CHECKS_PER_POINT, "points": []}
    if temperature > 0:
        block["not_checked"] = (f"sampling at temperature {temperature:g}: outputs cannot be compared token "
                                "for token")
    checks = run_dir.read_json(files.CHECKS, []) or []  # every arm's, read once
    for key in every:
        ref = files.reference(key, baseline, every)
        if ref is None:
            continue
        entry = _point(run_dir, rounds, key, ref, block.get("not_checked", ""), checks)
        entry["floor"] = "A/A" if key.arm == aa_arm else ("batch shape" if key.arm == baseline else "")
        block["points"].append(entry)
    return block


def _point(run_dir: Any, rounds: dict, key: PointKey, ref: PointKey, why_not: str,
           saved: list[dict[str, Any]]) -> dict[str, Any]:
    pairs = same = 0
    divs: list[cmp.Divergence] = []
    checks: list[dict[str, Any]] = []
    why = why_not
    for (k, rep), e in sorted(rounds.items(), key=lambda kv: kv[0][1]):
        if k != key or e.get("status") not in ("ok", "partial"):
            continue
        mine, theirs, missing = files.round_pair(run_dir.path, rounds, e, ref, rep)
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


def _checks(saved: list[dict[str, Any]], key: PointKey, rep: int, c: cmp.Comparison) -> list[dict[str, Any]]:
    """The check pass's answers (``saved``) for this round's divergences (matched by request)."""
    mine = {(e.get("prompt_index"), e.get("turn")): e for e in saved
            if (e.get("arm"), e.get("concurrency"), e.get("variant", ""), e.get("repeat")) ==
            (key.arm, key.concurrency, key.variant, rep)}
    out = []
    for d in c.divergences:
        e = mine.get((d.prompt_index, d.turn))
        if e is not None and e.get("position") == d.position:
            out.append(e)
    return out


def _figures(c: cmp.Comparison | None, checks: list[dict[str, Any]]) -> dict[str, Any]:
    if c is None:
        return {"pairs": 0, "identical": 0, "identical_fraction": None}
    pos = np.asarray([d.position for d in c.divergences], dtype=float)
    margins = [ch for ch in checks if ch.get("margin") is not None]
    worst = sorted(margins, key=lambda ch: -float(ch["margin"]))[:_KEEP_LOSSES]
    return {
        "pairs": c.pairs, "identical": c.identical, "identical_fraction": c.identical_fraction,
        "divergences": len(c.divergences),
        "first_divergence": ({"min": int(pos.min()), "median": float(np.median(pos)), "max": int(pos.max())}
                             if pos.size else None),
        "checked": len(margins),
        "near_ties": sum(1 for ch in margins if cmp.is_loss(ch["margin"], bool(ch.get("exact"))) is False),
        "largest_margins": [{k: ch.get(k) for k in ("prompt_index", "turn", "position", "margin", "exact")}
                            for ch in worst],
    }


NOT_RECORDED = {"verdict": cmp.NOT_CHECKED, "reason": "not recorded", "identical_fraction": None}
# The baseline's lowest point of each workload has no entry of its own: it is what the
# baseline's other points are held against (results/outputs.py's ``reference``).
THE_REFERENCE = {"verdict": cmp.NOT_CHECKED, "reason": "the reference: the baseline's other points are held against it",
                 "identical_fraction": None}


def point_outputs(summary: dict[str, Any]) -> dict[PointKey, dict[str, Any]]:
    """Each point's ``outputs`` entry from a summary, by point; the one reader every view
    uses. A point missing here (a folder from before outputs were kept) is
    :data:`NOT_RECORDED`: use ``point_outputs(s).get(key) or missing(s, key)``."""
    block = summary.get("outputs") or {}
    return {PointKey(e["arm"], int(e["concurrency"]), e.get("variant") or ""): e
            for e in block.get("points") or [] if isinstance(e, dict) and "arm" in e}


def missing(summary: dict[str, Any], key: PointKey) -> dict[str, Any]:
    """What a point without an entry reads: :data:`THE_REFERENCE` for the baseline's point
    in a summary that has the block (its lowest, held against nothing), else :data:`NOT_RECORDED`."""
    block = summary.get("outputs")
    if isinstance(block, dict) and isinstance(block.get("points"), list) and key.arm == summary.get("baseline"):
        return THE_REFERENCE
    return NOT_RECORDED


# The columns every table export adds per point (formats.table_rows), from its entry.
OUTPUT_COLUMNS = ("outputs_verdict", "outputs_identical_fraction", "outputs_reason")


def output_columns(entry: dict[str, Any]) -> dict[str, Any]:
    """A point's outputs entry as the exports' columns: verdict, identical fraction (None
    where nothing was compared), reason."""
    frac = entry.get("identical_fraction")
    return {"outputs_verdict": str(entry.get("verdict") or cmp.NOT_CHECKED),
            "outputs_identical_fraction": float(frac) if isinstance(frac, (int, float)) else None,
            "outputs_reason": str(entry.get("reason") or "")}


def outputs_reader(summary: dict[str, Any]) -> Callable[[str, int, str], dict[str, Any]]:
    """``(arm, concurrency, variant) -> entry`` over a summary dict: ``Run.outputs_of`` for
    a writer that holds no Run (RunDir.write_summary's summary.csv)."""
    found = point_outputs(summary)

    def of(arm: str, concurrency: int, variant: str = "") -> dict[str, Any]:
        key = PointKey(arm, int(concurrency), variant or "")
        return found.get(key) or missing(summary, key)

    return of
