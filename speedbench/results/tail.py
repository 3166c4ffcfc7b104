"""One arm's records in a run folder, read as they grow: the baseline's records that a
speculative point's looks pair with (stopping/point.py). Each look parses only the lines
appended since the last; another process or cluster job may be writing them."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from speedbench.errors import UsageError
from speedbench.records import PointKey, RequestRecord
from speedbench.results.lines import DAMAGED_NAME, parse_line
from speedbench.results.rundir import RunDir
from speedbench.scenario import Scenario

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


def baseline_tail(sc: Scenario, run_dir: RunDir) -> RecordTail | None:
    """The one reader of the baseline's records a run's looks share (None when no look
    pairs with a baseline)."""
    if sc.stop is None or sc.stop.speedup_ci_halfwidth is None or sc.baseline_arm is None:
        return None
    return RecordTail(run_dir, sc.baseline_arm)
