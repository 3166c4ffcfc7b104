"""The run folder, write side: layout, the record log (results/record_log.py), resume
state (results/rounds.py), and every other file replaced atomically.

A run split over cluster jobs (docs/slurm.md) adds per-job files beside these:
``records-<tag>.jsonl``, ``points-<tag>.json`` and ``provenance-<tag>.json``, where the tag
is the job id. Each job writes only its own files, so no two processes ever append to one
file; every reader below merges them, and the folder loads as one run.

Records are appended and flushed one line at a time as each request completes, so a
crash loses at most the line being written (a torn last line is moved to
records.damaged.jsonl on the next append, skipped on reading); records.jsonl,
records.superseded.jsonl and records.damaged.jsonl are append-only logs. Each finished
round's entry in points.json carries the count and digest of its record lines
(results/lines.py), which resume and ``speedbench verify`` check (results/verify.py).
Every other file goes through :func:`~speedbench.results.files.atomic_write`.
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from speedbench.errors import UsageError
from speedbench.records import PointKey, RequestRecord
from speedbench.results.formats import write_parquet, write_summary_csv
from speedbench.results.files import OUTPUT_ERRNOS, atomic_write, finite, new_run_id, output_error, safe_part
from speedbench.results.lines import DAMAGED_NAME
from speedbench.results.record_log import RecordLog
from speedbench.results.rounds import PointLog
from speedbench.secrets import redact_override, redact_scenario

# Bump when a summary key changes meaning or disappears; adding keys does not bump it.
SCHEMA_VERSION = 1
# The machine the run started on (engine/vllm/provenance.hardware()), written before any server.
HOST_FILE = "host.json"


@dataclass
class RunDir(RecordLog, PointLog):
    """One run folder. Cheap to construct; nothing is read until asked for."""

    path: Path
    fsync: bool = False  # fsync every write (slower; survives power loss, not just a crash)
    # Writer tag of a cluster job ("" = the single-process run): selects this writer's own
    # records/points/provenance files. Readers always merge every writer's files.
    tag: str = ""
    _tail_checked: bool = field(default=False, repr=False)
    # Line digests of the records this process appended, by round, until the round is
    # marked: mark_point writes their count and digest into points.json.
    _tally: dict[tuple[PointKey, int], list[str]] = field(default_factory=dict, repr=False, compare=False)
    # Arms of one wave run in threads and share this folder: serialise writes that
    # read-modify-write (points, provenance) or that may span several write() calls.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    # ---- creation -------------------------------------------------------------------

    @classmethod
    def create(cls, root: str | Path, scenario_name: str, *, fsync: bool = False,
               now: _dt.datetime | None = None) -> RunDir:
        base = Path(root) / safe_part(scenario_name)
        for _ in range(20):
            path = base / new_run_id(now)
            try:
                path.mkdir(parents=True, exist_ok=False)
                rd = cls(path, fsync=fsync)
                rd.prometheus_dir.mkdir()
                rd.logs_dir.mkdir()
            except FileExistsError:
                continue
            except OSError as e:
                if e.errno in OUTPUT_ERRNOS:
                    raise output_error(e, path) from None
                raise
            return rd
        raise UsageError(f"could not create a new run folder under {base}")  # pragma: no cover

    @classmethod
    def open(cls, path: str | Path, *, fsync: bool = False, tag: str = "") -> RunDir:
        p = Path(path)
        if p.is_file() and p.name == "summary.json":
            p = p.parent
        if not p.is_dir():
            raise UsageError(f"run folder not found: {p} -- fix: pass a folder under results/<scenario>/")
        return cls(p, fsync=fsync, tag=safe_part(tag) if tag else "")

    # ---- paths ----------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def scenario_path(self) -> Path:
        return self.path / "scenario.resolved.yaml"

    @property
    def provenance_path(self) -> Path:
        return self.path / "provenance.json"

    def _own(self, stem: str, ext: str) -> str:
        return f"{stem}-{self.tag}{ext}" if self.tag else f"{stem}{ext}"

    @property
    def records_path(self) -> Path:
        """The file this writer appends to."""
        return self.path / self._own("records", ".jsonl")

    @property
    def points_path(self) -> Path:
        return self.path / self._own("points", ".json")

    def _all_files(self, stem: str, ext: str) -> list[Path]:
        """The single-process file first, then every job's file in name order."""
        base = self.path / f"{stem}{ext}"
        jobs = sorted(p for p in self.path.glob(f"{stem}-*{ext}")
                      if p.name not in ("records.superseded.jsonl", DAMAGED_NAME))
        return ([base] if base.exists() else []) + jobs

    def record_files(self) -> list[Path]:
        return self._all_files("records", ".jsonl")

    def point_files(self) -> list[Path]:
        return self._all_files("points", ".json")

    @property
    def summary_path(self) -> Path:
        return self.path / "summary.json"

    @property
    def summary_csv_path(self) -> Path:
        return self.path / "summary.csv"

    @property
    def parquet_path(self) -> Path:
        return self.path / "records.parquet"

    @property
    def report_md_path(self) -> Path:
        return self.path / "report.md"

    @property
    def report_html_path(self) -> Path:
        return self.path / "report.html"

    @property
    def prometheus_dir(self) -> Path:
        return self.path / "prometheus"

    @property
    def logs_dir(self) -> Path:
        return self.path / "logs"

    def log_path(self, arm: str) -> Path:
        return self.logs_dir / f"{safe_part(arm)}.log"

    def prometheus_path(self, key: PointKey, when: str, repeat: int = 0) -> Path:
        if when not in ("before", "after"):
            raise ValueError("when must be 'before' or 'after'")
        # repeat 0 keeps the original name, so run folders from before rounds load unchanged
        rnd = f"__r{int(repeat)}" if repeat else ""
        name = f"{safe_part(key.arm)}__c{int(key.concurrency)}__{safe_part(key.variant or 'default')}{rnd}__{when}.txt"
        return self.prometheus_dir / name

    def save_prometheus(self, key: PointKey, before: str, after: str, repeat: int = 0) -> None:
        """Both snapshots of one round of a point; an empty ``after`` (aborted point) is not written."""
        for when, text in (("before", before), ("after", after)):
            if text:
                atomic_write(self.prometheus_path(key, when, repeat), text, self.fsync)

    def load_prometheus(self, key: PointKey, repeat: int = 0) -> tuple[str | None, str | None]:
        out = []
        for when in ("before", "after"):
            p = self.prometheus_path(key, when, repeat)
            out.append(p.read_text(encoding="utf-8") if p.exists() else None)
        return out[0], out[1]

    # ---- small files ----------------------------------------------------------------

    def write_json(self, name: str, obj: Any) -> Path:
        p = self.path / name
        atomic_write(p, json.dumps(finite(obj), indent=2, sort_keys=False) + "\n", self.fsync)
        return p

    def read_json(self, name: str, default: Any = None) -> Any:
        p = self.path / name
        if not p.exists():
            return default
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise UsageError(f"{p}: not valid JSON ({e}) -- fix: restore it or re-run the scenario") from None

    def write_scenario(self, resolved: dict[str, Any], overrides: list[str] | None = None) -> Path:
        """``resolved`` is :func:`speedbench.scenario.resolved_dict` of the scenario. The
        overrides are already applied; they are kept as a comment (the file must stay a
        valid scenario for ``--resume``)."""
        head = "# resolved scenario written by speedbench; overrides already applied\n"
        head += "".join(f"# --set {redact_override(o)}\n" for o in overrides or [])
        body = yaml.safe_dump(redact_scenario(resolved), sort_keys=False, allow_unicode=True)
        atomic_write(self.scenario_path, head + body, self.fsync)
        return self.scenario_path

    def load_scenario(self) -> dict[str, Any]:
        if not self.scenario_path.exists():
            return {}
        # libyaml's loader where PyYAML has it: the dashboard reads hundreds of these
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        data = yaml.load(self.scenario_path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 (a safe loader)
        return data if isinstance(data, dict) else {}

    def write_provenance(self, by_arm: dict[str, Any]) -> Path:
        return self.write_json(self._own("provenance", ".json"), by_arm)

    def save_provenance(self, arm: str, prov: dict[str, Any]) -> Path:
        """Set one arm's entry; arms that run concurrently call this from their threads,
        so the read-modify-write is serialised by the caller's lock or by arm order."""
        with self._lock:
            data = self.read_json(self._own("provenance", ".json"), {}) or {}
            data[arm] = prov
            return self.write_provenance(data)

    def load_provenance(self) -> dict[str, Any]:
        """Every writer's provenance by arm; a later job's entry (a resumed arm) wins."""
        out: dict[str, Any] = {}
        for p in self._all_files("provenance", ".json"):
            data = self.read_json(p.name, {})
            if isinstance(data, dict):
                out.update(data)
        return out

    def write_parquet(self, records: list[RequestRecord]) -> Path:
        return write_parquet(self.parquet_path, records, self.fsync)

    # ---- summary --------------------------------------------------------------------------

    def write_summary(self, summary: dict[str, Any]) -> None:
        summary = {"schema_version": SCHEMA_VERSION, **summary}
        summary.setdefault("run_id", self.name)
        self.write_json("summary.json", summary)
        write_summary_csv(self.summary_csv_path, summary.get("rows") or [], self.fsync, summary)

    def load_summary(self) -> dict[str, Any]:
        data = self.read_json("summary.json")
        if data is None:
            raise UsageError(f"{self.summary_path} not found -- the run has not finished; "
                             f"`speedbench run --resume {self.path}` completes it")
        rows = data.get("rows") if isinstance(data, dict) else None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise UsageError(f"{self.summary_path}: not a speedbench summary (expected a JSON object whose 'rows' "
                             "is a list of rows) -- fix: `speedbench gather RUN` writes it again from the records")
        version = data.get("schema_version")
        if not isinstance(version, int):
            raise UsageError(f"{self.summary_path}: missing schema_version")
        if version > SCHEMA_VERSION:
            raise UsageError(
                f"{self.summary_path} has schema_version {version}, newer than this speedbench "
                f"understands ({SCHEMA_VERSION}) -- fix: upgrade speedbench to read it")
        return data
