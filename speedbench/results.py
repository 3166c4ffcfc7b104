"""The run folder: incremental record writes, summary files, resume state, loading.

Layout (see docs/results.md)::

    results/<scenario>/<YYYYmmddTHHMMSSZ>-<6 hex>/
      scenario.resolved.yaml  provenance.json  records.jsonl  points.json
      prometheus/<arm>__c<conc>__<variant>__{before,after}.txt   logs/<arm>.log
      summary.json  summary.csv  records.parquet  report.md  report.html

Records are appended and flushed one line at a time as each request completes, so a
crash loses at most the line being written; every other file is replaced atomically
(write to a temporary name, then rename), so a reader never sees half a JSON file.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from speedbench.errors import UsageError
from speedbench.records import PointKey, RequestRecord
from speedbench.secrets import redact_override, redact_scenario

# Bump when a summary key changes meaning or disappears; adding keys does not bump it.
SCHEMA_VERSION = 1

# "interrupted": Ctrl-C / SIGTERM stopped the point part-way.
POINT_STATUSES = ("ok", "partial", "failed", "interrupted")
# Points with these statuses are kept and skipped by `speedbench run --resume`; failed and
# interrupted points are run again (a failed arm may start this time).
RESUMABLE_DONE = ("ok", "partial")


def new_run_id(now: _dt.datetime | None = None) -> str:
    """``YYYYmmddTHHMMSSZ-<6 hex>``: sorts by time, and the hex part keeps two runs
    started in the same second apart."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return now.astimezone(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def _finite(obj: Any) -> Any:
    """NaN/inf -> None: strict JSON has no NaN, and other tools choke on it."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _finite(obj.item())
    return obj


def atomic_write(path: Path, text: str, fsync: bool = False) -> None:
    """Write then rename: a crash leaves the old file or the new one, never half of one.
    ``fsync`` also survives power loss, at tens of milliseconds per file on some disks."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def _safe_part(s: str) -> str:
    """Arm and variant names go into file names; scenario validation already limits arm
    names, but variants and external callers may not be so tidy."""
    out = "".join(c if c.isalnum() or c in "._-" else "-" for c in str(s))
    return out.lstrip(".") or "_"


