"""Nothing lost, nothing hidden (issue 23): a run folder whose records were cut short or
damaged is found out by ``speedbench verify`` and resumed to the summary of a run that
was never damaged; a full filesystem stops the run cleanly and the run resumes once
there is room. The fake server is launched by speedbench as a local server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli_runs import fake_local, scenario, write_prompts, write_yaml
from tests.integration.test_reliability import assert_no_orphans, out_of, sb, the_run

# What a re-measurement must reproduce exactly: counts, statuses and the fake's scripted
# acceptance (timings differ from one measurement to the next, by nature). Not the speedup's
# pairs: a pair needs a client-side per-user TPS on both arms, and a busy host can deliver a
# fast fake's few chunks in one read (a burst: TPS undefined), in one measurement and not
# the next.
STABLE = ("arm", "concurrency", "variant", "status", "failure", "n_requests", "n_ok", "n_errors", "al_tokens",
          "al_requests", "al_prometheus", "acceptance_histogram", "per_position_conditional")


def stable_rows(run: Path) -> list[dict]:
    rows = json.loads((run / "summary.json").read_text())["rows"]
    return [{k: r.get(k) for k in STABLE} for r in rows]


def small_scenario(tmp: Path, **top) -> Path:
    prompts = write_prompts(tmp / "p.jsonl", [f"question {i}" for i in range(6)])
    sc = scenario("integrity", prompts, server=fake_local(**{"t-step": 0.002, "output-tokens": 8}),
                  # one acceptance for every step: a cycle would depend on how many readiness
                  # probes the server answered first, which varies from start to start
                  arms=[{"name": "base"}, {"name": "spec", "args": {"k": 3, "acceptance": "2"}}],
                  concurrency=[1, 2], **top)
    return write_yaml(tmp / "s.yaml", sc)


def test_damaged_records_are_found_and_remeasured_to_the_same_summary(tmp_path, tag):
    res = sb(["run", str(small_scenario(tmp_path, repeats=2)), "-o", str(tmp_path / "out"), "--skip-doctor"],
             tag=tag, cwd=tmp_path)
    assert res.returncode == 0, out_of(res)
    run = the_run(tmp_path / "out")
    reference = stable_rows(run)
    assert sb(["verify", str(run)], tag=tag, cwd=tmp_path).returncode == 0

    # The damage: 30% of one point's lines gone and the next one cut in half,
    # plus a torn last line.
    lines = (run / "records.jsonl").read_text().splitlines()
    hit = [i for i, ln in enumerate(lines) if '"arm":"spec","concurrency":2' in ln and '"repeat":1' in ln]
    gone = set(hit[:2])
    cut = hit[2]
    damaged = [ln[: len(ln) // 2] if i == cut else ln for i, ln in enumerate(lines) if i not in gone]
    (run / "records.jsonl").write_text("\n".join(damaged[:-1]) + "\n" + damaged[-1][:25])
    lost_line = damaged[-1]

    v = sb(["verify", str(run)], tag=tag, cwd=tmp_path)
    text = out_of(v)
    assert v.returncode == 1, text
    assert "spec c=2 round 1: 3 of 6 records lost" in text and "damaged line" in text
    assert "Traceback" not in text

    res = sb(["run", "--resume", str(run), "--skip-doctor"], tag=tag, cwd=tmp_path)
    text = out_of(res)
    assert res.returncode == 0, text
    assert "spec c=2 round 1: 3 of 6 records lost (missing or damaged); re-measuring it" in text
    assert "2 damaged record lines moved to records.damaged.jsonl" in text
    kept = [json.loads(x) for x in (run / "records.damaged.jsonl").read_text().splitlines()]
    assert len(kept) == 2 and kept[1]["text"] == lost_line[:25]
    # the torn tail's round is found short as well and measured again
    after = sb(["verify", str(run)], tag=tag, cwd=tmp_path)
    assert after.returncode == 0, out_of(after)
    assert stable_rows(run) == reference
    assert_no_orphans(tag, run)


# ---- a full filesystem: a clean stop, then resume once there is room ---------------------------

PAGE = 4096  # tmpfs counts whole pages per file


def pages(run: Path, skip: tuple[str, ...] = ()) -> int:
    return sum(-(-p.stat().st_size // PAGE) * PAGE for p in run.rglob("*") if p.is_file() and p.name not in skip)


@pytest.fixture
def small_fs(tmp_path):
    """A tmpfs whose size the test sets (and raises later, as freeing space would)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {res.stderr.strip()}")

    def resize(size: int) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(mnt)], check=True)

    try:
        yield mnt, resize
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.parametrize("room", [0.5, 1.0], ids=["fills-on-records", "fills-later"])
def test_full_disk_stops_cleanly_and_resumes(tmp_path, tag, small_fs, room):
    mnt, resize = small_fs
    spec = small_scenario(tmp_path)
    res = sb(["run", str(spec), "-o", str(tmp_path / "ref"), "--skip-doctor"], tag=tag, cwd=tmp_path)
    assert res.returncode == 0, out_of(res)
    ref = the_run(tmp_path / "ref")
    # Room for the folder's small files and about half of the records: the disk fills mid-run.
    small = pages(ref, skip=("records.jsonl", "summary.json", "summary.csv", "records.parquet", "report.md",
                             "report.html"))
    resize(int(small * room) // PAGE * PAGE + (ref / "records.jsonl").stat().st_size // 2)

    res = sb(["run", str(spec), "-o", str(mnt), "--skip-doctor"], tag=tag, cwd=tmp_path)
    text = out_of(res)
    print(text)
    assert res.returncode == 3, text
    assert "Traceback" not in text
    run = the_run(mnt)
    assert "No space left on device" in text and f"run folder: {run}" in text and "free space:" in text
    assert f"speedbench run --resume {run}" in text
    lines = (run / "records.jsonl").read_text().splitlines(keepends=True)
    assert lines and all(ln.endswith("\n") and json.loads(ln) for ln in lines), "a record line was left half written"
    assert not (run / "summary.json").exists()
    assert_no_orphans(tag, run)

    resize(64 * 1024 * 1024)  # space freed
    res = sb(["run", "--resume", str(run), "--skip-doctor"], tag=tag, cwd=tmp_path)
    assert res.returncode == 0, out_of(res)
    a, b = stable_rows(run), stable_rows(ref)
    assert a == b, [(x, y) for x, y in zip(a, b) if x != y]
    assert sb(["verify", str(run)], tag=tag, cwd=tmp_path).returncode == 0
    assert_no_orphans(tag, run)
