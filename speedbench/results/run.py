"""A finished run as reports read it: the summary, and the run folder's files on demand."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from speedbench.client.scrape import SpecCounters
from speedbench.errors import UsageError
from speedbench.metrics.headline import category_headline, with_headline
from speedbench.metrics.registry import DEFAULT_PERCENTILES, SummaryRow
from speedbench.metrics.stored import CategoryRow, NoiseFloorEntry, ScreenEntry, StopEntry, StoredRow
from speedbench.metrics.stored_outputs import OutputsBlock, OutputsEntry
from speedbench.metrics.stored_blocks import ArmCost, BaselineSource, Conditions, Controls, Reference
from speedbench.engine.provenance import Provenance, ProvenanceReader
from speedbench.records import PointKey, RequestRecord
from speedbench.results.files import run_started
from speedbench.results.rounds import PointRound
from speedbench.results.rundir import RunDir
from speedbench.results.stored_scenario import StoredScenario
from speedbench.results.output_summary import outputs_reader, point_outputs
from speedbench.results.verify import Verification, verify_run

if TYPE_CHECKING:
    from speedbench.metrics.table import Requests

_ROW = TypeVar("_ROW", bound=StoredRow)


class RunEngine(ProvenanceReader, Protocol):
    """What the readers of a run folder need from the engine that ran it (engine/base.py's
    Engine is one): its name, its saved provenance read back, its Prometheus counters,
    the launch args that leave the step cost alone, its speculative config's flag."""

    name: str
    not_system_args: frozenset[str]
    speculative_flag: str

    def spec_counters(self, text: str) -> SpecCounters: ...
    def speculative_args(self, config: dict[str, Any]) -> list[str]: ...


EXPECTED = "a run folder such as results/<scenario>/<run id>/ (it holds summary.json, points.json, records.jsonl)"


