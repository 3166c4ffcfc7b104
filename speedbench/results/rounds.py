"""The run folder's resume state: each round of each point (points.json), each arm's
server lifetimes (arms.json), and what they fold into. A mixin of ``RunDir``
(results/rundir.py), which owns the files; this part owns what they mean.

A point runs once per round of fresh server starts (``repeat``); its entry in points.json
carries the round's status, wall time and the count and digest of its record lines
(results/lines.py), which resume and ``speedbench verify`` check.
"""

from __future__ import annotations

import datetime as _dt
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speedbench.client.scrape import SpecCounters, add, delta
from speedbench.metrics.inputs import fold_rounds
from speedbench.metrics.stored import StoredRow
from speedbench.records import PointKey
from speedbench.results.lines import round_digest

# "interrupted": Ctrl-C / SIGTERM stopped the point part-way.
POINT_STATUSES = ("ok", "partial", "failed", "interrupted")
# Points with these statuses are kept and skipped by `speedbench run --resume`; failed and
# interrupted points are run again (a failed arm may start this time).
RESUMABLE_DONE = ("ok", "partial")


@dataclass(frozen=True)
class PointRound(StoredRow):
    """One round of one point as points.json holds it, or a point's rounds folded
    (``RunDir.all_points``: ``repeats`` lists them), read by attribute. Keys of an old
    folder or of other parts of the run (stopping, conditions, outputs files) are kept."""

    arm: str | None = None
    concurrency: int | None = None
    variant: str | None = None
    repeat: int | None = None
    status: str | None = None
    failure: str | None = None
    wall_s: float | None = None
    finished_utc: str | None = None
    record_count: int | None = None
    records_sha256: str | None = None
    outputs: dict[str, Any] | None = None
    repeats: list[int] | None = None
    # sequential stopping's marks on a stopped round (stopping/point.py writes them)
    stop_reason: str | None = None
    stop_prompts: int | None = None
    stop_look: int | None = None
    stop_looks: int | None = None
    stop_intervals: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        """Kept by resume: status ok or partial."""
        return self.status in RESUMABLE_DONE


@dataclass(frozen=True)
class ArmRound(StoredRow):
    """One server lifetime of an arm as arms.json holds it (``PointLog.mark_arm_round``)."""

    arm: str | None = None
    repeat: int | None = None
    start_s: float | None = None
    wall_s: float | None = None
    gpus: int | None = None

    def of(self, arm: str, repeat: int) -> bool:
        """Whether this is that arm's round (marking it again replaces it)."""
        return (self.arm, self.repeat) == (arm, repeat)


