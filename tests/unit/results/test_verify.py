"""Verified resume: finished rounds carry their record count and digest; verify finds
lost, changed and damaged records; resume's repair re-opens those rounds and keeps every
damaged line in records.damaged.jsonl."""

from __future__ import annotations

import json

import pytest
from tests.helpers.runfactory import make_run

from speedbench.cli import main
from speedbench.records import PointKey, RequestRecord
from speedbench.results import RunDir
from speedbench.results.verify import reopen_damaged_rounds, verify_run

A1, A4 = PointKey("a", 1, ""), PointKey("a", 4, "")


def rec(i: int, c: int = 1, repeat: int = 0) -> RequestRecord:
    return RequestRecord(arm="a", concurrency=c, prompt_index=i, prompt_id=f"p{i}", variant="", repeat=repeat,
                         t_sent_ns=10, chunk_ns=[100, 200], chunk_tokens=[1, 2], output_tokens=3)


def new_run(tmp_path) -> RunDir:
    """A run folder as a run starts it: the scenario before any point."""
    rd = RunDir.create(tmp_path, "s")
    rd.write_scenario({"name": "s", "arms": [{"name": "a"}]})
    return rd


def finished_run(tmp_path, n: int = 4) -> RunDir:
    rd = new_run(tmp_path)
    for c in (1, 4):
        for i in range(n):
            rd.append_record(rec(i, c))
        rd.mark_point(PointKey("a", c, ""), "ok")
    return rd


def lines(rd: RunDir) -> list[str]:
    return rd.records_path.read_text().splitlines()


def test_finished_round_records_count_and_digest(tmp_path):
    rd = finished_run(tmp_path)
    rounds = rd.point_rounds()
    assert rounds[(A1, 0)]["record_count"] == 4 and len(rounds[(A1, 0)]["records_sha256"]) == 64
    # the digest does not depend on line order (requests finish in any order)
    assert rounds[(A1, 0)]["records_sha256"] != rounds[(A4, 0)]["records_sha256"]
    rd.records_path.write_text("\n".join(reversed(lines(rd))) + "\n")
    v = verify_run(rd)
    assert v.ok and v.checked == 2, v.problems()


def test_failed_rounds_carry_no_count(tmp_path):
    rd = new_run(tmp_path)
    rd.append_record(rec(0))
    rd.mark_point(A1, "failed", failure="boom")
    assert "record_count" not in rd.point_rounds()[(A1, 0)]
    assert verify_run(rd).ok


def test_verify_finds_missing_changed_and_damaged(tmp_path, capsys):
    rd = finished_run(tmp_path)
    ls = lines(rd)
    # c=1: line 3 deleted, line 2 cut in half (not at the end); c=4: a value edited
    edited = ls[5].replace('"output_tokens":3', '"output_tokens":5')
    rd.records_path.write_text("\n".join([ls[0], ls[1][:30], ls[3], ls[4], edited, *ls[6:]]) + "\n")
    before = rd.records_path.read_text()
    v = verify_run(rd)
    problems = v.problems()
    assert not v.ok
    assert any("records.jsonl:2: damaged line" in p for p in problems), problems
    assert any("a c=1 round 0: 2 of 4 records lost" in p for p in problems), problems
    assert any("a c=4 round 0" in p and "changed" in p for p in problems), problems
    assert main(["verify", str(rd.path)]) == 1
    out = capsys.readouterr().out
    assert "3 problems" in out and f"speedbench run --resume {rd.path}" in out
    assert rd.records_path.read_text() == before  # verify changes nothing


def test_repair_reopens_rounds_and_keeps_damaged_lines(tmp_path, capsys):
    rd = finished_run(tmp_path)
    ls = lines(rd)
    rd.records_path.write_text("\n".join([ls[0], ls[1][:30], *ls[3:]]) + "\n" + ls[2][:17])  # torn tail too
    rd2 = RunDir.open(rd.path)
    warnings = reopen_damaged_rounds(rd2)
    assert any("a c=1 round 0: 2 of 4 records lost" in w and "re-measuring" in w for w in warnings), warnings
    assert any("2 damaged record lines moved to records.damaged.jsonl" in w for w in warnings), warnings
    assert (A1, 0) not in rd2.finished_rounds() and (A4, 0) in rd2.finished_rounds()
    moved = rd2.prune_unfinished_records()
    assert moved == 2  # what is left of the damaged round is superseded, not mixed with the re-run
    damaged = [json.loads(x) for x in rd2.damaged_path.read_text().splitlines()]
    assert [(d["file"], d["line"]) for d in damaged] == [("records.jsonl", 2), ("records.jsonl", 8)]
    assert damaged[0]["text"] == ls[1][:30] and damaged[1]["why"].startswith("cut short")
    assert lines(rd2) == ls[4:]  # c=4 kept byte-identical
    # re-measure the round: verify is clean again, and says the damaged lines are kept
    for i in range(4):
        rd2.append_record(rec(i, 1))
    rd2.mark_point(A1, "ok")
    v = verify_run(rd2)
    assert v.ok and v.quarantined == 2, v.problems()
    assert main(["verify", str(rd.path)]) == 0
    assert "2 lines kept in records.damaged.jsonl" in capsys.readouterr().out


