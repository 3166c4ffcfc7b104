"""Controls that check the run: arms whose result is known before the run starts.

* **self-draft**: the target drafts for itself (every draft accepted at temperature 0,
  AL = k+1), but each drafted token costs a forward pass of the target: it cannot be
  faster than no speculation. A speedup above 1.00 beyond its interval is impossible.
* **untrained**: a draft that accepts nothing (AL 1) only adds the cost of drafting:
  it must be slower. Above 1.00 beyond its interval is impossible too.
* **A/A**: a second baseline server (``aa_check``) must read 1.00; an interval that
  excludes it, simultaneous over the A/A points at a 99% family level, says the run's
  intervals are narrower than its noise.

When a control's result is impossible, nothing else measured beside it can be trusted:
the run is marked "controls failed" (which control, and why) and ``gate`` fails. An arm
is a control by ``control:`` in its scenario entry, or, for the self-draft, when its
draft model is the target itself. Pure: reads summary rows, the scenario and the noise floor.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from speedbench.metrics.cells import num
from speedbench.metrics.headline import headline, headline_clock

SELF_DRAFT, UNTRAINED, AA = "self_draft", "untrained", "aa"
# The A/A control's family level: its intervals hold all at once with this probability, so
# a correct run fails the control about one time in a hundred (the noise floor's own
# verdict, at 95%, one time in twenty: a note in the report, not a failed run).
AA_CONTROL_FAMILY = 0.99
NAMES = {SELF_DRAFT: "self-draft", UNTRAINED: "untrained draft", AA: "A/A twin"}
WHY = {SELF_DRAFT: "a draft as costly as the target cannot make it faster",
       UNTRAINED: "a draft that accepts nothing only adds the cost of drafting"}


def control_of(arm: Mapping[str, Any], target: str | None) -> str | None:
    """Which control a scenario arm is (its ``control:``, or a self-draft: a separate draft
    model, ``method: draft_model``, that is the target itself), or None."""
    if arm.get("control"):
        return str(arm["control"])
    spec = arm.get("speculative_config") or {}
    if not isinstance(spec, Mapping) or spec.get("method") != "draft_model":
        return None  # an MTP head also names the target as its model, and gains for real
    model = spec.get("model")
    if model and target and os.path.normpath(str(model)) == os.path.normpath(str(target)):
        return SELF_DRAFT
    return None


def _fmt(m: float, lo: float, hi: float) -> str:
    return f"{m:.2f}x [{lo:.2f}, {hi:.2f}]"


def _arm_failures(kind: str, rows: Iterable[Any]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        m, lo, hi = headline(r)
        if math.isfinite(lo) and lo > 1.0:
            out.append({"control": kind, "arm": r.arm, "concurrency": int(r.concurrency), "variant": r.variant or "",
                        "why": f"{NAMES[kind]} {r.arm} at {_where(r.concurrency, r.variant)}: {_fmt(m, lo, hi)} "
                               f"({headline_clock(r)} clock) is above 1.00x beyond its interval; {WHY[kind]}"})
    return out


def _aa_failures(aa_arm: str, floor: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for f in floor:
        if f.get("contains_one") is False:
            c, lvl = f.get("concurrency"), float(f.get("level") or math.nan)
            clocks = [f"client {_fmt(f['speedup'], f['ci_low'], f['ci_high'])}"
                      if math.isfinite(num(f.get("speedup"))) else "",
                      f"engine {_fmt(f['speedup_engine'], f['engine_ci_low'], f['engine_ci_high'])}"
                      if math.isfinite(num(f.get("speedup_engine"))) else ""]
            where = _where(c, f.get("variant"))
            out.append({"control": AA, "arm": aa_arm, "concurrency": int(c or 0), "variant": f.get("variant") or "",
                        "why": f"A/A twin {aa_arm} at {where}: " + ", ".join(x for x in clocks if x)
                               + f" excludes 1.00x at {100 * lvl:.1f}% (simultaneous over its points): two "
                                 "identical servers differed by more than the run's intervals allow"})
    return out


def _where(concurrency: Any, variant: Any) -> str:
    return f"c={concurrency}" + (f" [{variant}]" if variant else "")


def controls_block(scenario: Mapping[str, Any], rows: Sequence[Any], floor: Sequence[Mapping[str, Any]],
                   aa_arm: str | None) -> dict[str, Any]:
    """summary.json's ``controls``: the run's controls, the failed ones with why, and a
    note when the scenario has none."""
    target = (scenario.get("server") or {}).get("model")
    present, failed = [], []
    for arm in scenario.get("arms") or []:
        kind = control_of(arm, target) if isinstance(arm, Mapping) else None
        if kind is None:
            continue
        name = str(arm.get("name"))
        present.append({"arm": name, "control": kind})
        failed += _arm_failures(kind, [r for r in rows if r.arm == name])
    if aa_arm and floor:
        present.append({"arm": aa_arm, "control": AA})
        failed += _aa_failures(aa_arm, floor)
    note = "" if present else ("no controls: nothing in this run checks that its figures are possible (add a "
                               "self-draft arm, an arm with control: untrained, or aa_check: true)")
    return {"present": present, "failed": failed, "note": note}