class PointLog:
    """Marks and folds rounds of points and arms; mixed into ``RunDir``."""

    if TYPE_CHECKING:  # provided by RunDir
        tag: str
        _tally: dict[tuple[PointKey, int], list[str]]
        _lock: threading.Lock

        @property
        def points_path(self) -> Path: ...
        def read_json(self, name: str, default: Any = None) -> Any: ...
        def write_json(self, name: str, obj: Any) -> Path: ...
        def _own(self, stem: str, ext: str) -> str: ...
        def _all_files(self, stem: str, ext: str) -> list[Path]: ...
        def load_prometheus(self, key: PointKey, repeat: int = 0) -> tuple[str | None, str | None]: ...

    def mark_point(self, key: PointKey, status: str, *, repeat: int = 0, failure: str | None = None,
                   wall_s: float | None = None, **extra: Any) -> None:
        """Record one round (``repeat``) of a point: its status, wall time and facts."""
        if status not in POINT_STATUSES:
            raise ValueError(f"status must be one of {POINT_STATUSES}, got {status!r}")
        arm, concurrency, variant = key
        entry = {
            "arm": arm, "concurrency": int(concurrency), "variant": variant or "", "repeat": int(repeat),
            "status": status, "failure": failure, "wall_s": wall_s,
            "finished_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), **extra,
        }
        if self.tag:
            entry["job"] = self.tag
        with self._lock:
            shas = self._tally.pop((PointKey(*key), int(repeat)), [])
            if status in RESUMABLE_DONE:  # what verify and resume check this round against
                entry["record_count"], entry["records_sha256"] = len(shas), round_digest(shas)
            own = self.points_path.name
            points = [p for p in self.read_json(own, []) or [] if _round_key(p) != (PointKey(*key), int(repeat))]
            points.append(entry)
            self.write_json(own, points)

    def mark_arm_round(self, arm: str, repeat: int, *, start_s: float | None, wall_s: float, gpus: int) -> None:
        """One server lifetime of an arm (one round): how long it took to start, how long
        it lived, and the GPUs it held; the summary's ``arms`` block sums them."""
        entry = {"arm": arm, "repeat": int(repeat), "start_s": start_s, "wall_s": wall_s, "gpus": int(gpus)}
        with self._lock:
            own = self._own("arms", ".json")
            rounds = [a for a in self.read_json(own, []) or [] if not ArmRound.from_dict(a).of(arm, repeat)]
            self.write_json(own, [*rounds, entry])

    def arm_costs(self) -> dict[str, dict[str, Any]]:
        """Per arm: server start seconds per round, wall seconds, GPUs and GPU-hours."""
        out: dict[str, dict[str, Any]] = {}
        for f in self._all_files("arms", ".json"):
            for a in map(ArmRound.from_dict, self.read_json(f.name, []) or []):
                c = out.setdefault(str(a.arm), {"server_start_s": [], "wall_s": 0.0, "gpus": 0, "gpu_hours": 0.0})
                if a.start_s is not None:
                    c["server_start_s"].append(a.start_s)
                c["wall_s"] += a.wall_s or 0.0
                c["gpus"] = max(c["gpus"], a.gpus or 0)
                c["gpu_hours"] += (a.wall_s or 0.0) / 3600 * (a.gpus or 0)
        return out

    def point_rounds(self) -> dict[tuple[PointKey, int], dict[str, Any]]:
        """Every marked round of every point, by (PointKey, repeat). Across job files the
        latest mark wins (a resumed arm re-marks its rounds)."""
        out: dict[tuple[PointKey, int], dict[str, Any]] = {}
        for f in self._all_files("points", ".json"):
            for p in self.read_json(f.name, []) or []:
                key = _round_key(p)
                old = out.get(key)
                if old is None or str(p.get("finished_utc") or "") >= str(old.get("finished_utc") or ""):
                    out[key] = p
        return out

    def rounds(self) -> dict[tuple[PointKey, int], PointRound]:
        """:meth:`point_rounds`, each entry typed (its readers use attributes; the entries
        as stored go on to what folds or copies them)."""
        return {k: PointRound.from_dict(p) for k, p in self.point_rounds().items()}

    def finished_rounds(self) -> set[tuple[PointKey, int]]:
        """Rounds that resume skips: status ok or partial."""
        return {k for k, v in self.rounds().items() if v.done}

    def all_points(self) -> dict[PointKey, dict[str, Any]]:
        """Every marked point (any status), its rounds folded (``metrics.inputs.fold_rounds``:
        wall time summed, the worst status and its failure, ``repeats`` the rounds marked)."""
        by_point: dict[PointKey, list[tuple[int, dict[str, Any]]]] = {}
        for (key, rnd), p in self.point_rounds().items():
            by_point.setdefault(key, []).append((rnd, p))
        return {key: fold_rounds(rounds) for key, rounds in by_point.items()}

    def points(self) -> dict[PointKey, PointRound]:
        """:meth:`all_points`, each point's folded rounds typed."""
        return {k: PointRound.from_dict(p) for k, p in self.all_points().items()}

    def finished_points(self) -> dict[PointKey, dict[str, Any]]:
        """Points whose every marked round is ok or partial."""
        return {k: p for k, p in self.all_points().items() if PointRound.from_dict(p).done}

    def prometheus_delta(self, key: PointKey, counters: Callable[[str], SpecCounters]) -> SpecCounters | None:
        """The point's spec-decode counter deltas, summed over its rounds (each round is a
        fresh server, so each has its own before/after pair); None without any pair.
        ``counters`` reads one snapshot's text (the run's ``Engine.spec_counters``)."""
        total = None
        for rnd in sorted({r for (k, r) in self.point_rounds() if k == key} or {0}):
            before, after = self.load_prometheus(key, rnd)
            if before and after:
                total = add(total, delta(counters(before), counters(after)))
        return total


# worse statuses rank higher; a point's folded status is the worst of its rounds
def _round_key(p: dict[str, Any]) -> tuple[PointKey, int]:
    """A round's key with its load read back from the fields beside it (a rate point's
    ``request_rate`` and ``workload``), never from its label; a folder written before
    ``workload`` was stored gets records.py's fallback (the variant)."""
    key = PointKey(p["arm"], int(p["concurrency"]), p.get("variant") or "", workload=p.get("workload"),
                   rate=p.get("request_rate"))
    return key, int(p.get("repeat") or 0)
