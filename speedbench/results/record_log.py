"""The run folder's record log, mixed into ``RunDir`` (results/rundir.py), which owns the
folder's layout: records appended one whole line at a time as each request completes, a
torn last line moved to records.damaged.jsonl before the next append, records read back
(damaged lines named), and resume's prune of the rounds not marked done.

Each append's line digest is tallied by round, so ``PointLog.mark_point`` can write the
round's count and digest into points.json (results/lines.py, checked by results/verify.py).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speedbench.errors import UsageError
from speedbench.records import PointKey, RequestRecord
from speedbench.results.files import atomic_write, finite
from speedbench.results.lines import DAMAGED_NAME, FileScan, append_whole, damaged_entry, line_sha, scan_file


class RecordLog:
    """Appends, reads and prunes a run folder's records; mixed into ``RunDir``."""

    if TYPE_CHECKING:  # provided by RunDir (and PointLog)
        path: Path
        fsync: bool
        _tail_checked: bool
        _tally: dict[tuple[PointKey, int], list[str]]
        _lock: threading.Lock

        @property
        def records_path(self) -> Path: ...
        def record_files(self) -> list[Path]: ...
        def finished_rounds(self) -> set[tuple[PointKey, int]]: ...

    @property
    def superseded_path(self) -> Path:
        return self.path / "records.superseded.jsonl"

    @property
    def damaged_path(self) -> Path:
        return self.path / DAMAGED_NAME

    def _repair_tail(self) -> None:
        """Before the first append: a last line without its newline gets one when it is a
        whole record, and is moved to records.damaged.jsonl when it is not (a crash cut
        it), so the next record starts on a fresh line and nothing is silently dropped."""
        p = self.records_path
        if not p.exists() or p.stat().st_size == 0:
            return
        with open(p, "rb") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
        scan = scan_file(p)
        if scan.torn:
            self._keep_damaged(scan, [scan.damaged[-1]])
            with open(p, "rb+") as f:
                data = f.read()
                f.truncate(data.rfind(b"\n") + 1)
        else:
            self._append(p, "\n")

    def _keep_damaged(self, scan: FileScan, damaged: list) -> None:
        self._append(self.damaged_path, "".join(damaged_entry(scan.path, d) for d in damaged))

    def append_record(self, rec: RequestRecord) -> None:
        line = json.dumps(finite(rec.to_dict()), separators=(",", ":"))
        with self._lock:
            if not self._tail_checked:
                self._repair_tail()
                self._tail_checked = True
            # Open per record: a few microseconds, and nothing is left buffered if we die.
            self._append(self.records_path, line + "\n")
            rnd = (PointKey(rec.arm, rec.concurrency, rec.variant or ""), int(rec.repeat or 0))
            self._tally.setdefault(rnd, []).append(line_sha(line))

    def _append(self, path: Path, text: str) -> None:
        append_whole(path, text, self.fsync)

    def iter_records(self) -> Iterable[RequestRecord]:
        for p in self.record_files():
            yield from self._iter_file(p)

    def _iter_file(self, p: Path) -> Iterable[RequestRecord]:
        scan = scan_file(p)
        for d in scan.damaged:
            if not (scan.torn and d is scan.damaged[-1]):  # a torn last line: the rest is intact
                raise UsageError(
                    f"{p}:{d.lineno}: damaged record line ({d.why}) -- `speedbench verify {self.path}` lists "
                    f"every problem; `speedbench run --resume {self.path}` moves damaged lines to "
                    f"{DAMAGED_NAME} and re-measures the rounds they belonged to")
        for g in scan.good:
            yield g.record

    def load_records(self) -> list[RequestRecord]:
        return list(self.iter_records())

    def prune_unfinished_records(self, arms: Iterable[str] | None = None) -> int:
        """Move records of rounds not marked done to ``records.superseded.jsonl`` (for
        resume, which re-runs those rounds whole), and damaged lines to
        ``records.damaged.jsonl``; returns how many records moved. Nothing is deleted,
        kept lines stay byte-identical, and the record files never hold two measurements
        of one round.

        ``arms`` limits the pruning to those arms' records, and damaged lines to this
        writer's own file: a cluster job resuming one arm must not touch the files other
        jobs are appending to right now."""
        done = self.finished_rounds()
        only = set(arms) if arms is not None else None
        moved = 0
        with self._lock:
            for path in self.record_files():
                scan = scan_file(path)
                damaged = scan.damaged if only is None or path == self.records_path else []
                gone = [g for g in scan.good if (PointKey(g.record.arm, g.record.concurrency, g.record.variant),
                                                 g.record.repeat) not in done
                        and (only is None or g.record.arm in only)]
                if not gone and not damaged:
                    continue
                if damaged:
                    self._keep_damaged(scan, damaged)
                if gone:
                    self._append(self.superseded_path, "".join(g.text + "\n" for g in gone))
                drop = {g.lineno for g in gone} | {d.lineno for d in damaged}
                lines: list[Any] = [*scan.good, *scan.damaged]  # both kinds have lineno and text
                keep = sorted((x.lineno, x.text) for x in lines if x.lineno not in drop)
                atomic_write(path, "".join(t + "\n" for _, t in keep), self.fsync)
                moved += len(gone)
            self._tail_checked = True  # rewritten whole: no torn tail
        return moved
