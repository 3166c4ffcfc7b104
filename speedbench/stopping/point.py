"""Sequential stopping on the run path: one round of one point sent in batches that end
at the looks, and the decision after each (docs/metrics.md, "Sequential stopping").

The baseline arm runs every look (to ``max_prompts``): it is what every speculative arm
pairs with, and an arm may stop at any look. A speculative arm stops at the first look
where its interval, at the look level, is narrow enough: the speedup interval over the
prompts both arms completed (when ``speedup_ci_halfwidth`` is set; without the
baseline's records, e.g. arms running side by side, it cannot stop) and the AL interval
(when ``al_ci_halfwidth`` is set and the arm speculates).

The baseline's records come from the run folder (an earlier process or another cluster
job may have written them); :class:`RecordTail` reads the folder's record files as they
grow, so each look parses only the lines appended since the last look.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedbench.errors import UsageError
from speedbench.records import PointKey, RequestRecord
from speedbench.results import RunDir
from speedbench.results.lines import DAMAGED_NAME, parse_line
from speedbench.scenario import Scenario, StopSpec
from speedbench.stopping.looks import REACHED, Look, look_fields, narrow_enough, ok_rows, point_looks, reason_at_end
from speedbench.stopping.schedule import look_level, look_schedule, prompt_order

_Round = tuple[str, int, str, int]  # (arm, concurrency, variant, repeat)


@dataclass
class _FileTail:
    offset: int = 0  # bytes parsed so far (whole lines only)
    lineno: int = 0
    rounds: dict[_Round, list[RequestRecord]] = field(default_factory=dict)


class RecordTail:
    """One arm's records in a run folder, read incrementally: each :meth:`records` call
    parses only the whole lines appended to each record file since the last call (a line
    still being written waits for the next). Arms run in threads; one tail serves them all."""

    def __init__(self, run_dir: RunDir, arm: str):
        self.run_dir, self.arm = run_dir, arm
        self._files: dict[Path, _FileTail] = {}
        self._lock = threading.Lock()

    def records(self, key: PointKey, repeat: int) -> list[RequestRecord]:
        """The arm's records of one round of ``key``'s point (its arm is ignored), in file order."""
        want = (self.arm, key.concurrency, key.variant, repeat)
        with self._lock:
            paths = self.run_dir.record_files()
            for p in paths:
                self._read_new(p)
            return [r for p in paths for r in self._files[p].rounds.get(want, [])]

    def _read_new(self, path: Path) -> None:
        tail = self._files.setdefault(path, _FileTail())
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size < tail.offset:  # rewritten (a resume moved lines out): read it again
            tail = self._files[path] = _FileTail()
        if size == tail.offset:
            return
        with open(path, "rb") as f:
            f.seek(tail.offset)
            data = f.read(size - tail.offset)
        whole = data[:data.rfind(b"\n") + 1]
        tail.offset += len(whole)
        for raw in whole.decode("utf-8", errors="replace").split("\n")[:-1]:
            tail.lineno += 1
            if raw.strip():
                self._keep(path, tail, raw)

    def _keep(self, path: Path, tail: _FileTail, text: str) -> None:
        try:
            rec = parse_line(text)
        except ValueError as e:
            raise UsageError(
                f"{path}:{tail.lineno}: damaged record line ({e}) -- `speedbench verify {self.run_dir.path}` lists "
                f"every problem; `speedbench run --resume {self.run_dir.path}` moves damaged lines to "
                f"{DAMAGED_NAME} and re-measures the rounds they belonged to") from None
        if rec.arm == self.arm:
            tail.rounds.setdefault((rec.arm, rec.concurrency, rec.variant, rec.repeat), []).append(rec)


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
    base_records: RecordTail | None  # the baseline's records, when the speedup decides
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


def baseline_tail(sc: Scenario, run_dir: RunDir) -> RecordTail | None:
    """The one reader of the baseline's records a run's looks share (None when no look
    pairs with a baseline)."""
    if sc.stop is None or sc.stop.speedup_ci_halfwidth is None or sc.baseline_arm is None:
        return None
    return RecordTail(run_dir, sc.baseline_arm)


def point_stop(sc: Scenario, run_dir: RunDir, key: PointKey, repeat: int, n_available: int,
               base_records: RecordTail | None = None) -> PointStop | None:
    """The stopping plan for one round of a point, or None when the scenario has no ``stop``.
    ``base_records``: the run's shared reader (:func:`baseline_tail`); else one of its own."""
    if sc.stop is None:
        return None
    arm = next((a for a in sc.arms if a.name == key.arm), None)
    base = sc.baseline_arm
    baseline = None if key.arm == base else base
    if baseline is not None and sc.stop.speedup_ci_halfwidth is not None and base_records is None:
        base_records = RecordTail(run_dir, baseline)
    return PointStop(key=key, repeat=repeat, spec=sc.stop,
                     looks=look_schedule(n_available, sc.stop.min_prompts, sc.stop.max_prompts),
                     order=prompt_order(n_available, sc.stop.seed),
                     baseline=baseline,
                     speculative=bool(arm is not None and arm.is_speculative),
                     base_records=base_records if baseline is not None else None)
