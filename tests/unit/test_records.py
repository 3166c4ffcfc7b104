"""PointKey: the identity is (arm, concurrency, variant); the load rides beside it as fields."""

import pickle

from speedbench.records import PointKey, rate_label
from speedbench.results import RunDir


def test_a_rate_point_carries_its_load_as_fields():
    k = PointKey.at_rate("a", 8, "code", 0.5)
    assert k == ("a", 8, "code@0.5rps") and hash(k) == hash(("a", 8, "code@0.5rps"))
    assert (k.workload, k.rate) == ("code", 0.5)
    assert rate_label(2) == "2rps"


def test_the_load_survives_pickling_and_replace_but_not_equality():
    k = PointKey("a", 8, "2rps", workload="", rate=2)
    back = pickle.loads(pickle.dumps(k))
    assert (back.workload, back.rate) == ("", 2.0)
    base = k._replace(arm="b")
    assert base == ("b", 8, "2rps") and base.rate == 2.0
    assert PointKey("a", 8, "2rps") == k  # a key read from disk finds the plan's key


def test_a_closed_loop_point_sends_its_own_variant():
    k = PointKey("a", 4, "code")
    assert (k.workload, k.rate, k.label) == ("code", None, "a c=4 [code]")


def test_a_key_read_back_from_the_run_folder_keeps_its_load(tmp_path):
    rd = RunDir.create(tmp_path, "t")
    k = PointKey.at_rate("a", 8, "code", 0.5)
    rd.mark_point(k, "ok", request_rate=k.rate, workload=k.workload)
    rd.mark_point(PointKey("a", 4, "code"), "ok")  # a closed-loop point stores no load
    back = {key.concurrency: key for key in rd.all_points()}
    assert back[8] == k and (back[8].workload, back[8].rate) == ("code", 0.5)
    assert (back[4].workload, back[4].rate) == ("code", None)