class Run:
    """A finished run as reports see it. Records are read on first use (they can be large).

    ``run_dir`` may be None for a bare summary dict (e.g. printed right after a run);
    records, provenance and scenario are then empty. ``engine``: the engine that ran it
    (the run's own, or the one its folder names: results/loader.py), which reads its
    provenance back."""

    def __init__(self, run_dir: RunDir | None, summary: dict[str, Any], engine: RunEngine | None = None,
                 requests: Requests | None = None):
        self.dir = run_dir
        self.summary = summary
        self.engine = engine
        # the records read already, and their request table (a run's finish): shared, not built again
        self.requests = requests
        rows = summary.get("rows") if isinstance(summary, dict) else None
        for r in rows if isinstance(rows, list) else []:
            if isinstance(r, dict):  # a folder from before the headline keys: derive them
                with_headline(r)
        self.rows: list[SummaryRow] = [SummaryRow.from_dict(r) for r in rows or () if isinstance(r, dict)]

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
    def hardware(self) -> Any:
        """summary.json's ``hardware`` line as stored (None where a folder has none)."""
        return self.summary.get("hardware") if isinstance(self.summary, dict) else None

    @property
    def started(self) -> dt.datetime:
        """When the run started (results/files.py's run_started: the one fallback)."""
        return run_started(self.created_utc, self.run_id, folder=self.dir.path if self.dir else None)

    @cached_property
    def categories(self) -> list[CategoryRow]:
        """summary.json's per-category rows, each with its headline keys derived from its
        point's headline clock (metrics/headline.py's category_headline), never stored."""
        out = []
        for c in self.summary.get("categories") or []:  # as stored: typed once its headline is known
            cat = CategoryRow.from_dict(c)
            point = self.row(str(cat.arm), int(cat.concurrency or 0), str(cat.variant or ""))
            out.append(CategoryRow.from_dict({**c, **category_headline(c, point)}))
        return out

    @cached_property
    def noise_floor(self) -> list[NoiseFloorEntry]:
        """summary.json's ``noise_floor`` (the A/A check), typed."""
        return self._table("noise_floor", NoiseFloorEntry)

    @cached_property
    def stopping(self) -> list[StopEntry]:
        """summary.json's ``stopping`` (sequential stopping's stopped rounds), typed."""
        return self._table("stopping", StopEntry)

    @cached_property
    def screening(self) -> list[ScreenEntry]:
        """summary.json's ``screening`` (a screening run's entries), typed."""
        return self._table("screening", ScreenEntry)

    @cached_property
    def controls(self) -> Controls | None:
        """summary.json's ``controls``, typed; None for a folder from before they were checked."""
        block = self.summary.get("controls") if isinstance(self.summary, dict) else None
        return Controls.from_dict(block) if isinstance(block, dict) else None

    @cached_property
    def conditions(self) -> Conditions | None:
        """summary.json's ``conditions``, typed; None for a folder from before they were recorded."""
        block = self.summary.get("conditions") if isinstance(self.summary, dict) else None
        return Conditions.from_dict(block) if isinstance(block, dict) else None

    @cached_property
    def baseline_source(self) -> BaselineSource:
        """summary.json's ``baseline_source`` (empty for a folder from before it)."""
        return BaselineSource.from_dict(self.summary.get("baseline_source") or {})

    @cached_property
    def arm_costs(self) -> dict[str, ArmCost]:
        """summary.json's ``arms``: what each arm's servers cost."""
        stored = self.summary.get("arms") if isinstance(self.summary, dict) else None
        return {str(a): ArmCost.from_dict(c) for a, c in stored.items() if isinstance(c, dict)} \
            if isinstance(stored, dict) else {}

    @property
    def percentiles(self) -> list[float]:
        """The percentiles the run's rows carry: summary.json's list, else the saved
        scenario's, else the default (a folder from before either was saved)."""
        for source in (self.summary.get("percentiles"), self.stored_scenario.percentiles):
            if isinstance(source, list) and source:
                return [float(p) for p in source]
        return list(DEFAULT_PERCENTILES)

    def _table(self, key: str, kind: type[_ROW]) -> list[_ROW]:
        entries = self.summary.get(key) if isinstance(self.summary, dict) else None
        return [kind.from_dict(e) for e in entries or () if isinstance(e, dict)]

    @property
    def baseline(self) -> str | None:
        return self.summary.get("baseline")

    @cached_property
    def reference(self) -> Reference:
        """summary.json's ``reference``; the scenario's for a folder from before it was copied there."""
        return Reference.from_dict(self.summary.get("reference") or dict(self.stored_scenario.reference or {}))

    @cached_property
    def records(self) -> list[RequestRecord]:
        if self.requests is not None:
            return self.requests.records
        return self.dir.load_records() if self.dir else []

    @cached_property
    def verification(self) -> Verification | None:
        """``speedbench verify``'s check of the folder (None for a bare summary)."""
        return verify_run(self.dir) if self.dir else None

    @property
    def record_problems(self) -> list[str]:
        """What ``speedbench verify`` finds wrong with the records (the same per-round
        digests) or the folder (a missing points.json, records or scenario): every command
        that reads records says so, and a gate fails on it."""
        return self.verification.problems() if self.verification else []

    @cached_property
    def provenance(self) -> dict[str, Provenance]:
        """Each arm's provenance, read back by the run's engine (old folders' shapes too)."""
        if self.dir is None:
            return {}
        if self.engine is None:
            raise ValueError(f"{self.path}: a run's provenance is read by its engine; load it with one")
        return read_provenance(self.dir, self.engine)

    def provenance_of(self, arm: str) -> Provenance:
        """The arm's provenance; for an arm that saved none (its server never came up), its
        engine's empty record (no engine: a blank one)."""
        found = self.provenance.get(arm)
        if found is not None:
            return found
        return self.engine.read_provenance({}) if self.engine else Provenance("", "", "")

    @cached_property
    def scenario(self) -> dict[str, Any]:
        return self.dir.load_scenario() if self.dir else {}

    @cached_property
    def stored_scenario(self) -> StoredScenario:
        """The saved scenario typed (results/stored_scenario.py): what its readers use of it."""
        return StoredScenario.from_dict(self.scenario)

    @cached_property
    def points(self) -> dict[PointKey, PointRound]:
        """Each marked point, its rounds folded (status, failure, wall time), typed."""
        return self.dir.points() if self.dir else {}

    @cached_property
    def outputs_block(self) -> OutputsBlock | None:
        """summary.json's ``outputs`` block, typed; None for a folder from before outputs were kept."""
        return OutputsBlock.read(self.summary)

    @cached_property
    def outputs(self) -> dict[PointKey, OutputsEntry]:
        """Each point's outputs entry (verdict, reason, identical_fraction, ...): use
        :meth:`outputs_of`, which answers "not recorded" for a folder from before them."""
        return point_outputs(self.outputs_block)

    def outputs_of(self, arm: str, concurrency: int, variant: str = "") -> OutputsEntry:
        """The point's outputs verdict (results/output_summary.py), ``not checked (not
        recorded)`` where the summary has none (``the reference`` for the baseline's point
        its other points are held against)."""
        return self._outputs_reader(arm, concurrency, variant)

    @cached_property
    def _outputs_reader(self) -> Callable[[str, int, str], OutputsEntry]:
        return outputs_reader(self.outputs_block, self.baseline)

    def arms(self) -> list[str]:
        """Arm names in summary order (scenario order as written by the runner)."""
        seen: list[Any] = []  # str, or None in a malformed row
        for r in self.rows:
            if r.arm not in seen:
                seen.append(r.arm)
        return seen

    def row(self, arm: str, concurrency: int, variant: str = "") -> SummaryRow | None:
        for r in self.rows:
            if r.arm == arm and r.concurrency == concurrency and (r.variant or "") == variant:
                return r
        return None