@dataclass
class RunDir:
    """One run folder. Cheap to construct; nothing is read until asked for."""

    path: Path
    fsync: bool = False  # fsync every write (slower; survives power loss, not just a crash)
    _tail_checked: bool = field(default=False, repr=False)
    # Arms of one wave run in threads and share this folder: serialise writes that
    # read-modify-write (points, provenance) or that may span several write() calls.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    # ---- creation -------------------------------------------------------------------

    @classmethod
    def create(cls, root: str | Path, scenario_name: str, *, fsync: bool = False,
               now: _dt.datetime | None = None) -> RunDir:
        base = Path(root) / _safe_part(scenario_name)
        for _ in range(20):
            path = base / new_run_id(now)
            try:
                path.mkdir(parents=True, exist_ok=False)
            except FileExistsError:
                continue
            rd = cls(path, fsync=fsync)
            rd.prometheus_dir.mkdir()
            rd.logs_dir.mkdir()
            return rd
        raise UsageError(f"could not create a new run folder under {base}")  # pragma: no cover

    @classmethod
    def open(cls, path: str | Path, *, fsync: bool = False) -> RunDir:
        p = Path(path)
        if p.is_file() and p.name == "summary.json":
            p = p.parent
        if not p.is_dir():
            raise UsageError(f"run folder not found: {p} -- fix: pass a folder under results/<scenario>/")
        return cls(p, fsync=fsync)

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

    @property
    def records_path(self) -> Path:
        return self.path / "records.jsonl"

    @property
    def points_path(self) -> Path:
        return self.path / "points.json"

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
        return self.logs_dir / f"{_safe_part(arm)}.log"

    def prometheus_path(self, arm: str, concurrency: int, variant: str, when: str) -> Path:
        if when not in ("before", "after"):
            raise ValueError("when must be 'before' or 'after'")
        name = f"{_safe_part(arm)}__c{int(concurrency)}__{_safe_part(variant or 'default')}__{when}.txt"
        return self.prometheus_dir / name

    def write_prometheus(self, arm: str, concurrency: int, variant: str, when: str, text: str) -> Path:
        p = self.prometheus_path(arm, concurrency, variant, when)
        atomic_write(p, text, self.fsync)
        return p

    def save_prometheus(self, arm: str, concurrency: int, variant: str, before: str, after: str) -> None:
        """Both snapshots of a point; an empty ``after`` (aborted point) is not written."""
        if before:
            self.write_prometheus(arm, concurrency, variant, "before", before)
        if after:
            self.write_prometheus(arm, concurrency, variant, "after", after)

    def load_prometheus(self, arm: str, concurrency: int, variant: str) -> tuple[str | None, str | None]:
        out = []
        for when in ("before", "after"):
            p = self.prometheus_path(arm, concurrency, variant, when)
            out.append(p.read_text(encoding="utf-8") if p.exists() else None)
        return out[0], out[1]

    # ---- small files ----------------------------------------------------------------

    def write_json(self, name: str, obj: Any) -> Path:
        p = self.path / name
        atomic_write(p, json.dumps(_finite(obj), indent=2, sort_keys=False) + "\n", self.fsync)
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
        data = yaml.safe_load(self.scenario_path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}

    def write_provenance(self, by_arm: dict[str, Any]) -> Path:
        return self.write_json("provenance.json", by_arm)

    def save_provenance(self, arm: str, prov: dict[str, Any]) -> Path:
        """Set one arm's entry; arms that run concurrently call this from their threads,
        so the read-modify-write is serialised by the caller's lock or by arm order."""
        with self._lock:
            data = self.load_provenance()
            data[arm] = prov
            return self.write_provenance(data)

    def load_provenance(self) -> dict[str, Any]:
        data = self.read_json("provenance.json", {})
        return data if isinstance(data, dict) else {}

    # ---- records --------------------------------------------------------------------

    def _repair_tail(self) -> None:
        """Cut a half-written last line left by a crash, so the next append starts on a
        fresh line instead of gluing a good record onto a broken one."""
        p = self.records_path
        if not p.exists() or p.stat().st_size == 0:
            return
        with open(p, "rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
            f.seek(0)
            data = f.read()
            f.truncate(data.rfind(b"\n") + 1)

    def append_record(self, rec: RequestRecord) -> None:
        line = json.dumps(_finite(rec.to_dict()), separators=(",", ":")) + "\n"
        with self._lock:
            if not self._tail_checked:
                self._repair_tail()
                self._tail_checked = True
            # Open per record: a few microseconds, and nothing is left buffered if we die.
            with open(self.records_path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                if self.fsync:
                    os.fsync(f.fileno())

    def iter_records(self) -> Iterable[RequestRecord]:
        p = self.records_path
        if not p.exists():
            return
        with open(p, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                yield RequestRecord.from_dict(d)
            except (json.JSONDecodeError, TypeError) as e:
                if i == len(lines) and not line.endswith("\n"):
                    return  # the line a crash cut short: everything before it is intact
                raise UsageError(f"{p}:{i}: corrupt record ({e}) -- fix: delete that line") from None

    def load_records(self) -> list[RequestRecord]:
        return list(self.iter_records())

    @property
    def superseded_path(self) -> Path:
        return self.path / "records.superseded.jsonl"

    def prune_unfinished_records(self) -> int:
        """Move records of points not marked done to ``records.superseded.jsonl`` (for
        resume, which re-runs those points whole); returns how many moved. Nothing is
        deleted, and records.jsonl never holds two measurements of one point."""
        done = set(self.finished_points())
        with self._lock:
            recs = self.load_records()
            keep = [r for r in recs if (r.arm, r.concurrency, r.variant) in done]
            gone = [r for r in recs if (r.arm, r.concurrency, r.variant) not in done]
            if gone:
                with open(self.superseded_path, "a", encoding="utf-8") as f:
                    for r in gone:
                        f.write(json.dumps(_finite(r.to_dict()), separators=(",", ":")) + "\n")
            if len(keep) != len(recs):
                text = "".join(json.dumps(_finite(r.to_dict()), separators=(",", ":")) + "\n" for r in keep)
                atomic_write(self.records_path, text, self.fsync)
            self._tail_checked = True  # rewritten whole: no torn tail
        return len(recs) - len(keep)

    def write_parquet(self, records: list[RequestRecord]) -> Path:
        import pandas as pd

        rows = []
        for r in records:
            d = r.to_dict()
            spec = d.pop("spec") or {}
            for k in ("num_spec_steps", "num_draft_tokens", "num_accepted_tokens",
                      "acceptance_histogram", "mean_acceptance_length"):
                d[f"spec_{k}"] = spec.get(k)
            d["tags"] = json.dumps(d.get("tags") or {})  # parquet cannot store an empty struct
            d["n_output"] = r.n_output
            rows.append(d)
        df = pd.DataFrame(rows)
        df.to_parquet(self.parquet_path, index=False)
        return self.parquet_path

    # ---- points (resume state) ----------------------------------------------------------

    def mark_point(self, arm: str, concurrency: int, variant: str, status: str, *,
                   failure: str | None = None, wall_s: float | None = None,
                   loop_lag_ms: dict[str, float] | float | None = None,
                   n_records: int | None = None, **extra: Any) -> None:
        if status not in POINT_STATUSES:
            raise ValueError(f"status must be one of {POINT_STATUSES}, got {status!r}")
        entry = {
            "arm": arm, "concurrency": int(concurrency), "variant": variant or "", "status": status,
            "failure": failure, "wall_s": wall_s, "loop_lag_ms": loop_lag_ms, "n_records": n_records,
            "finished_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), **extra,
        }
        with self._lock:
            points = [p for p in self.read_json("points.json", []) or []
                      if (p.get("arm"), p.get("concurrency"), p.get("variant") or "") != (arm, int(concurrency), variant or "")]
            points.append(entry)
            self.write_json("points.json", points)

    def all_points(self) -> dict[PointKey, dict[str, Any]]:
        """Every marked point (any status) by (arm, concurrency, variant)."""
        out: dict[PointKey, dict[str, Any]] = {}
        for p in self.read_json("points.json", []) or []:
            out[PointKey(p["arm"], int(p["concurrency"]), p.get("variant") or "")] = p
        return out

    def finished_points(self) -> dict[PointKey, dict[str, Any]]:
        """Points that resume skips: status ok or partial. ``key in finished_points()``."""
        return {k: v for k, v in self.all_points().items() if v.get("status") in RESUMABLE_DONE}

    # ---- summary --------------------------------------------------------------------------

    def write_summary(self, summary: dict[str, Any]) -> None:
        summary = {"schema_version": SCHEMA_VERSION, **summary}
        summary.setdefault("run_id", self.name)
        self.write_json("summary.json", summary)
        rows = summary.get("rows") or []
        keys: list[str] = []
        for r in rows:
            keys += [k for k in r if k not in keys]
        tmp = self.summary_csv_path.with_name(".summary.csv.tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            for r in rows:
                w.writerow({k: _csv_cell(r.get(k)) for k in keys})
        os.replace(tmp, self.summary_csv_path)

    def load_summary(self) -> dict[str, Any]:
        data = self.read_json("summary.json")
        if data is None:
            raise UsageError(f"{self.summary_path} not found -- the run has not finished; "
                             f"`speedbench run --resume {self.path}` completes it")
        if not isinstance(data, dict) or "rows" not in data:
            raise UsageError(f"{self.summary_path}: not a speedbench summary (no 'rows')")
        version = data.get("schema_version")
        if not isinstance(version, int):
            raise UsageError(f"{self.summary_path}: missing schema_version")
        if version > SCHEMA_VERSION:
            raise UsageError(
                f"{self.summary_path} has schema_version {version}, newer than this speedbench "
                f"understands ({SCHEMA_VERSION}) -- fix: upgrade speedbench to read it")
        return data


def _csv_cell(v: Any) -> Any:
    if isinstance(v, (list, dict)):
        return json.dumps(_finite(v))
    if isinstance(v, float) and not math.isfinite(v):
        return ""
    return v


class Run:
    """A finished run as reports see it. Records are read on first use (they can be large).

    ``run_dir`` may be None for a bare summary dict (e.g. printed right after a run);
    records, provenance and scenario are then empty."""

    def __init__(self, run_dir: RunDir | None, summary: dict[str, Any]):
        self.dir = run_dir
        self.summary = summary

    @property
    def path(self) -> Path | None:
        return self.dir.path if self.dir else None

    @property
    def run_id(self) -> str:
        return str(self.summary.get("run_id") or (self.dir.name if self.dir else ""))

    @property
    def scenario_name(self) -> str:
        return str(self.summary.get("scenario") or (self.dir.path.parent.name if self.dir else ""))

    @property
    def created_utc(self) -> str:
        return str(self.summary.get("created_utc") or "")

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.summary.get("rows") or []

    @property
    def categories(self) -> list[dict[str, Any]]:
        return self.summary.get("categories") or []

    @property
    def baseline(self) -> str | None:
        return self.summary.get("baseline")

    @property
    def reference(self) -> dict[str, Any]:
        return self.summary.get("reference") or self.scenario.get("reference") or {}

    @cached_property
    def records(self) -> list[RequestRecord]:
        return self.dir.load_records() if self.dir else []

    @cached_property
    def provenance(self) -> dict[str, Any]:
        return self.dir.load_provenance() if self.dir else {}

    @cached_property
    def scenario(self) -> dict[str, Any]:
        return self.dir.load_scenario() if self.dir else {}

    @cached_property
    def points(self) -> dict[PointKey, dict[str, Any]]:
        return self.dir.all_points() if self.dir else {}

    def arms(self) -> list[str]:
        """Arm names in summary order (scenario order as written by the runner)."""
        seen: list[str] = []
        for r in self.rows:
            if r.get("arm") not in seen:
                seen.append(r.get("arm"))
        return seen

    def row(self, arm: str, concurrency: int, variant: str = "") -> dict[str, Any] | None:
        for r in self.rows:
            if r.get("arm") == arm and r.get("concurrency") == concurrency and (r.get("variant") or "") == variant:
                return r
        return None


def load_run(path: str | Path) -> Run:
    """A run folder (or its summary.json) -> :class:`Run`; UsageError when unreadable."""
    rd = RunDir.open(path)
    return Run(rd, rd.load_summary())
