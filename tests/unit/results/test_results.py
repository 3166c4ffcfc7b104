"""The run folder: layout, incremental records, crash tolerance, resume state, schema."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import threading

import pandas as pd
import pytest
import yaml
from tests.helpers.runfactory import make_run

from speedbench.errors import UsageError
from speedbench.records import PointKey, RequestRecord, SpecStats
from speedbench.results import SCHEMA_VERSION, RunDir
from speedbench.results.loader import load_run


def rec(i: int, arm: str = "baseline", c: int = 1, v: str = "", **kw) -> RequestRecord:
    return RequestRecord(arm=arm, concurrency=c, prompt_index=i, prompt_id=f"p{i}", variant=v, t_sent_ns=10,
                         chunk_ns=[100, 200, 300], chunk_tokens=[1, 2, 3], output_tokens=6,
                         spec=SpecStats(3, 9, 3, [1, 1, 1, 0]), **kw)


def test_create_layout(tmp_path):
    now = dt.datetime(2026, 11, 30, 8, 5, 9, tzinfo=dt.timezone.utc)
    rd = RunDir.create(tmp_path, "cpu_tiny", now=now)
    assert rd.path.parent == tmp_path / "cpu_tiny"
    assert re.fullmatch(r"20261130T080509Z-[0-9a-f]{6}", rd.name)
    assert rd.prometheus_dir.is_dir() and rd.logs_dir.is_dir()
    assert rd.log_path("eagle3.1") == rd.path / "logs" / "eagle3.1.log"
    assert rd.prometheus_path(PointKey("eagle3", 4, ""), "before").name == "eagle3__c4__default__before.txt"
    assert rd.prometheus_path(PointKey("eagle3", 4, "think"), "after").name == "eagle3__c4__think__after.txt"
    with pytest.raises(ValueError):
        rd.prometheus_path(PointKey("eagle3", 4, ""), "during")
    # two runs started in the same second still get their own folders
    assert RunDir.create(tmp_path, "cpu_tiny", now=now).path != rd.path


def test_append_is_visible_immediately_and_roundtrips(tmp_path):
    rd = RunDir.create(tmp_path, "s")
    for i in range(3):
        rd.append_record(rec(i))
        # another reader sees the line at once: nothing sits in a buffer
        assert len(rd.records_path.read_text().splitlines()) == i + 1
    loaded = rd.load_records()
    assert [r.prompt_index for r in loaded] == [0, 1, 2]
    assert loaded[0].spec == SpecStats(3, 9, 3, [1, 1, 1, 0])
    assert loaded[0].to_dict() == rec(0).to_dict()


def test_truncated_last_line_is_tolerated_and_repaired(tmp_path):
    rd = RunDir.create(tmp_path, "s")
    for i in range(3):
        rd.append_record(rec(i))
    with open(rd.records_path, "a") as f:  # a crash mid-write
        f.write(json.dumps(rec(3).to_dict())[:40])
    assert [r.prompt_index for r in RunDir.open(rd.path).load_records()] == [0, 1, 2]
    # resuming appends after cutting the torn line, so the new record is intact
    rd2 = RunDir.open(rd.path)
    rd2.append_record(rec(9))
    assert [r.prompt_index for r in rd2.load_records()] == [0, 1, 2, 9]


def test_corrupt_middle_line_is_an_error(tmp_path):
    rd = RunDir.create(tmp_path, "s")
    rd.append_record(rec(0))
    with open(rd.records_path, "a") as f:
        f.write("{not json}\n")
    rd.append_record(rec(1))
    with pytest.raises(UsageError, match=r"records.jsonl:2"):
        rd.load_records()


def test_points_and_resume(tmp_path):
    rd = RunDir.create(tmp_path, "s")
    rd.mark_point(("baseline", 1, ""), "ok", wall_s=1.5, loop_lag_ms={"p50": 0.1, "max": 2.0}, n_records=2)
    rd.mark_point(("baseline", 4, ""), "partial", failure=None)
    rd.mark_point(("eagle3", 1, ""), "failed", failure="server died")
    rd.mark_point(("eagle3", 4, ""), "interrupted", loop_lag_ms_max=3.0)
    done = rd.finished_points()
    assert set(done) == {("baseline", 1, ""), ("baseline", 4, "")}
    assert ("eagle3", 1, "") not in done
    assert done[("baseline", 1, "")]["wall_s"] == 1.5
    assert rd.all_points()[("eagle3", 1, "")]["failure"] == "server died"
    assert rd.all_points()[("eagle3", 4, "")]["loop_lag_ms_max"] == 3.0
    # re-marking replaces the entry (a retried point)
    rd.mark_point(("eagle3", 1, ""), "ok")
    assert rd.finished_points()[("eagle3", 1, "")]["status"] == "ok"
    assert len(json.loads(rd.points_path.read_text())) == 4
    with pytest.raises(ValueError):
        rd.mark_point(("x", 1, ""), "great")
    # records of the interrupted point are dropped before it is run again
    for r in (rec(0), rec(0, arm="eagle3", c=4), rec(1, arm="eagle3", c=4)):
        rd.append_record(r)
    assert rd.prune_unfinished_records() == 2
    assert [(r.arm, r.concurrency) for r in rd.load_records()] == [("baseline", 1)]


def test_concurrent_writers_lose_nothing(tmp_path):
    rd = RunDir.create(tmp_path, "s")

    def work(arm):
        for c in range(10):
            rd.append_record(rec(c, arm=arm, c=c, output_text="y" * 20000))  # lines longer than a buffer
            rd.mark_point((arm, c, ""), "ok")

    threads = [threading.Thread(target=work, args=(f"arm{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(rd.finished_points()) == 40
    assert len(rd.load_records()) == 40


def test_summary_roundtrip_nan_and_csv(tmp_path):
    rd = RunDir.create(tmp_path, "s")
    rows = [{"arm": "baseline", "concurrency": 1, "speedup_mean": math.nan, "per_position_joint": [],
             "acceptance_histogram": [1, 2]},
            {"arm": "eagle3", "concurrency": 1, "speedup_mean": 1.5, "per_position_joint": [0.8, 0.6],
             "acceptance_histogram": [3, 4]}]
    rd.write_summary({"scenario": "s", "rows": rows, "categories": []})
    text = rd.summary_path.read_text()
    assert "NaN" not in text  # strict JSON
    s = rd.load_summary()
    assert s["schema_version"] == SCHEMA_VERSION and s["run_id"] == rd.name
    assert s["rows"][0]["speedup_mean"] is None and s["rows"][1]["speedup_mean"] == 1.5
    df = pd.read_csv(rd.summary_csv_path)
    assert json.loads(df.loc[1, "per_position_joint"]) == [0.8, 0.6]
    assert math.isnan(df.loc[0, "speedup_client_mean"])  # the table files name the client's clock


def test_newer_schema_is_a_clear_usage_error(tmp_path):
    rd = RunDir.create(tmp_path, "s")
    rd.write_summary({"schema_version": SCHEMA_VERSION + 1, "rows": []})
    with pytest.raises(UsageError, match="newer than this speedbench"):
        load_run(rd.path)


def test_missing_summary_and_folder(tmp_path):
    rd = RunDir.create(tmp_path, "s")
    with pytest.raises(UsageError, match="resume"):
        load_run(rd.path)
    with pytest.raises(UsageError, match="not found"):
        load_run(tmp_path / "nope")
    (rd.path / "summary.json").write_text("{broken")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_run(rd.path)


def test_parquet(tmp_path):
    rd = RunDir.create(tmp_path, "s")
    records = [rec(0), rec(1, error="timeout"), RequestRecord(arm="a", concurrency=1, prompt_index=2, prompt_id="p2")]
    rd.write_parquet(records)
    df = pd.read_parquet(rd.parquet_path)
    assert len(df) == 3
    assert list(df["spec_num_accepted_tokens"][:2]) == [3, 3]
    assert df["error"][1] == "timeout"
    assert list(df["chunk_ns"][0]) == [100, 200, 300]


def test_scenario_provenance_prometheus(tmp_path):
    rd = RunDir.create(tmp_path, "s")
    rd.write_scenario({"name": "s", "arms": [{"name": "baseline"}]}, ["workload.max_tokens=8"])
    text = rd.scenario_path.read_text()
    assert "# --set workload.max_tokens=8" in text
    assert yaml.safe_load(text)["name"] == "s"
    rd.save_provenance("baseline", {"vllm_version": "0.32.0"})
    rd.save_provenance("eagle3", {"vllm_version": "0.32.0", "eagle_version": "3"})
    assert set(rd.load_provenance()) == {"baseline", "eagle3"}
    rd.save_prometheus(PointKey("eagle3", 4, ""), "a 1\n", "")
    assert rd.load_prometheus(PointKey("eagle3", 4, "")) == ("a 1\n", None)


def test_load_run_from_factory(tmp_path):
    rd = make_run(tmp_path, n_prompts=4, concurrencies=(1, 4))
    run = load_run(rd.path / "summary.json")  # the file works as well as the folder
    assert run.arms() == ["baseline", "eagle3", "eagle3.1"]
    assert run.baseline == "baseline"
    assert len(run.records) == 3 * 2 * 4
    assert run.provenance["eagle3"].draft.model == "org/eagle3-draft" and run.provenance["eagle3"].engine == "vllm"
    assert run.scenario["server"]["model"] == "tiny/target"
    assert run.row("eagle3", 4).speculative is True
    assert run.row("eagle3", 8) is None


def test_exports_are_atomic(tmp_path):
    """summary.csv and records.parquet go through the atomic path: a writer that fails
    leaves the previous file whole and no temporary file behind."""
    from speedbench.results import atomic_write_with

    rd = RunDir.create(tmp_path, "s")
    rd.write_summary({"scenario": "s", "rows": [{"arm": "a", "concurrency": 1, "hist": [1, 2]}], "categories": []})
    before = rd.summary_csv_path.read_text()
    assert before.splitlines()[0] == "arm,concurrency,hist" and '"[1, 2]"' in before

    def broken(f):
        f.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        atomic_write_with(rd.summary_csv_path, broken)
    assert rd.summary_csv_path.read_text() == before
    assert not [p.name for p in rd.path.iterdir() if p.name.endswith(".tmp")]
