"""Checking a run folder's finished rounds against their records (``speedbench verify``,
``speedbench report``) and turning a damaged round back into work (``--resume``).

points.json says which rounds are finished; since record counts and digests were added
(results/lines.py) it also says what their records were. A round whose records are now
missing, short or changed would otherwise pass as finished: its point would show fewer
requests, or none ("failed: no measured requests"), and nothing would say why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from speedbench.errors import UsageError
from speedbench.records import PointKey
from speedbench.results.lines import DAMAGED_NAME, round_digest, round_of, line_sha, scan_file
from speedbench.results.rounds import RESUMABLE_DONE
from speedbench.results.rundir import RunDir


@dataclass
class BadRound:
    key: PointKey
    repeat: int
    expected: int  # lines written
    found: int  # whole records there now
    changed: bool  # the same count, but the lines differ (edited, or another round's)

    def describe(self) -> str:
        where = f"{self.key.label} round {self.repeat}"
        if self.found < self.expected:
            return f"{where}: {self.expected - self.found} of {self.expected} records lost (missing or damaged)"
        if self.found > self.expected:
            return f"{where}: {self.found} records where {self.expected} were written (duplicated or added lines)"
        return f"{where}: its {self.expected} records differ from the lines written (changed)"


@dataclass
class Verification:
    run: RunDir
    checked: int = 0  # finished rounds checked
    unverifiable: int = 0  # finished rounds from before counts were kept (older run folders)
    bad: list[BadRound] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)  # "records.jsonl:17: why"
    unreadable: list[str] = field(default_factory=list)  # files that cannot be read at all
    quarantined: int = 0  # lines already moved to records.damaged.jsonl (kept, not a problem)

    @property
    def ok(self) -> bool:
        return not (self.bad or self.damaged or self.unreadable)

    def problems(self) -> list[str]:
        return [*self.unreadable, *self.damaged, *(b.describe() for b in self.bad)]


def verify_run(rd: RunDir, arms: set[str] | None = None) -> Verification:
    """Check every finished round (of ``arms``, when given) against the record files;
    reads only, changes nothing."""
    v = Verification(rd)
    try:
        rounds = rd.point_rounds()
    except UsageError as e:
        v.unreadable.append(str(e))
        rounds = {}
    found: dict[tuple[PointKey, int], list[str]] = {}
    for path in rd.record_files():
        try:
            scan = scan_file(path)
        except OSError as e:
            v.unreadable.append(f"{path.name}: cannot be read ({e})")
            continue
        v.damaged += [f"{path.name}:{d.lineno}: damaged line ({d.why})" for d in scan.damaged]
        for g in scan.good:
            found.setdefault(round_of(g.record), []).append(line_sha(g.text))
    if rd.damaged_path.exists():
        v.quarantined = sum(1 for line in rd.damaged_path.read_text(errors="replace").splitlines() if line.strip())
    for (key, rnd), p in sorted(rounds.items()):
        if p.get("status") not in RESUMABLE_DONE or (arms is not None and key.arm not in arms):
            continue
        if "record_count" not in p:
            v.unverifiable += 1
            continue
        v.checked += 1
        shas = found.get((key, rnd), [])
        if len(shas) != p["record_count"] or round_digest(shas) != p.get("records_sha256"):
            v.bad.append(BadRound(key, rnd, int(p["record_count"]), len(shas), len(shas) == p["record_count"]))
    return v


def reopen_damaged_rounds(rd: RunDir, arms: list[str] | None = None) -> list[str]:
    """For ``--resume``: mark every finished round whose records no longer match as
    failed, so the prune moves what is left of it aside and the round is measured again.
    Returns one warning per round (how many records were lost) and one for damaged lines."""
    v = verify_run(rd, set(arms) if arms else None)
    warnings = []
    for b in v.bad:
        why = b.describe()
        rd.mark_point(b.key, "failed", repeat=b.repeat, failure=f"records lost: {why}")
        warnings.append(f"{why}; re-measuring it")
    # A cluster job moves damaged lines only out of its own file (RunDir.prune_unfinished_records).
    damaged = [d for d in v.damaged if not arms or d.startswith(rd.records_path.name + ":")]
    if damaged:
        warnings.append(f"{len(damaged)} damaged record lines moved to {DAMAGED_NAME} "
                        f"({', '.join(damaged[:3])}{', ...' if len(damaged) > 3 else ''})")
    return warnings
