"""The saved scenario and points.json's rounds, typed: parsed once, leniently, read by attribute."""

from __future__ import annotations

from speedbench.results.rounds import ArmRound, PointRound
from speedbench.results.stored_scenario import StoredScenario


def test_a_scenario_todays_model_would_refuse_still_loads():
    # an old folder: no workload, an arm without a name, a non-dict arm, gates_off as written then
    saved = StoredScenario.from_dict({"server": {"model": "m", "args": {"dtype": "half"}},
                                      "arms": [{"name": "base"}, {"speculative_config": {"method": "ngram"}}, "junk"],
                                      "gates_off": ["lossless"], "reference": "not a block"})
    assert saved.server.model == "m" and saved.server.args == {"dtype": "half"}
    assert saved.arm_names == ["base", None] and saved.arms[1].draft_method == "ngram"
    assert saved.arm("base") is not None and saved.arm("base").spec == {} and saved.arm("x") is None
    assert saved.workload is None and saved.temperature == 0 and saved.gates_off == ("lossless",)
    assert saved.reference is None and saved.percentiles is None


def test_nothing_saved_reads_as_empty():
    for raw in (None, {}, [], "text"):
        saved = StoredScenario.from_dict(raw)
        assert saved.server.model is None and saved.arms == () and saved.workload is None


def test_the_workload_keeps_its_values_as_stored():
    w = StoredScenario.from_dict({"workload": {"source": "speed_bench", "config": "qualitative",
                                               "temperature": 0.0, "max_tokens": 64}}).workload
    assert w is not None and w.dataset == "speed_bench:qualitative" and w.temperature == 0.0 and w.max_tokens == 64
    assert not w.has("categories") and w.categories is None
    no_temperature = StoredScenario.from_dict({"workload": {"source": "sample"}})
    assert no_temperature.temperature == 0 and no_temperature.workload.temperature is None


def test_a_round_gives_back_its_entry_unchanged():
    entry = {"arm": "a", "concurrency": 4, "variant": "", "repeat": 1, "status": "ok", "failure": None,
             "wall_s": 2.5, "finished_utc": "2026-01-01T00:00:00+00:00", "stop_reason": "narrow",
             "record_count": 3, "records_sha256": "ab"}
    r = PointRound.from_dict(entry)
    assert r.done and r.record_count == 3 and r.has("record_count") and r.stop_reason == "narrow" and not r.more
    assert list(r.to_dict().items()) == list(entry.items())
    old = PointRound.from_dict({"arm": "a", "concurrency": 1, "status": "partial"})  # before counts were kept
    assert old.done and not old.has("record_count") and old.record_count is None
    assert not PointRound.from_dict({"status": "interrupted"}).done


def test_an_arm_round_knows_which_round_it_is():
    a = ArmRound.from_dict({"arm": "a", "repeat": 0, "start_s": 1.5, "wall_s": 10.0, "gpus": 1})
    assert a.of("a", 0) and not a.of("a", 1) and a.start_s == 1.5