def read_provenance(run_dir: RunDir, engine: ProvenanceReader) -> dict[str, Provenance]:
    """Each arm's provenance.json entry, read back by the engine that wrote it."""
    return {arm: engine.read_provenance(p) for arm, p in run_dir.load_provenance().items() if isinstance(p, dict)}


# What RunDir.create and a run's first steps write: a folder holding any of them is a run,
# finished or not (a run stopped before its first point has only the first two folders).
RUN_MARKERS = ("summary.json", "scenario.resolved.yaml", "host.json", "provenance.json", "prometheus", "logs")


def is_run_folder(p: Path) -> bool:
    """A folder a run wrote, whoever wrote it (a cluster job's points-<job>.json too)."""
    return (any((p / m).exists() for m in RUN_MARKERS) or any(p.glob("points*.json"))
            or any(p.glob("records*.jsonl")))


def open_run_dir(path: str | Path) -> RunDir:
    """The one loader of a run folder that a command reads: a missing path, a file where
    the folder belongs, an empty folder or another folder is a UsageError (exit 2) that
    says what was expected, never a traceback further on."""
    p = Path(path)
    if p.is_file() and p.name == "summary.json":
        p = p.parent
    if not p.exists():
        raise UsageError(f"{p}: not found -- expected {EXPECTED}")
    if not p.is_dir():
        raise UsageError(f"{p} is a file -- expected {EXPECTED}")
    try:
        empty = not any(p.iterdir())
    except OSError as e:
        raise UsageError(f"{p}: cannot be read ({e.strerror or e})") from None
    if empty:
        raise UsageError(f"{p} is an empty folder -- expected {EXPECTED}")
    if not is_run_folder(p):
        raise UsageError(f"{p} is not a run folder (no summary.json, points.json or records.jsonl) -- expected "
                         f"{EXPECTED}; `speedbench dashboard` and `speedbench changes` read a folder of runs")
    return RunDir.open(p)

