"""The output check's stored results, typed: summary.json's ``outputs`` block (each point
against its reference) and the check pass's answers (outputs/checks.json), each entry a
frozen row read by attribute (metrics/stored.py's :class:`StoredRow`: an old folder's keys
and order kept, so ``to_dict`` gives the entry back as stored).

results/output_summary.py writes the block and reads it back through :meth:`OutputsBlock.read`;
metrics/outputs.py decides the verdicts. Pure: no numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from speedbench.metrics.outputs import LOSSY, NOT_CHECKED
from speedbench.metrics.stored import Num, StoredRow
from speedbench.records import PointKey


@dataclass(frozen=True)
class CheckAnswer(StoredRow):
    """One answer of the check pass (outputs/checks.json, run/output_check.py): which
    divergence it checked, and the target's margin there, or why the check failed."""

    arm: str | None = None
    concurrency: int | None = None
    variant: str | None = ""  # an answer from before variants were written: the default workload
    repeat: int | None = None
    prompt_index: int | None = None
    turn: int | None = None
    position: int | None = None
    ref_token: int | None = None
    arm_token: int | None = None
    margin: Num = None
    exact: bool | None = None
    top_listed: int | None = None
    check_s: Num = None
    error: str | None = None


def read_checks(stored: Any) -> list[CheckAnswer]:
    """outputs/checks.json's answers as read from disk (entries that are not objects skipped)."""
    return [CheckAnswer.from_dict(e) for e in stored or () if isinstance(e, Mapping)]


@dataclass(frozen=True)
class PointRef(StoredRow):
    """The point an entry's outputs were held against (its ``reference``)."""

    arm: str | None = None
    concurrency: int | None = None
    variant: str | None = None

    @property
    def key(self) -> PointKey:
        return PointKey(str(self.arm), int(self.concurrency or 0), str(self.variant or ""))


@dataclass(frozen=True)
class FirstDivergence(StoredRow):
    """Where a point's outputs first parted from its reference's: tokens in common before it."""

    min: int | None = None
    median: Num = None
    max: int | None = None


@dataclass(frozen=True)
class Margin(StoredRow):
    """One of an entry's ``largest_margins``: a checked divergence and its margin."""

    prompt_index: int | None = None
    turn: int | None = None
    position: int | None = None
    margin: Num = None
    exact: bool | None = None


@dataclass(frozen=True)
class OutputsEntry(StoredRow):
    """One point's outputs against its reference: the verdict, its reason and figures
    (results/output_summary.py). A point without comparisons holds no divergence keys."""

    arm: str | None = None
    concurrency: int | None = None
    variant: str | None = None
    reference: PointRef | None = None
    verdict: str | None = None
    reason: str | None = None
    pairs: int | None = None
    identical: int | None = None
    identical_fraction: Num = None
    divergences: int | None = None
    first_divergence: FirstDivergence | None = None
    checked: int | None = None
    near_ties: int | None = None
    largest_margins: tuple[Margin, ...] = ()
    floor: str | None = None
    nested: ClassVar[Mapping[str, type[StoredRow]]] = {"largest_margins": Margin}
    nested_one: ClassVar[Mapping[str, type[StoredRow]]] = {"reference": PointRef, "first_divergence": FirstDivergence}

    @property
    def key(self) -> PointKey:
        return PointKey(str(self.arm), int(self.concurrency or 0), str(self.variant or ""))

    @property
    def verdict_text(self) -> str:
        """The verdict; "not checked" where the entry holds none."""
        return str(self.verdict or NOT_CHECKED)

    @property
    def lossy(self) -> bool:
        """The point's outputs differ from its reference's beyond numerics."""
        return self.verdict == LOSSY

    @property
    def reason_text(self) -> str:
        return str(self.reason or "")

    @property
    def fraction(self) -> float | None:
        """The identical fraction as a number; None where nothing was compared."""
        frac = self.identical_fraction
        return float(frac) if isinstance(frac, (int, float)) else None


@dataclass(frozen=True)
class OutputsBlock(StoredRow):
    """summary.json's ``outputs``: the rule's figures, why nothing was compared (sampling)
    where so, and each compared point's entry (``points``: None where the block holds no list)."""

    near_tie_nats: Num = None
    top: int | None = None
    checks_per_point: int | None = None
    not_checked: str | None = None
    points: tuple[OutputsEntry, ...] | None = None
    nested: ClassVar[Mapping[str, type[StoredRow]]] = {"points": OutputsEntry}

    @classmethod
    def read(cls, summary: Mapping[str, Any]) -> OutputsBlock | None:
        """A summary's block; None where it has none (a folder from before outputs were kept)."""
        block = summary.get("outputs") if isinstance(summary, Mapping) else None
        return cls.from_dict(block) if isinstance(block, Mapping) else None
