"""Sequential stopping on the run path: one round of one point sent in batches that end
at the looks, and the decision after each (docs/metrics.md, "Sequential stopping").

The baseline arm runs every look (to ``max_prompts``): it is what every speculative arm
pairs with, and an arm may stop at any look. A speculative arm stops at the first look
where its interval, at the look level, is narrow enough: the speedup interval over the
prompts both arms completed (when ``speedup_ci_halfwidth`` is set; without the
baseline's records, e.g. arms running side by side, it cannot stop) and the AL interval
(when ``al_ci_halfwidth`` is set and the arm speculates).

The baseline's records come from the run folder (an earlier process or another cluster
job may have written them); results/tail.py's ``RecordTail`` reads the folder's record
files as they grow, so each look parses only the lines appended since the last look.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from speedbench.records import PointKey, RequestRecord
from speedbench.scenario import Scenario, StopSpec
from speedbench.stopping.looks import REACHED, Look, look_fields, narrow_enough, ok_rows, point_looks, reason_at_end
from speedbench.stopping.schedule import look_level, look_schedule, prompt_order

class BaselineRecords(Protocol):
    """The baseline's records as they grow (results/tail.py's RecordTail reads them from
    the run folder): one round of a point, its arm ignored."""

    def records(self, key: PointKey, repeat: int) -> list[RequestRecord]: ...


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
    base_records: BaselineRecords | None  # the baseline's records, when the speedup decides
    reason: str = ""
    prompts: int = 0
    look: int = 0
    notes: list[str] = field(default_factory=list)
    found: dict[str, Look] = field(default_factory=dict)  # the last look's intervals (point_looks)

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
        level = look_level(self.spec.alpha, len(self.looks))
        base = None
        if self.base_records is not None and self.baseline is not None:
            base_key = self.key._replace(arm=self.baseline)
            base = ok_rows(self.base_records.records(base_key, self.repeat), base_key, self.repeat)
        # what this look finds is what points.json keeps (marks): the summary reads it back
        self.found = point_looks(ok_rows(records, self.key, self.repeat), base, level)
        if self.baseline is None and self.spec.speedup_ci_halfwidth is not None:
            return False  # the baseline runs every look: the others pair with it
        if base is not None and base.empty:
            self._note("no baseline records to pair with yet: the point cannot stop early")
            return False
        found, needed = self.found, []
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
        """What points.json keeps about the stop: where, why, and the intervals the last
        look found (``stop_intervals``), which the summary's stopping block and the
        point's row read back (stopping/summary.py) rather than recompute."""
        reason = self.reason or reason_at_end(self.prompts, self.spec.max_prompts, n_available)
        return {"stop_reason": reason, "stop_prompts": self.prompts, "stop_look": self.look,
                "stop_looks": len(self.looks), **({"stop_notes": self.notes} if self.notes else {}),
                **({"stop_intervals": look_fields(self.found)} if self.found else {})}


def point_stop(sc: Scenario, key: PointKey, repeat: int, n_available: int,
               base_records: BaselineRecords | None) -> PointStop | None:
    """The stopping plan for one round of a point, or None when the scenario has no ``stop``.
    ``base_records``: the run's one reader of the baseline's records (results/tail.py's
    ``baseline_tail``; None when no look pairs with a baseline)."""
    if sc.stop is None:
        return None
    arm = next((a for a in sc.arms if a.name == key.arm), None)
    base = sc.baseline_arm
    baseline = None if key.arm == base else base
    return PointStop(key=key, repeat=repeat, spec=sc.stop,
                     looks=look_schedule(n_available, sc.stop.min_prompts, sc.stop.max_prompts),
                     order=prompt_order(n_available, sc.stop.seed),
                     baseline=baseline,
                     speculative=bool(arm is not None and arm.is_speculative),
                     base_records=base_records if baseline is not None else None)
