"""Messages that lead somewhere (issue 47): an override's error names the override, and
unknown keys and list items get a "did you mean"."""

from __future__ import annotations

from pathlib import Path

import pytest

from speedbench.errors import ScenarioError, did_you_mean
from speedbench.scenario import load_scenario

TINY = Path(__file__).resolve().parents[3] / "scenarios" / "cpu_tiny.yaml"


def test_a_bad_override_is_blamed_not_a_line_of_the_file():
    with pytest.raises(ScenarioError) as e:
        load_scenario(TINY, ["repeats=abc"])
    assert "--set repeats=abc: repeats" in str(e.value)
    assert f"{TINY}:" not in str(e.value)


def test_unknown_keys_and_items_suggest_the_one_meant(tmp_path):
    with pytest.raises(ScenarioError, match="did you mean 'num_prompts'"):
        load_scenario(TINY, ["workload.num_promts=3"])
    with pytest.raises(ScenarioError, match="did you mean 'baseline'"):
        load_scenario(TINY, ["arms.basline.args.x=1"])
    assert did_you_mean("zzz", ["csv", "json"]) == ""


def test_a_folder_for_a_scenario_is_bad_input():
    with pytest.raises(ScenarioError, match="is a folder"):
        load_scenario(TINY.parent)
