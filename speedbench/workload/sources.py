"""The workload sources by ``workload.source``: a lookup, one module per source."""

from __future__ import annotations

from speedbench.errors import ScenarioError
from speedbench.scenario import VariantSpec, WorkloadSpec
from speedbench.workload import jsonl, random_tokens, sample, speed_bench
from speedbench.workload.base import Source

SOURCES: dict[str, Source] = {s.name: s for s in (speed_bench.SOURCE, sample.SOURCE, jsonl.SOURCE,
                                                  random_tokens.SOURCE)}


def source_of(spec: WorkloadSpec) -> Source:
    return SOURCES[spec.source]


def config_for(spec: WorkloadSpec, variant: VariantSpec | None = None) -> str:
    """The SPEED-Bench config a variant reads (its own ``config`` wins over the workload's)."""
    if variant is not None and variant.config:
        if not source_of(spec).takes_configs:
            raise ScenarioError(
                f"workload.variants[{variant.name}].config is set, but workload.source is "
                f"'{spec.source}' -- fix: configs only apply to source speed_bench; remove it"
            )
        return variant.config
    return spec.config


def describe(spec: WorkloadSpec, config: str) -> str:
    what = source_of(spec).describe(spec, config)
    if spec.categories:
        what += f" (categories {', '.join(spec.categories)})"
    return what
