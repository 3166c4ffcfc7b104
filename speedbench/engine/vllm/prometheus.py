"""vLLM's Prometheus counters: their names, and one scrape -> spec-decode totals.

The text format, the scrape and the deltas between two scrapes are engine-neutral
(client/scrape.py); which series count drafts and accepted tokens is vLLM's.
"""

from __future__ import annotations

from speedbench.client.scrape import Parsed, SpecCounters, by_position, fold_series, parse_prometheus, series_key

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
# The lines two scrapes must agree on before a snapshot counts as settled (loadgen/measure.py).
SETTLE_PREFIXES = ("vllm:spec_decode", "vllm:generation_tokens")

_BASES = {DRAFTS: "drafts", DRAFT_TOKENS: "draft_tokens", ACCEPTED: "accepted", PER_POS: "per_position"}


def _samples(parsed: Parsed, base: str) -> list[tuple[dict[str, str], float]]:
    # prometheus_client exposes counters as <name>_total; accept a bare name too.
    return parsed.get(base + "_total") or parsed.get(base) or []


def spec_counters(parsed: Parsed) -> SpecCounters:
    """Spec-decode totals summed over engines and label sets, each series kept for
    :func:`speedbench.client.scrape.delta` (its ``_created`` time shows a reset)."""
    out = SpecCounters()
    per: dict[int, float] = {}
    for base, attr in _BASES.items():
        created = {series_key(base, lab): v for lab, v in parsed.get(base + "_created", [])}
        for labels, v in _samples(parsed, base):
            key = series_key(base, labels)
            try:
                pos = int(labels["position"]) if attr == "per_position" else None
            except (KeyError, ValueError):
                continue  # a per-position sample without a usable position counts nowhere
            # [value, created, field, position]: what delta() needs, no key parsing
            out.series[key] = [v, created.get(key), attr, pos]
            fold_series(out, per, attr, pos, v)
    out.per_position = by_position(per)
    return out


def read_counters(text: str) -> SpecCounters:
    """One scrape's text -> its spec-decode totals (``_created`` kept: resets show)."""
    return spec_counters(parse_prometheus(text, keep_created=True))
