"""The headline clock: which speedup a point leads with, chosen once and stored in the row."""

from __future__ import annotations

import json
import math

import pytest
from tests.helpers.runfactory import make_run

from speedbench.metrics.headline import HEADLINE_KEYS, choose_clock, headline, headline_of, with_headline
from speedbench.metrics.registry import BY_KEY, ROW_KEYS
from speedbench.results.loader import load_run


def row(client=(1.43, 1.12, 1.83), engine=(1.45, 1.30, 1.60), lag=0.0):
    return {"speedup_mean": client[0], "speedup_ci_low": client[1], "speedup_ci_high": client[2],
            "speedup_engine_mean": engine[0], "speedup_engine_ci_low": engine[1],
            "speedup_engine_ci_high": engine[2], "speedup_lag_bound": lag}


@pytest.mark.parametrize("cells, clock, why", [
    (row(), "client", "holds"),  # the client's interval is wider, but not by lag
    (row(client=(1.43, 0.0, 3.45), lag=0.8), "engine", "unbounded"),  # a low end of 0
    (row(client=(1.43, 1.0, None), lag=0.1), "engine", "unbounded"),  # null high end (inf in JSON)
    (row(client=(1.43, 1.0, math.inf)), "engine", "unbounded"),
    (row(client=(1.43, 1.05, 1.95), lag=0.2), "engine", "widened"),  # lag-widened past the engine's
    (row(client=(1.43, 1.35, 1.50), lag=0.02), "client", "holds"),  # lag, but still narrower
    (row(engine=(None, None, None)), "client", "no engine"),
    (row(client=(None, None, None)), "engine", "no client"),
])
def test_the_clock_that_holds_leads(cells, clock, why):
    got, reason = choose_clock(cells)
    assert got == clock and why in reason
    m, lo, hi = headline(cells)
    src = ("speedup_mean", "speedup_ci_low", "speedup_ci_high") if clock == "client" else \
        ("speedup_engine_mean", "speedup_engine_ci_low", "speedup_engine_ci_high")
    assert m == cells[src[0]] and (lo == cells[src[1]] or (lo != lo and cells[src[1]] is None))


def test_baseline_rows_have_no_headline_clock():
    h = headline_of(row(client=(None, None, None), engine=(None, None, None)))
    assert h["speedup_headline_clock"] == "" and math.isnan(h["speedup_headline_mean"])


def test_keys_are_declared_in_the_registry():
    assert all(k in BY_KEY for k in HEADLINE_KEYS)
    assert ROW_KEYS.index("speedup_headline_clock") > ROW_KEYS.index("speedup_engine_ci_high")


def test_a_stored_choice_is_kept_and_an_old_row_derives_it():
    stored = {**row(client=(1.43, 0.0, 3.45)), "speedup_headline_clock": "client"}
    assert with_headline(dict(stored))["speedup_headline_clock"] == "client"  # never second-guessed
    old = with_headline(row(client=(1.43, 0.0, 3.45)))
    assert old["speedup_headline_clock"] == "engine" and old["speedup_headline_ci_low"] == 1.30


def test_run_folders_without_the_keys_still_load(tmp_path):
    rd = make_run(tmp_path)
    summary = json.loads(rd.summary_path.read_text())
    for r in summary["rows"]:
        for k in HEADLINE_KEYS:
            r.pop(k, None)
    rd.write_summary(summary)
    run = load_run(rd.path)
    r = run.row("eagle3.1", 1)
    assert r.speedup_headline_clock == "client" and r.speedup_headline_mean == r.speedup_mean
    assert run.row("baseline", 1).speedup_headline_clock == ""
