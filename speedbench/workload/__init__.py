"""Workloads: which prompts a run sends, in which order, and which ones warm the server up.

Every source (SPEED-Bench, the bundled sample, a JSONL file, random tokens) yields
:class:`~speedbench.records.Prompt` rows. This module filters them (categories, entropy
tiers), refuses placeholder rows, puts them in a seeded order and caps them, so that every
arm of a scenario gets the same prompts in the same order. See docs/workloads.md.
"""

from __future__ import annotations

import importlib.util
from importlib import resources
import random
import warnings
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Callable, Sequence

from speedbench.errors import ScenarioError
from speedbench.records import Prompt
from speedbench.scenario import VariantSpec, WorkloadSpec
from speedbench.workload import jsonl, sample, speed_bench
from speedbench.workload.speed_bench import PLACEHOLDER_PREFIX, is_placeholder

__all__ = [
    "PLACEHOLDER_PREFIX", "RandomPromptsWarning", "SourceCheck", "Workload", "check_source",
    "config_for", "filter_prompts", "is_placeholder", "load_prompts", "load_workload",
    "read_source", "seeded_order", "source_fingerprint", "split_warmup", "tag",
]

DOCS = "docs/workloads.md"


class RandomPromptsWarning(UserWarning):
    """Raised through :mod:`warnings` when random prompts are loaded and nobody took the warning."""


@dataclass(frozen=True)
class SourceCheck:
    """The doctor's view of a workload source; never raised, always reported."""

    ok: bool
    n_rows: int
    n_placeholder: int
    message: str


@dataclass(frozen=True)
class Workload:
    measured: list[Prompt]
    warmup: list[Prompt]
    warnings: tuple[str, ...] = field(default=())


def tag(prompt: Prompt, key: str) -> str:
    return next((v for k, v in prompt.tags if k == key), "")


def config_for(spec: WorkloadSpec, variant: VariantSpec | None = None) -> str:
    """The SPEED-Bench config a variant reads (its own ``config`` wins over the workload's)."""
    if variant is not None and variant.config:
        if spec.source != "speed_bench":
            raise ScenarioError(
                f"workload.variants[{variant.name}].config is set, but workload.source is "
                f"'{spec.source}' -- fix: configs only apply to source speed_bench; remove it"
            )
        return variant.config
    return spec.config


def read_source(
    spec: WorkloadSpec, *, base_dir: Path | None = None, variant: VariantSpec | None = None, tokenizer=None
) -> tuple[list[Prompt], list[str]]:
    """Every row of the source, unfiltered and in source order, plus warnings to show."""
    config = config_for(spec, variant)
    if spec.source == "speed_bench":
        return speed_bench.load(spec.path, config, base_dir=base_dir), []
    if spec.source == "sample":
        return sample.load_sample(), []
    if spec.source == "jsonl":
        return jsonl.load_jsonl(spec.path or "", base_dir=base_dir), []
    # random: draw enough rows that warmup can use rows of its own
    n = (spec.num_prompts or jsonl.DEFAULT_RANDOM_PROMPTS) + spec.warmup
    prompts, warning = jsonl.random_prompts(
        allow=spec.allow_random, seed=spec.seed, n=n,
        input_tokens=variant.input_tokens if variant else None, tokenizer=tokenizer,
    )
    return prompts, [warning]


def filter_prompts(
    prompts: Sequence[Prompt], categories: Sequence[str] = (), entropy_tiers: Sequence[str] = ()
) -> list[Prompt]:
    """Keep the rows in any of ``categories`` and any of ``entropy_tiers`` (empty = all).

    Asking for a category or tier that no row has is an error, not an empty run: it is
    almost always a typo.
    """
    out = list(prompts)
    if categories:
        have = sorted({p.category for p in out})
        wanted = {c.strip().lower() for c in categories}
        unknown = sorted(wanted - {h.lower() for h in have})
        if unknown:
            raise ScenarioError(
                f"workload.categories: no rows in {unknown} -- fix: use categories this source has: {', '.join(have)}"
            )
        out = [p for p in out if p.category.lower() in wanted]
    if entropy_tiers:
        have = sorted({tag(p, "entropy_tier") for p in out} - {""})
        if not have:
            raise ScenarioError(
                "workload.entropy_tiers: these rows carry no entropy tier -- fix: tiers exist only in "
                "SPEED-Bench's throughput_* configs; remove entropy_tiers or use such a config"
            )
        wanted = {speed_bench.normalize_tier(t) for t in entropy_tiers}
        unknown = sorted(wanted - set(have))
        if unknown:
            raise ScenarioError(
                f"workload.entropy_tiers: no rows in tier(s) {unknown} -- fix: use {', '.join(have)}"
            )
        out = [p for p in out if tag(p, "entropy_tier") in wanted]
    return out


