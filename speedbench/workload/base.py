"""What every workload source is, and what loading one yields.

A source (one module each: speed_bench.py, sample.py, jsonl.py, random_tokens.py) reads
its rows as :class:`~speedbench.records.Prompt` and says how it is described, capped,
fingerprinted for provenance and checked by the doctor. ``workload/sources.py`` picks one
by ``workload.source``; filtering, order and warmup are the same for all
(``workload/select.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedbench.records import Prompt
from speedbench.scenario import VariantSpec, WorkloadSpec

DOCS = "docs/workloads.md"


@dataclass(frozen=True)
class Workload:
    measured: list[Prompt]
    warmup: list[Prompt]
    warnings: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class SourceCheck:
    """The doctor's view of a workload source; never raised, always reported."""

    ok: bool
    n_rows: int
    n_placeholder: int
    message: str


def tag(prompt: Prompt, key: str) -> str:
    return next((v for k, v in prompt.tags if k == key), "")


class Source:
    """One kind of workload source. A subclass overrides :meth:`read`, and what differs."""

    name = ""
    takes_configs = False  # only SPEED-Bench has configs a variant may pick
    # its rows are one local file read without a tokenizer: a dry-run may count them
    counts_cheaply = False

    def read(self, spec: WorkloadSpec, config: str, *, base_dir: Path | None, variant: VariantSpec | None,
             tokenizer: Any) -> tuple[list[Prompt], list[str]]:
        """Every row, unfiltered and in source order, plus warnings to show."""
        raise NotImplementedError

    def default_cap(self, spec: WorkloadSpec, n_rows: int) -> int:
        """How many prompts are measured when ``num_prompts`` is unset."""
        return n_rows

    def describe(self, spec: WorkloadSpec, config: str) -> str:
        """The source as error messages and the doctor name it (before the categories)."""
        return f"source '{spec.source}'"

    def fingerprint(self, spec: WorkloadSpec, base_dir: Path | None) -> dict[str, object]:
        """Provenance beyond source and path: the layout and a hash of the files read.
        May raise ScenarioError / OSError (recorded as the fingerprint's error)."""
        raise NotImplementedError

    def unchecked(self, spec: WorkloadSpec) -> SourceCheck | None:
        """The doctor's answer when this source's rows cannot be read before the run."""
        return None
