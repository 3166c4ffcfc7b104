"""Checking a run folder's finished rounds against their records (``speedbench verify``,
``speedbench report``) and turning a damaged round back into work (``--resume``).

points.json says which rounds are finished; since record counts and digests were added
(results/lines.py) it also says what their records were. A round whose records are now
missing, short or changed would otherwise pass as finished: its point would show fewer
requests, or none ("failed: no measured requests"), and nothing would say why.

The same holds for a whole file: a folder that lost points.json has no finished round to
check, and one that lost its records or its scenario cannot be checked at all; either
would read as "ok, 0 rounds" and pass its gates. So a file the folder must hold by now is
a problem of its own (:func:`missing_files`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from speedbench.errors import UsageError
from speedbench.metrics.registry import SummaryRow
from speedbench.records import PointKey
from speedbench.results import outputs
from speedbench.results.lines import DAMAGED_NAME, round_digest, round_of, line_sha, scan_file
from speedbench.results.rounds import PointRound
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


@dataclass(frozen=True)
class MissingFile:
    """A file the run folder must hold by now, and is without."""

    name: str  # as the folder would hold it
    why: str  # what cannot be checked without it
    fix: str

    def describe(self) -> str:
        return f"{self.name} is missing: {self.why} -- fix: {self.fix}"


def missing_files(rd: RunDir, rounds: dict[tuple[PointKey, int], PointRound]) -> list[MissingFile]:
    """The files a run writes before or while it measures, gone from ``rd``: its scenario
    (written before the first server starts), points.json once a record or the summary
    exists (a round is marked as it finishes), and the records once a round finished."""
    out = []
    resume = f"`speedbench run --resume {rd.path}`"
    if not rd.scenario_path.exists():
        out.append(MissingFile(rd.scenario_path.name, "the run's scenario (its arms and gates) is unknown",
                               "restore it from a copy of the run folder; no command can rebuild it"))
    records = rd.record_files()
    has_points = bool(rd.point_files())
    if not has_points and (records or rd.summary_path.exists()):
        out.append(MissingFile(rd.points_path.name, "no round counts as finished, so no record can be checked",
                               f"{resume} measures every point again (its records move to "
                               "records.superseded.jsonl)"))
    if not records and _measured(rd, rounds, has_points):
        out.append(MissingFile(rd.records_path.name, "finished rounds have no records, so no figure can be checked",
                               f"{resume} measures those rounds again"))
    return out


def _measured(rd: RunDir, rounds: dict[tuple[PointKey, int], PointRound], has_points: bool) -> bool:
    """Whether the run finished a round that wrote records (an arm that never started
    writes none): from points.json, or from the summary's request counts without it."""
    if has_points:
        return any(p.done and (p.record_count if p.has("record_count") else 1) for p in rounds.values())
    summary = rd.read_json(rd.summary_path.name) if rd.summary_path.exists() else None
    rows = summary.get("rows") if isinstance(summary, dict) else None
    return any(isinstance(r, dict) and (SummaryRow.from_dict(r).n_requests or 0) > 0 for r in rows or [])


@dataclass
class Verification:
    run: RunDir
    checked: int = 0  # finished rounds checked
    unverifiable: int = 0  # finished rounds from before counts were kept (older run folders)
    bad: list[BadRound] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)  # "records.jsonl:17: why"
    unreadable: list[str] = field(default_factory=list)  # files that cannot be read at all
    quarantined: int = 0  # lines already moved to records.damaged.jsonl (kept, not a problem)
    missing: list[MissingFile] = field(default_factory=list)  # files the folder must hold by now
    # finished rounds whose outputs file (results/outputs.py) is missing or changed: why
    bad_outputs: dict[tuple[PointKey, int], str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.bad or self.damaged or self.unreadable or self.missing or self.bad_outputs)

    @property
    def damaged_rounds(self) -> bool:
        """Problems ``run --resume`` repairs by measuring rounds again (not only missing files)."""
        return bool(self.bad or self.damaged or self.unreadable or self.bad_outputs)

    def problems(self) -> list[str]:
        return [*(m.describe() for m in self.missing), *self.unreadable, *self.damaged,
                *(b.describe() for b in self.bad),
                *(f"{k.label} round {r}: {why}" for (k, r), why in sorted(self.bad_outputs.items()))]


def verify_run(rd: RunDir, arms: set[str] | None = None) -> Verification:
    """Check every finished round (of ``arms``, when given) against the record files;
    reads only, changes nothing."""
    v = Verification(rd)
    try:
        rounds = rd.rounds()
    except UsageError as e:
        v.unreadable.append(str(e))
        rounds = {}
    v.missing = missing_files(rd, rounds)
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
        if not p.done or (arms is not None and key.arm not in arms):
            continue
        if not p.has("record_count"):
            v.unverifiable += 1
            continue
        v.checked += 1
        if (why := outputs.problem(rd.path, outputs.outputs_file(p.outputs))) is not None:
            v.bad_outputs[(key, rnd)] = why
        shas = found.get((key, rnd), [])
        if len(shas) != p.record_count or round_digest(shas) != p.records_sha256:
            v.bad.append(BadRound(key, rnd, int(p.record_count or 0), len(shas), len(shas) == p.record_count))
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
    for (key, rnd), why in sorted(v.bad_outputs.items()):
        if any(b.key == key and b.repeat == rnd for b in v.bad):
            continue  # marked above
        rd.mark_point(key, "failed", repeat=rnd, failure=f"outputs lost: {why}")
        warnings.append(f"{key.label} round {rnd}: {why}; re-measuring it")
    # A cluster job moves damaged lines only out of its own file (RunDir.prune_unfinished_records).
    damaged = [d for d in v.damaged if not arms or d.startswith(rd.records_path.name + ":")]
    if damaged:
        warnings.append(f"{len(damaged)} damaged record lines moved to {DAMAGED_NAME} "
                        f"({', '.join(damaged[:3])}{', ...' if len(damaged) > 3 else ''})")
    return warnings