def seeded_order(prompts: Sequence[Prompt], seed: int) -> list[Prompt]:
    """A seeded, stratified order that does not depend on file order or file splitting.

    Rows are grouped by (category, entropy tier); each group is sorted by id and shuffled
    with the seed; the groups are then interleaved round-robin. Capping the result to N
    therefore keeps the groups balanced, and closed-loop batches mix categories.
    """
    rng = random.Random(f"workload-order:{seed}")
    groups: dict[tuple[str, str], list[Prompt]] = {}
    for p in prompts:
        groups.setdefault((p.category, tag(p, "entropy_tier")), []).append(p)
    ordered_groups = []
    for key in sorted(groups):
        g = sorted(groups[key], key=lambda p: (p.id, p.turns))
        rng.shuffle(g)
        ordered_groups.append(g)
    return [p for rnd in zip_longest(*ordered_groups) for p in rnd if p is not None]


def placeholder_error(placeholders: Sequence[Prompt], total: int, what: str) -> ScenarioError:
    by_source: dict[str, int] = {}
    for p in placeholders:
        by_source[p.source or "(no source)"] = by_source.get(p.source or "(no source)", 0) + 1
    sources = ", ".join(f"{s} ({n})" for s, n in sorted(by_source.items(), key=lambda kv: (-kv[1], kv[0])))
    return ScenarioError(
        f"{len(placeholders)} of {total} selected rows of {what} are placeholders, not prompts "
        f"(their text begins '{PLACEHOLDER_PREFIX}'); sources: {sources}. Benchmarking them would "
        "measure the placeholder text. -- fix: prepare the full data from the original sources and "
        f"point workload.path at it (see {DOCS}, 'Placeholders'), or select categories without "
        "placeholders (`speedbench data inspect` shows where they are)"
    )


def _describe(spec: WorkloadSpec, config: str) -> str:
    what = f"{speed_bench.HUB_NAME} config '{config}'" if spec.source == "speed_bench" else f"source '{spec.source}'"
    if spec.categories:
        what += f" (categories {', '.join(spec.categories)})"
    return what


def _pool(spec: WorkloadSpec, base_dir, variant, tokenizer) -> tuple[list[Prompt], list[str]]:
    rows, notes = read_source(spec, base_dir=base_dir, variant=variant, tokenizer=tokenizer)
    rows = filter_prompts(rows, spec.categories, spec.entropy_tiers)
    bad = [p for p in rows if is_placeholder(p)]
    if bad:
        raise placeholder_error(bad, len(rows), _describe(spec, config_for(spec, variant)))
    if not rows:
        raise ScenarioError(f"workload: {_describe(spec, config_for(spec, variant))} holds no rows")
    return seeded_order(rows, spec.seed), notes


def _cap(spec: WorkloadSpec, pool: list[Prompt]) -> int:
    if spec.num_prompts:
        return spec.num_prompts
    # random draws extra rows for warmup; uncapped means its default count
    return jsonl.DEFAULT_RANDOM_PROMPTS if spec.source == "random" else len(pool)


def load_workload(
    spec: WorkloadSpec, *, base_dir: Path | None = None, variant: VariantSpec | None = None, tokenizer=None
) -> Workload:
    """Measured prompts (capped to ``num_prompts``) and ``spec.warmup`` distinct warmup prompts.

    Warmup prompts come from the rows the cap left out; see :func:`split_warmup`.
    """
    pool, notes = _pool(spec, base_dir, variant, tokenizer)
    cap = _cap(spec, pool)
    warmup, measured = split_warmup(pool[:cap], spec.warmup, spare=pool[cap:])
    return Workload(measured=measured, warmup=warmup, warnings=tuple(notes))


def load_prompts(
    spec: WorkloadSpec,
    *,
    base_dir: Path | None = None,
    variant: VariantSpec | None = None,
    tokenizer=None,
    on_warning: Callable[[str], None] | None = None,
) -> list[Prompt]:
    """The measured prompts: filtered, placeholder-free, seeded order, capped to ``num_prompts``.

    ``base_dir`` resolves a relative ``workload.path`` (pass the scenario's folder).
    ``variant.config`` replaces ``workload.config``. Warnings (random prompts) go to
    ``on_warning``, else to :mod:`warnings` as :class:`RandomPromptsWarning`.
    """
    pool, notes = _pool(spec, base_dir, variant, tokenizer)
    for note in notes:
        if on_warning is not None:
            on_warning(note)
        else:
            warnings.warn(note, RandomPromptsWarning, stacklevel=2)
    return pool[: _cap(spec, pool)]