def test_torn_whole_record_gets_its_newline(tmp_path):
    """A crash between the record and its newline leaves a whole record: keep it."""
    rd = finished_run(tmp_path, n=2)
    rd.records_path.write_text(rd.records_path.read_text().rstrip("\n"))
    rd2 = RunDir.open(rd.path)
    rd2.append_record(rec(9, 16))
    assert len(rd2.load_records()) == 5 and not rd2.damaged_path.exists()
    assert verify_run(rd2).ok


def test_old_run_folders_are_not_checked(tmp_path):
    rd = finished_run(tmp_path)
    pts = json.loads(rd.points_path.read_text())
    for p in pts:
        p.pop("record_count"), p.pop("records_sha256")
    rd.points_path.write_text(json.dumps(pts))
    rd.records_path.write_text("")
    v = verify_run(rd)
    assert v.ok and v.unverifiable == 2 and v.checked == 0


@pytest.mark.parametrize("lose", ["points.json", "records.jsonl", "scenario.resolved.yaml"])
def test_a_finished_run_that_lost_a_file_fails_verify_and_gate(tmp_path, capsys, lose):
    """Without its points.json, records or scenario a folder read "ok, 0 finished rounds"
    and passed its gates: nothing had been checked. Now both fail, naming the folder,
    the file and its fix."""
    rd = make_run(tmp_path / "results")
    gates = tmp_path / "g.yaml"
    gates.write_text("- {metric: error_rate, max: 1.0}\n")
    assert main(["verify", str(rd.path)]) == 0 and main(["gate", str(rd.path), "--gates", str(gates)]) == 0
    capsys.readouterr()
    (rd.path / lose).unlink()
    fix = "restore it from a copy" if lose.startswith("scenario") else f"speedbench run --resume {rd.path}"
    assert main(["verify", str(rd.path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{rd.path}: ") and f"{lose} is missing" in out and fix in out, out
    md = tmp_path / "gate.md"
    assert main(["gate", str(rd.path), "--gates", str(gates), "--summary-md", str(md)]) == 1
    assert "gates passed" not in capsys.readouterr().out
    text = md.read_text().replace("\\", "")  # Markdown escapes the path's underscores
    assert "passed, 0 failed" not in text and f"{rd.path} cannot be checked: {lose} is missing" in text, text
    assert fix in text


def test_a_run_folder_without_its_scenario_has_no_gates_to_guess(tmp_path, capsys):
    rd = make_run(tmp_path / "results", gates=[{"metric": "error_rate", "max": 1.0}])
    rd.scenario_path.unlink()
    assert main(["gate", str(rd.path)]) == 2  # not "no gates defined": they are unknown
    err = capsys.readouterr().err
    assert f"{rd.path}: scenario.resolved.yaml is missing" in err and "--gates FILE" in err


def test_what_a_folder_must_hold_depends_on_how_far_it_got(tmp_path):
    rd = new_run(tmp_path)
    assert verify_run(rd).ok  # started, nothing measured yet
    rd.mark_point(A1, "failed", failure="the arm never started")
    assert verify_run(rd).ok  # a failed arm writes no records
    rd.append_record(rec(0, 4))
    rd.points_path.unlink()  # records but no points.json (or a summary without it)
    assert [m.name for m in verify_run(rd).missing] == ["points.json"]
    rd = finished_run(tmp_path / "old")
    pts = json.loads(rd.points_path.read_text())
    for p in pts:  # a folder from before record counts: its records are still required
        p.pop("record_count"), p.pop("records_sha256")
    rd.points_path.write_text(json.dumps(pts))
    rd.records_path.unlink()
    assert [m.name for m in verify_run(rd).missing] == ["records.jsonl"]


def test_a_lost_or_changed_outputs_file_is_a_problem_and_resume_measures_it_again(tmp_path):
    from speedbench.results import outputs
    rd = new_run(tmp_path)
    for i in range(3):
        rd.append_record(rec(i))
    kept = [RequestRecord(arm="a", concurrency=1, prompt_index=i, prompt_id=f"p{i}", output_ids=[100, 101 + i])
            for i in range(3)]
    rd.mark_point(A1, "ok", outputs=outputs.write_round(rd.path, A1, 0, kept))
    assert verify_run(rd).ok
    path = rd.path / rd.point_rounds()[(A1, 0)]["outputs"]["file"]
    path.write_bytes(path.read_bytes() + b"!")
    v = verify_run(rd)
    assert not v.ok and v.damaged_rounds and "SHA-256" in v.problems()[0]
    path.unlink()
    assert "is missing" in verify_run(rd).problems()[0]
    warnings = reopen_damaged_rounds(rd)
    assert "re-measuring it" in warnings[0]
    assert rd.point_rounds()[(A1, 0)]["status"] == "failed"
