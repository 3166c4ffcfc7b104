"""Our Prometheus parser against prometheus_client's ``text_string_to_metric_families``.

speedbench keeps its own parser (client/scrape.py) because prometheus_client's stops at
the first line it cannot parse, losing every sample after it; ours skips that line
(docs/metrics.md, "Prometheus counters"). On well-formed text the two must agree, sample
for sample: a real vLLM 0.32 scrape (tests/data/prometheus/, a CPU run's EAGLE 3 arm:
spec-decode counters, their _created gauges, a histogram) and the mixed text of
tests/integration/test_scrape.py (two engines, escaped label values, NaN, a timestamp).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from speedbench.client.scrape import parse_prometheus
from speedbench.engine.vllm.prometheus import spec_counters

parser = pytest.importorskip("prometheus_client.parser")

VLLM_TEXT = (Path(__file__).parent.parent.parent / "data" / "prometheus" / "vllm-0.32-cpu-eagle3.txt").read_text()


def theirs(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in parser.text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


def _same(a, b) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        if len(a[k]) != len(b[k]):
            return False
        for (la, va), (lb, vb) in zip(a[k], b[k]):
            if la != lb or not (va == vb or (math.isnan(va) and math.isnan(vb))):
                return False
    return True


def test_a_real_vllm_scrape_parses_the_same():
    ours = parse_prometheus(VLLM_TEXT, keep_created=True)
    assert _same(ours, theirs(VLLM_TEXT))
    c = spec_counters(parse_prometheus(VLLM_TEXT))
    assert (c.drafts, c.draft_tokens, c.accepted, c.per_position) == (434.0, 1302.0, 850.0, [325.0, 280.0, 245.0])


def test_the_integration_tiers_mixed_text_parses_the_same():
    from tests.integration.test_scrape import METRICS

    assert _same(parse_prometheus(METRICS, keep_created=True), theirs(METRICS))


def test_one_bad_line_costs_prometheus_client_the_whole_scrape_and_us_that_line():
    text = "garbage {\n" + VLLM_TEXT
    with pytest.raises(ValueError):
        theirs(text)  # if this stops raising, prometheus_client skips bad lines now: see docs/metrics.md
    assert spec_counters(parse_prometheus(text)).drafts == 434.0
