"""Latency distributions in summary rows: user-chosen percentiles plus mean and std for
TTFT, TPOT, ITL (per token and per chunk) and E2E, on records with hand-worked answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from speedbench.errors import ScenarioError
from speedbench.metrics.rows import summarize
from speedbench.metrics.registry import ROW_KEYS, latency_keys, percentile_tag, row_keys
from speedbench.records import RequestRecord
from speedbench.scenario import validate_data

S = 1_000_000_000


def rec(idx, sent, chunks, end, error=None):
    """chunks: [(time_s, tokens)]."""
    return RequestRecord(
        arm="a", concurrency=1, prompt_index=idx, prompt_id=f"p{idx}", variant="", repeat=0, turn=0,
        category="", warmup=False, t_queued_ns=int(sent * S), t_sent_ns=int(sent * S), t_end_ns=int(end * S),
        chunk_ns=[int(t * S) for t, _ in chunks], chunk_tokens=[n for _, n in chunks], output_tokens=None,
        spec=None, error=error)


# Two requests:
#   r0 sent 0.5; chunks (0.6, 1) (0.63, 1) (0.69, 2); end 0.7
#      TTFT 100 ms, TPOT 90/3 = 30 ms, E2E 200 ms; chunk gaps 30, 60; per token 30, 30, 30
#   r1 sent 1.0; chunks (1.3, 1) (1.4, 1); end 1.5
#      TTFT 300 ms, TPOT 100 ms, E2E 500 ms; chunk gap 100; per token 100
RECORDS = [rec(0, 0.5, [(0.6, 1), (0.63, 1), (0.69, 2)], 0.7), rec(1, 1.0, [(1.3, 1), (1.4, 1)], 1.5)]


def row(percentiles=(50, 90, 95, 99), records=RECORDS):
    rows = summarize(records, None, None, {"a": {}}, percentiles=percentiles)
    assert len(rows) == 1
    return rows[0]


def test_tags_and_keys():
    assert [percentile_tag(p) for p in (50, 90.0, 99.9, 99.99)] == ["p50", "p90", "p99_9", "p99_99"]
    keys = latency_keys([50, 99.9])
    assert keys[:4] == ("ttft_ms_mean", "ttft_ms_std", "ttft_ms_p50", "ttft_ms_p99_9")
    assert {k.rsplit("_", 2)[0] for k in keys} >= {"ttft_ms", "tpot_ms", "itl_token_ms", "itl_chunk_ms", "e2e_ms"}
    full = row_keys([50, 90])
    assert full[:len(ROW_KEYS)] == ROW_KEYS and len(set(full)) == len(full)
    assert "ttft_ms_p90" in ROW_KEYS and full.count("ttft_ms_p90") == 1  # already a fixed key: not repeated


def test_worked_example():
    r = row()
    assert tuple(r) == row_keys((50, 90, 95, 99))
    # per request
    assert r["ttft_ms_mean"] == pytest.approx(200) and r["ttft_ms_std"] == pytest.approx(100)
    assert r["ttft_ms_p50"] == pytest.approx(200) and r["ttft_ms_p99"] == pytest.approx(298)
    assert r["tpot_ms_mean"] == pytest.approx(65) and r["tpot_ms_std"] == pytest.approx(35)
    assert r["e2e_ms_mean"] == pytest.approx(350) and r["e2e_ms_std"] == pytest.approx(150)
    assert r["e2e_ms_p90"] == pytest.approx(470)
    # pooled gaps: per chunk [30, 60, 100]; per token [30, 30, 30, 100]
    assert r["itl_chunk_ms_mean"] == pytest.approx(np.mean([30, 60, 100]))
    assert r["itl_chunk_ms_std"] == pytest.approx(np.std([30, 60, 100]))
    assert r["itl_chunk_ms_p50"] == pytest.approx(60)
    assert r["itl_token_ms_mean"] == pytest.approx(47.5) and r["itl_token_ms_p50"] == pytest.approx(30)
    assert r["itl_token_ms_p95"] == pytest.approx(np.percentile([30, 30, 30, 100], 95))
    # the fixed keys keep agreeing with the block
    assert r["itl_token_ms_median"] == r["itl_token_ms_p50"] and r["ttft_ms_median"] == r["ttft_ms_p50"]


def test_user_percentiles_and_errors_excluded():
    bad = rec(2, 2.0, [(2.9, 1)], 3.0, error="http_500")
    r = row(percentiles=(10, 99.9), records=[*RECORDS, bad])
    assert "ttft_ms_p10" in r and "ttft_ms_p99_9" in r and "ttft_ms_p95" not in r
    assert r["ttft_ms_p10"] == pytest.approx(120)  # the errored request's 900 ms is not counted
    assert r["n_errors"] == 1


def test_empty_point_has_nan_not_errors():
    rows = summarize([], None, None, {"a": {}}, {("a", 4, ""): {"status": "failed", "failure": "died"}},
                     percentiles=[50])
    assert math.isnan(rows[0]["e2e_ms_p50"]) and math.isnan(rows[0]["itl_chunk_ms_std"])


BASE = {"name": "t", "server": {"model": "m"}, "arms": [{"name": "b"}]}


def test_scenario_percentiles():
    assert validate_data(BASE).percentiles == [50.0, 90.0, 95.0, 99.0]
    assert validate_data({**BASE, "percentiles": [99, 50, 99.9]}).percentiles == [50.0, 99.0, 99.9]
    for bad, msg in (([0], "strictly between 0 and 100"), ([100], "strictly between"), ([50, 50], "distinct"),
                     ([], "at least 1")):
        with pytest.raises(ScenarioError, match=msg):
            validate_data({**BASE, "percentiles": bad})


def test_summary_and_reports_carry_the_chosen_percentiles(tmp_path):
    from speedbench.report.html import render_html
    from speedbench.report.markdown import render_markdown
    from speedbench.report.model import build_report
    from speedbench.results import Run

    rows = summarize(RECORDS, None, None, {"a": {}}, percentiles=[50, 99.9])
    run = Run(None, {"scenario": "t", "run_id": "r", "percentiles": [50, 99.9], "rows": rows, "categories": []})
    md = render_markdown(build_report(run))
    assert "## Latency distributions" in md
    assert "| arm | c | metric (ms) | mean | std | p50 | p99.9 |" in md
    for name in ("TTFT", "TPOT", "ITL per token", "ITL per chunk", "E2E"):
        assert f"| {name} |" in md
    assert "| a | 1 | TTFT | 200.0 | 100.0 | 200.0 | 299.8 |" in md
    html = render_html(build_report(run))
    assert "Latency distributions" in html and "p99.9" in html
    # an old summary without the block: no section rather than a table of dashes
    old = Run(None, {"scenario": "t", "run_id": "r", "rows": [{k: v for k, v in rows[0].items() if k in ROW_KEYS}]})
    assert "Latency distributions" not in render_markdown(build_report(old))
