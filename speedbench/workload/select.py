"""What every source's rows go through: the filters, placeholders refused, a seeded
order, and warmup prompts distinct from the measured ones (docs/workloads.md, "Filters
and sampling")."""

from __future__ import annotations

import random
from itertools import zip_longest
from typing import Sequence

from speedbench.errors import ScenarioError
from speedbench.records import Prompt
from speedbench.workload.base import DOCS, tag
from speedbench.workload.speed_bench import PLACEHOLDER_PREFIX
from speedbench.workload.speed_bench_rows import normalize_tier


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
        wanted = {normalize_tier(t) for t in entropy_tiers}
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
