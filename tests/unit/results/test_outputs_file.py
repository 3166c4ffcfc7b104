"""A round's outputs file (results/outputs.py): what goes in, that it reads back exactly,
and that a changed or missing file is named."""

from __future__ import annotations

from pathlib import Path

from speedbench.records import PointKey, RequestRecord
from speedbench.results import outputs
from speedbench.results.outputs import OutputsFile
from speedbench.results.rounds import PointRound


def _rec(i: int, ids: list[int], **kw) -> RequestRecord:
    return RequestRecord(arm="a", concurrency=4, prompt_index=i, prompt_id=f"p{i}", output_ids=ids, **kw)


def test_round_trip_keeps_measured_ok_requests_with_ids(tmp_path):
    recs = [_rec(0, [1, 2, 3]), _rec(1, [70000, 5]), _rec(2, [9], warmup=True), _rec(3, [9], error="timeout"),
            _rec(4, [])]
    entry = outputs.write_round(tmp_path, PointKey("a", 4, "code"), 1, recs)
    assert entry["file"] == "outputs/a/c4-code.r1.npz"
    assert (entry["requests"], entry["tokens"]) == (2, 5)
    typed = OutputsFile.from_dict(entry)  # points.json's entry, read back
    assert typed.to_dict() == entry and list(typed.to_dict()) == list(entry)
    back = outputs.read_round(tmp_path, typed)
    assert sorted(back) == [(0, 0), (1, 0)]
    assert back[(1, 0)].tolist() == [70000, 5]  # past uint16: stored wider
    assert outputs.problem(tmp_path, typed) is None


def test_no_ids_writes_nothing_and_says_why(tmp_path):
    entry = outputs.write_round(tmp_path, PointKey("a", 1), 0, [_rec(0, [])])
    assert entry == {"requests": 0, "why": "no token ids in the stream"}
    assert not (tmp_path / "outputs").exists()
    typed = OutputsFile.from_dict(entry)
    assert typed.file is None and typed.why == entry["why"] and typed.to_dict() == entry
    assert outputs.read_round(tmp_path, typed) is None and outputs.problem(tmp_path, typed) is None


def test_a_changed_or_missing_file_is_named(tmp_path):
    entry = OutputsFile.from_dict(outputs.write_round(tmp_path, PointKey("a", 1), 0, [_rec(0, list(range(50)))]))
    assert entry.file is not None
    path = tmp_path / entry.file
    path.write_bytes(path.read_bytes()[:-3] + b"xyz")
    assert "SHA-256" in (outputs.problem(tmp_path, entry) or "")
    path.unlink()
    assert "missing" in (outputs.problem(tmp_path, entry) or "")
    assert outputs.read_round(tmp_path, entry) is None


def test_round_files_read_each_rounds_entry_once():
    a, b, c = PointKey("a", 1), PointKey("a", 4), PointKey("b", 1)
    stored = {(a, 0): {"outputs": {"file": "x.npz", "sha256": "s"}}, (b, 0): {"status": "ok"}, (c, 0): {"outputs": {}}}
    found = outputs.round_files({k: PointRound.from_dict(e) for k, e in stored.items()})
    assert found[(a, 0)] == OutputsFile(file="x.npz", sha256="s") and found[(b, 0)] is None and found[(c, 0)] is None
    assert outputs.reference_round(found, a, 3) == 0 and outputs.reference_round(found, b, 0) is None
    assert outputs.round_pair(Path("."), found, b, 0, a)[2] == "not recorded"  # a folder from before outputs


def test_record_lines_leave_the_ids_out():
    d = _rec(0, [1, 2], prompt_ids=[3]).to_dict()
    assert "output_ids" not in d and "prompt_ids" not in d
    assert RequestRecord.from_dict(d).output_ids == []


def test_reference_points():
    pts = [PointKey("base", c) for c in (1, 4, 16)] + [PointKey("e3", 4)]
    assert outputs.reference(PointKey("e3", 4), "base", pts) == PointKey("base", 4)
    assert outputs.reference(PointKey("base", 16), "base", pts) == PointKey("base", 1)
    assert outputs.reference(PointKey("base", 1), "base", pts) is None
    assert outputs.reference(PointKey("e3", 4), None, pts) is None
    assert outputs.decode(outputs.encode({})) == {}
