"""Sequential stopping on the run path: one round of one point sent in batches that end
at the looks, and the decision after each (docs/metrics.md, "Sequential stopping").

The baseline arm runs every look (to ``max_prompts``): it is what every speculative arm
pairs with, and an arm may stop at any look. A speculative arm stops at the first look
where its interval, at the look level, is narrow enough: the speedup interval over the
prompts both arms completed (when ``speedup_ci_halfwidth`` is set; without the
baseline's records, e.g. arms running side by side, it cannot stop) and the AL interval
(when ``al_ci_halfwidth`` is set and the arm speculates).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from speedbench.metrics.sequential import (REACHED, look_level, look_schedule, narrow_enough, ok_rows,
                                           point_looks, prompt_order, reason_at_end)
from speedbench.records import PointKey, RequestRecord
from speedbench.results import RunDir
from speedbench.scenario import Scenario, StopSpec


@dataclass
class PointStop:
    """The stopping state of one round of one point; ``go_on`` is called after each batch."""

    key: PointKey
    repeat: int
    spec: StopSpec
    looks: list[int]
    order: list[int]  # indices into the point's prompts, in send order
    baseline: str | None  # the arm to pair with; None on the baseline itself
    speculative: bool
    run_dir: RunDir
    reason: str = ""
    prompts: int = 0
    look: int = 0
    notes: list[str] = field(default_factory=list)

    def batches(self) -> list[list[int]]:
        edges = [0, *self.looks]
        return [self.order[a:b] for a, b in zip(edges, edges[1:])]

    def go_on(self, records: list[RequestRecord], sent: int) -> bool:
        self.prompts, self.look = sent, self.looks.index(sent) + 1
        if self._stop_here(records):
            self.reason = REACHED
            return False
        return True

    def _stop_here(self, records: list[RequestRecord]) -> bool:
        if self.baseline is None and self.spec.speedup_ci_halfwidth is not None:
            return False  # the baseline runs every look: the others pair with it
        level = look_level(self.spec.alpha, len(self.looks))
        base = None
        if self.spec.speedup_ci_halfwidth is not None and self.baseline is not None:
            base = ok_rows(list(self.run_dir.iter_records()), self.key._replace(arm=self.baseline), self.repeat)
            if base.empty:
                self._note("no baseline records to pair with yet: the point cannot stop early")
                return False
        found = point_looks(ok_rows(records, self.key, self.repeat), base, level)
        needed = []
        if self.spec.speedup_ci_halfwidth is not None:
            needed.append(narrow_enough(found["speedup"], self.spec.speedup_ci_halfwidth))
            if found["speedup"].lag_bound >= self.spec.speedup_ci_halfwidth:
                self._note("the client's own timing error (its event-loop lag, bounded on the speedup) was at "
                           "least the target half-width at a look: no interval that includes it could stop there")
        if self.spec.al_ci_halfwidth is not None and self.speculative:
            needed.append(narrow_enough(found["al"], self.spec.al_ci_halfwidth))
        return bool(needed) and all(needed)

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def marks(self, n_available: int) -> dict[str, Any]:
        """What points.json keeps about the stop (the summary recomputes the interval)."""
        reason = self.reason or reason_at_end(self.prompts, self.spec.max_prompts, n_available)
        return {"stop_reason": reason, "stop_prompts": self.prompts, "stop_look": self.look,
                "stop_looks": len(self.looks), **({"stop_notes": self.notes} if self.notes else {})}


def point_stop(sc: Scenario, run_dir: RunDir, key: PointKey, repeat: int, n_available: int) -> PointStop | None:
    """The stopping plan for one round of a point, or None when the scenario has no ``stop``."""
    if sc.stop is None:
        return None
    arm = next((a for a in sc.arms if a.name == key.arm), None)
    base = sc.baseline_arm
    return PointStop(key=key, repeat=repeat, spec=sc.stop,
                     looks=look_schedule(n_available, sc.stop.min_prompts, sc.stop.max_prompts),
                     order=prompt_order(n_available, sc.stop.seed),
                     baseline=None if key.arm == base else base,
                     speculative=bool(arm is not None and arm.is_speculative), run_dir=run_dir)
