"""Loading a workload: the source's rows, filtered, placeholder-free, in the seeded order,
capped to ``num_prompts``, and the warmup prompts beside them. The one loading path."""

from __future__ import annotations

from pathlib import Path

from speedbench.errors import ScenarioError
from speedbench.records import Prompt
from speedbench.scenario import VariantSpec, WorkloadSpec
from speedbench.workload.base import Workload
from speedbench.workload.select import filter_prompts, placeholder_error, seeded_order, split_warmup
from speedbench.workload.sources import config_for, describe, source_of
from speedbench.workload.speed_bench import is_placeholder


def read_source(
    spec: WorkloadSpec, *, base_dir: Path | None = None, variant: VariantSpec | None = None, tokenizer=None
) -> tuple[list[Prompt], list[str]]:
    """Every row of the source, unfiltered and in source order, plus warnings to show."""
    config = config_for(spec, variant)
    return source_of(spec).read(spec, config, base_dir=base_dir, variant=variant, tokenizer=tokenizer)


def _pool(spec: WorkloadSpec, base_dir, variant, tokenizer) -> tuple[list[Prompt], list[str]]:
    rows, notes = read_source(spec, base_dir=base_dir, variant=variant, tokenizer=tokenizer)
    rows = filter_prompts(rows, spec.categories, spec.entropy_tiers)
    bad = [p for p in rows if is_placeholder(p)]
    if bad:
        raise placeholder_error(bad, len(rows), describe(spec, config_for(spec, variant)))
    if not rows:
        raise ScenarioError(f"workload: {describe(spec, config_for(spec, variant))} holds no rows")
    return seeded_order(rows, spec.seed), notes


def load_workload(
    spec: WorkloadSpec, *, base_dir: Path | None = None, variant: VariantSpec | None = None, tokenizer=None
) -> Workload:
    """Measured prompts (capped to ``num_prompts``) and ``spec.warmup`` distinct warmup prompts.

    ``base_dir`` resolves a relative ``workload.path`` (pass the scenario's folder);
    ``variant.config`` replaces ``workload.config``. Warmup prompts come from the rows the
    cap left out; see :func:`~speedbench.workload.select.split_warmup`. Warnings (random
    prompts) are the workload's ``warnings``, for the caller to show.
    """
    pool, notes = _pool(spec, base_dir, variant, tokenizer)
    cap = spec.num_prompts or source_of(spec).default_cap(spec, len(pool))
    warmup, measured = split_warmup(pool[:cap], spec.warmup, spare=pool[cap:])
    return Workload(measured=measured, warmup=warmup, warnings=tuple(notes))


def count_prompts(spec: WorkloadSpec) -> int | None:
    """The measured prompts per point, loaded as a run loads them, where that is one local
    file's read (the sample, a JSONL file). None for a source that would need a tokenizer
    or a dataset, and for one that fails to load: the run's own loading says why."""
    if not source_of(spec).counts_cheaply:
        return None
    try:
        return len(load_workload(spec).measured)
    except (ScenarioError, OSError):
        return None