def split_warmup(
    prompts: Sequence[Prompt], n: int, *, spare: Sequence[Prompt] = ()
) -> tuple[list[Prompt], list[Prompt]]:
    """-> (warmup, measured). ``measured`` is always all of ``prompts``, never shortened.

    Warmup prompts must differ from measured ones, or the server's prefix cache would
    hand the measured requests a head start. They are taken from ``spare`` (rows outside
    the measured set, skipping any with a measured id or text). When ``spare`` runs out,
    measured prompts are reused *perturbed*: the first turn gets a numbered "warm-up"
    line in front, so no KV-cache block of a warmup request matches a measured one
    (their ids become ``warmup-<k>-<id>``).
    """
    measured = list(prompts)
    warmup: list[Prompt] = []
    if n <= 0:
        return warmup, measured
    ids = {p.id for p in measured}
    texts = {p.turns for p in measured}
    for p in spare:
        if len(warmup) == n:
            break
        if p.id in ids or p.turns in texts:
            continue
        warmup.append(p)
        ids.add(p.id)
        texts.add(p.turns)
    i = 0
    while len(warmup) < n and measured:
        src = measured[i % len(measured)]
        k = len(warmup)
        first = f"(Warm-up request {k + 1}; answer the request below.)\n\n{src.turns[0]}"
        warmup.append(Prompt(
            id=f"warmup-{k}-{src.id}", turns=(first,) + src.turns[1:], category=src.category,
            sub_category=src.sub_category, source=src.source, tags=src.tags + (("warmup", "perturbed"),),
        ))
        i += 1
    return warmup, measured


def source_fingerprint(spec: WorkloadSpec, *, base_dir: Path | None = None) -> dict[str, object]:
    """What data a run read, for provenance: the layout and a content hash of its files.

    Covers every config the workload and its variants read. Never raises: a source that
    cannot be located is recorded with its error (the run itself fails earlier, and louder).
    """
    out: dict[str, object] = {"source": spec.source, "path": spec.path or ""}
    if spec.source == "random":
        return {**out, "sha256": "", "note": "generated prompts; no data files"}
    if spec.source == "speed_bench" and not spec.path:
        return {**out, "sha256": "", "note": f"read from the hub ({speed_bench.HUB_NAME}); no local files to hash"}
    try:
        if spec.source == "sample":
            f = Path(str(resources.files("speedbench").joinpath("data").joinpath(sample.SAMPLE_FILE)))
            return {**out, "layout": "file", **speed_bench.fingerprint([f], f.parent)}
        if spec.source == "jsonl":
            f = speed_bench.resolve_path(spec.path or "", base_dir)
            return {**out, "layout": "file", **speed_bench.fingerprint([f], f.parent)}
        root = speed_bench.resolve_path(spec.path or "", base_dir)
        configs: dict[str, str] = {}
        files: list[Path] = []
        for variant in [None, *spec.variants]:
            config = config_for(spec, variant)
            if config not in configs:
                found = speed_bench.locate(root, config)
                configs[config] = found.layout
                files.extend(found.files)
        base = root if root.is_dir() else root.parent
        return {**out, "configs": configs, **speed_bench.fingerprint(files, base)}
    except (ScenarioError, OSError) as e:
        return {**out, "sha256": "", "error": str(e)}


def check_source(spec: WorkloadSpec, *, base_dir: Path | None = None) -> SourceCheck:
    """Pre-flight check of every config the workload (and its variants) will read.

    Reads local data only: with no ``workload.path`` the hub is not contacted (the doctor
    downloads nothing), so the rows are reported unchecked; the run itself still refuses
    placeholders before any server starts.
    """
    if spec.source == "speed_bench" and not spec.path:
        if importlib.util.find_spec("datasets") is None:
            return SourceCheck(False, 0, 0, (
                f"workload.path is not set and 'datasets' is not installed, so {speed_bench.HUB_NAME} "
                f"cannot be read -- fix: set workload.path to a prepared local copy (see {DOCS})"))
        return SourceCheck(True, 0, 0, (
            f"rows will be read from the hub ({speed_bench.HUB_NAME}) at run time and are not checked "
            f"here; hub rows of some sources are placeholders -- set workload.path to a prepared copy (see {DOCS})"))
    n_rows = n_ph = 0
    parts: list[str] = []
    ok = True
    seen: set[str] = set()
    for variant in [None, *spec.variants]:
        try:
            config = config_for(spec, variant)
            if config in seen:
                continue
            seen.add(config)
            label = _describe(spec, config)
            rows, notes = read_source(spec, base_dir=base_dir, variant=variant)
            rows = filter_prompts(rows, spec.categories, spec.entropy_tiers)
        except ScenarioError as e:
            ok = False
            parts.append(str(e))
            continue
        bad = sum(1 for p in rows if is_placeholder(p))
        n_rows += len(rows)
        n_ph += bad
        if bad:
            ok = False
            parts.append(f"{label}: {len(rows)} rows, {bad} placeholders -- fix: prepare the full data (see {DOCS})")
        elif not rows:
            ok = False
            parts.append(f"{label}: no rows")
        else:
            parts.append(f"{label}: {len(rows)} rows, no placeholders")
        parts.extend(notes)
    return SourceCheck(ok=ok, n_rows=n_rows, n_placeholder=n_ph, message="; ".join(parts))
