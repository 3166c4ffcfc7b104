"""Provenance as a typed record: what exactly one arm measured (engine and version, target,
draft, launch command, hardware, data, speedbench itself).

Each engine fills it in (``Engine.provenance``) and reads its own saved form back
(``Engine.read_provenance``): provenance.json keeps the engine's shape, so old and new run
folders look the same on disk, while everything outside the engine reads these fields.
What only the engine understands stays in :attr:`Provenance.engine_part`, which only that
engine interprets; it says what of it a report shows through :attr:`Provenance.facts` and
:attr:`Provenance.notes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Protocol


@dataclass(frozen=True)
class Draft:
    """The draft model an arm ran: where it was, and hashes that say which one it was."""

    model: str = ""  # the path or hub name it was given as
    method: str = ""
    config_path: str = ""
    config_sha256: str = ""
    weights_sha256: str = ""
    weights_bytes: int = 0
    architectures: tuple[str, ...] = ()
    eagle_version: str = ""  # "3", "3.1", or "" (not EAGLE 3, or its config unread)


@dataclass(frozen=True)
class Hardware:
    """The engine's hardware() record (or host.json's), read by attribute. Values stay as
    stored (a list stays a list) so that every report prints what it printed before."""

    summary: Any = None
    description: Any = None  # host.json's word for it
    cpu: Any = None
    gpus: Any = None
    cuda: Any = None
    cpu_flags: Any = None
    stored: frozenset[str] = frozenset()  # the keys the record held: a missing key is not a None value

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Hardware:
        known = [f.name for f in fields(cls) if f.name != "stored"]
        return cls(**{k: d.get(k) for k in known}, stored=frozenset(d))


@dataclass(frozen=True)
class Provenance:
    """One arm's provenance; ``saved`` is exactly what provenance.json holds for the arm."""

    engine: str  # the engine's name ("vllm"), as server.engine names it
    engine_label: str  # how reports name it ("vLLM")
    engine_version: str
    arm: str = ""
    launcher: str = ""
    target: str = ""  # the target model
    target_config_sha256: str = ""
    argv: tuple[str, ...] = ()  # the launch command, secrets redacted
    command: str = ""
    gpus: tuple[int, ...] | None = None
    base_url: str = ""
    speculative: bool = False
    speculative_config: Mapping[str, Any] | None = None
    method: str = ""
    k: int | None = None  # speculative tokens per step
    draft: Draft | None = None
    hardware: Mapping[str, Any] = field(default_factory=dict)  # the engine's hardware() record
    data: Mapping[str, Any] = field(default_factory=dict)  # the workload's fingerprint (sha256, ...)
    speedbench_version: str = ""
    git_commit: str = ""
    git_dirty: bool = False
    cluster: Mapping[str, Any] = field(default_factory=dict)
    # What a report compares between runs beyond the fields above (label, raw value), and
    # shows in its "Measured" line (label, text): the engine decides both from its own part.
    facts: tuple[tuple[str, Any], ...] = ()
    notes: tuple[tuple[str, str], ...] = ()
    engine_part: Mapping[str, Any] = field(default_factory=dict, repr=False)  # the engine's own; only it reads this
    saved: Mapping[str, Any] = field(default_factory=dict, repr=False)  # provenance.json's entry, as written

    @property
    def spec_model(self) -> str:
        """The draft as the scenario's speculative config named it ("" where it names none)."""
        return str((self.speculative_config or {}).get("model") or "")

    @property
    def draft_model(self) -> str:
        """The draft as the scenario named it, else as the draft record holds it."""
        return self.spec_model or str((self.draft.model if self.draft else "") or "")

    @property
    def eagle_version(self) -> str:
        return self.draft.eagle_version if self.draft else ""

    @property
    def machine(self) -> Hardware:
        """:attr:`hardware`, typed."""
        return Hardware.from_dict(self.hardware)

    @property
    def hardware_summary(self) -> str:
        return str(self.machine.summary or "")

    @property
    def data_sha256(self) -> Any:
        """The workload data's sha256 as recorded (None where the record has none)."""
        return self.data.get("sha256")

    @property
    def version_key(self) -> str:
        """The engine's version as a key (``<engine>_version``): the baseline-reuse match and
        the calibration key name it so, the same key their saved files hold."""
        return f"{self.engine}_version"


class ProvenanceReader(Protocol):
    """An engine's reading of its own saved provenance (old run folders' shapes included)."""

    def read_provenance(self, saved: Mapping[str, Any]) -> Provenance: ...
