"""The scenario a run folder saved (scenario.resolved.yaml), typed for the readers of a
finished run: parsed once, here, and read by attribute everywhere else.

Lenient on purpose: an old folder's scenario must load even where today's pydantic model
(scenario/model.py) would refuse it, so nothing here is validated. A key the file lacks
reads as None (or empty), and values are kept as stored, so a report prints what the
folder holds. Only what readers use is typed; ``Run.scenario`` stays the raw dict for
what needs the whole of it (hashing it, validating it again, the variants' buckets).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from speedbench.metrics.stored import StoredRow


@dataclass(frozen=True)
class StoredServer(StoredRow):
    """The saved ``server:``: the target model and the launch args readers compare."""

    model: str | None = None
    tokenizer: str | None = None
    args: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class StoredArm(StoredRow):
    """One saved arm: its name and speculative config (None for the baseline)."""

    name: str | None = None
    speculative_config: Mapping[str, Any] | None = None

    @property
    def spec(self) -> Mapping[str, Any]:
        """The speculative config as stored, empty for an arm without one."""
        return self.speculative_config if isinstance(self.speculative_config, Mapping) else {}

    @property
    def draft_model(self) -> str:
        return str(self.spec.get("model") or "")

    @property
    def draft_method(self) -> str:
        return str(self.spec.get("method") or "")


@dataclass(frozen=True)
class StoredWorkload(StoredRow):
    """The saved ``workload:``: what the reports describe and the exports carry."""

    source: str | None = None
    config: str | None = None
    categories: list[str] | None = None
    api: str | None = None
    tokenizer: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None

    @property
    def dataset(self) -> str:
        """``speed_bench:<config>`` or the source (``sample``, ``jsonl``, ``random``): a
        SPEED-Bench config means something only for SPEED-Bench data."""
        source = str(self.source or "")
        return f"speed_bench:{self.config}" if source == "speed_bench" else source


@dataclass(frozen=True)
class StoredScenario:
    """The saved scenario's facts that readers use (see the module's docstring)."""

    server: StoredServer = StoredServer()
    arms: tuple[StoredArm, ...] = ()
    workload: StoredWorkload | None = None  # None: the file held no workload (or none at all)
    percentiles: list[float] | None = None
    reference: Mapping[str, Any] | None = None
    checkpoint_reference: str | None = None
    gates: list[Any] | None = None  # as stored: the gate file's parser checks them (scenario/gatefile.py)
    gates_off: tuple[str, ...] = ()

    def arm(self, name: str) -> StoredArm | None:
        return next((a for a in self.arms if a.name == name), None)

    @property
    def temperature(self) -> Any:
        """The workload's temperature; 0 (the model's default, greedy) where none was saved."""
        w = self.workload
        return w.temperature if w is not None and w.has("temperature") else 0

    @property
    def arm_names(self) -> list[Any]:
        """The saved arms' names, in order (None where an old file's arm has none)."""
        return [a.name for a in self.arms]

    @classmethod
    def from_dict(cls, d: Any) -> StoredScenario:
        """The scenario as a folder saved it; anything not a mapping reads as empty."""
        if not isinstance(d, Mapping):
            return cls()
        server, workload, reference = d.get("server"), d.get("workload"), d.get("reference")
        arms: Any = d.get("arms")
        return cls(server=StoredServer.from_dict(server) if isinstance(server, Mapping) else StoredServer(),
                   arms=tuple(StoredArm.from_dict(a) for a in (arms if isinstance(arms, list) else [])
                              if isinstance(a, Mapping)),
                   workload=StoredWorkload.from_dict(workload) if isinstance(workload, Mapping) and workload
                   else None,
                   percentiles=d.get("percentiles"), reference=reference if isinstance(reference, Mapping) else None,
                   checkpoint_reference=d.get("checkpoint_reference"), gates=d.get("gates"),
                   gates_off=tuple(d.get("gates_off") or ()))
