"""vLLM's Prometheus counters: their names, and one scrape -> spec-decode totals.

The text format, the scrape and the deltas between two scrapes are engine-neutral
(client/scrape.py); which series count drafts and accepted tokens is vLLM's.
"""

from __future__ import annotations

from speedbench.client.scrape import Parsed, SpecCounters, counters_of, parse_prometheus

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
# The lines two scrapes must agree on before a snapshot counts as settled (loadgen/measure.py).
SETTLE_PREFIXES = ("vllm:spec_decode", "vllm:generation_tokens")

_BASES = {DRAFTS: "drafts", DRAFT_TOKENS: "draft_tokens", ACCEPTED: "accepted", PER_POS: "per_position"}


def spec_counters(parsed: Parsed) -> SpecCounters:
    """Spec-decode totals of vLLM's counters, summed over engines and label sets
    (:func:`speedbench.client.scrape.counters_of`)."""
    return counters_of(parsed, _BASES)


def read_counters(text: str) -> SpecCounters:
    """One scrape's text -> its spec-decode totals (``_created`` kept: resets show)."""
    return spec_counters(parse_prometheus(text, keep_created=True))
