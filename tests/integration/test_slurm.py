"""The Slurm executor on a real one-node Slurm (issue 15).

A module fixture starts munged, slurmctld and slurmd from a temporary folder
(tests/helpers/slurm_cluster.py); every test submits through ``speedbench run --executor slurm``
as a user does, against the scripted fake server launched by speedbench as a local
server inside each job. The jobs run speedbench from this checkout: the scenario's
``executor.slurm`` names this interpreter and exports PYTHONPATH in its setup lines.

Orphans: every speedbench subprocess carries a unique ``SPEEDBENCH_TEST_TAG``; sbatch
passes the environment on, so the jobs, their servers and watchdogs carry it too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from speedbench.results import RunDir
from tests.helpers.slurm_cluster import Cluster, unavailable
from tests.helpers.cli_runs import TAG_VAR, fake_local, scenario, tagged, write_prompts, write_yaml

REPO = Path(__file__).resolve().parents[2]
WHY = unavailable()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(WHY is not None, reason=f"no single-node Slurm here: {WHY}")]


def sb(cluster: Cluster, args: list[str], *, tag: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, **cluster.env, TAG_VAR: tag, "COLUMNS": "250", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "speedbench.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout, check=False)


def slurm_scenario(tmp: Path, name: str, *, n_prompts: int, t_step: float, concurrency=(1, 2), **top) -> Path:
    prompts = write_prompts(tmp / "p.jsonl", [f"question {i}" for i in range(n_prompts)])
    sc = scenario(name, prompts, server=fake_local(**{"t-step": t_step, "output-tokens": 8}),
                  arms=[{"name": "base"}, {"name": "fast", "args": {"t-step": t_step / 2}}],
                  concurrency=list(concurrency), **top)
    sc["executor"] = {"kind": "local", "slurm": {
        "speedbench": [sys.executable, "-m", "speedbench.cli"],
        "setup": [f"export PYTHONPATH={REPO}"],
        "cpus_per_task": 1, "mem": "1500M", "time": "00:10:00", "signal_before_s": 0,
        "gpus_per_node": None,
    }}
    return write_yaml(tmp / "s.yaml", sc)


def job_state(cluster: Cluster, job_id: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True,
                         env={**os.environ, **cluster.env})
    for word in out.stdout.split():
        if word.startswith("JobState="):
            return word.split("=", 1)[1]
    return "GONE"


def wait_jobs(cluster: Cluster, ids: list[str], timeout: float = 120) -> dict[str, str]:
    active = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = {i: job_state(cluster, i) for i in ids}
        if not any(s in active for s in states.values()):
            return states
        time.sleep(0.5)
    raise AssertionError(f"jobs still active after {timeout} s: {states}\n{cluster.logs()}")


def the_run(out: Path) -> Path:
    runs = sorted(p for p in out.glob("*/*") if p.is_dir())
    assert len(runs) == 1, runs
    return runs[0]


def jsonl(p: Path) -> list[dict]:
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def job_output(run: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                     for p in sorted((run / "slurm").glob("*.out")))


def assert_nothing_left(cluster: Cluster, tag: str, run: Path) -> None:
    jobs = json.loads((run / "slurm" / "jobs.json").read_text())
    every = [i for ids in jobs["arms"].values() for i in ids] + jobs["gather"]
    states = {i: job_state(cluster, i) for i in every}
    assert not [i for i, s in states.items() if s in ("PENDING", "RUNNING", "COMPLETING")], states
    deadline = time.monotonic() + 10  # watchdogs poll every 0.5 s
    while tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = tagged(tag)
    assert not left, f"processes left: {[(p.pid, p.cmdline()) for p in left]}"


def record_key(r: dict) -> tuple:
    return r["arm"], r["concurrency"], r["variant"], r["repeat"], r["prompt_id"], r["turn"]


def test_two_arms_run_as_two_jobs_and_gather_equals_local_summary(cluster, tmp_path, tag):
    scen = slurm_scenario(tmp_path, "slurm2", n_prompts=4, t_step=0.004)
    dry = sb(cluster, ["run", str(scen), "--executor", "slurm", "--dry-run", "--skip-doctor"], tag=tag, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("#!/bin/bash") == 3 and "--signal" not in dry.stdout  # signal_before_s: 0
    assert "job \"$RUN\" --arm base" in dry.stdout and "gather \"$RUN\"" in dry.stdout

    res = sb(cluster, ["run", str(scen), "-o", str(tmp_path / "out"), "--executor", "slurm", "--skip-doctor"],
             tag=tag, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    run = the_run(tmp_path / "out")
    jobs = json.loads((run / "slurm" / "jobs.json").read_text())
    base_id, fast_id = jobs["arms"]["base"][0], jobs["arms"]["fast"][0]
    assert base_id != fast_id
    states = wait_jobs(cluster, [base_id, fast_id, jobs["gather"][0]])
    assert set(states.values()) == {"COMPLETED"}, (states, job_output(run))

    # Two jobs, each wrote its own files, and provenance names its job and node.
    prov = json.loads((run / "provenance-" f"{base_id}.json").read_text())["base"]
    assert prov["cluster"]["job_id"] == base_id and prov["cluster"]["node"] == cluster.host
    for arm, job in (("base", base_id), ("fast", fast_id)):
        recs = jsonl(run / f"records-{job}.jsonl")
        assert recs and {r["arm"] for r in recs} == {arm}
        assert {p["arm"] for p in json.loads((run / f"points-{job}.json").read_text())} == {arm}
    assert not (run / "records.jsonl").exists()

    # The gather's summary equals what the same records give in a single-process folder.
    gathered = json.loads((run / "summary.json").read_text())
    local = tmp_path / "local"
    local.mkdir()
    for name in ("scenario.resolved.yaml",):
        (local / name).write_text((run / name).read_text())
    (local / "records.jsonl").write_text("".join((run / f"records-{j}.jsonl").read_text() for j in (base_id, fast_id)))
    (local / "points.json").write_text(json.dumps(
        [p for j in (base_id, fast_id) for p in json.loads((run / f"points-{j}.json").read_text())]))
    (local / "provenance.json").write_text(json.dumps(
        {k: v for j in (base_id, fast_id) for k, v in json.loads((run / f"provenance-{j}.json").read_text()).items()}))
    subprocess.run(["cp", "-r", str(run / "prometheus"), str(local / "prometheus")], check=True)

    from speedbench.results.files import finite as _finite
    from speedbench.engine.vllm import VllmEngine
    from speedbench.results.summary import summarize_run_dir

    mine = summarize_run_dir(RunDir.open(local), VllmEngine(), write=False)
    assert len(gathered["rows"]) == 4
    assert gathered["rows"] == json.loads(json.dumps(_finite(mine["rows"])))
    assert gathered["categories"] == json.loads(json.dumps(_finite(mine["categories"])))

    st = sb(cluster, ["status", str(run)], tag=tag, cwd=tmp_path)
    assert st.returncode == 0, st.stdout
    assert base_id in st.stdout and "COMPLETED" in st.stdout and "2/2" in st.stdout
    assert_nothing_left(cluster, tag, run)


# What two runs of one scenario may differ in, left out of the comparison below:
RUN_FIELDS = ("run_id", "created_utc")  # the run's own name and start time
# each arm's server start and wall seconds, read off the clock; what the host was doing
# while each point ran; the controls, judged from the timed speedups
CLOCKED = ("arms", "conditions", "controls")
# Row and category values the fake server's scripted tokens fix; the rest (latencies,
# throughputs, speedups, their intervals, bursts, the headline clock) follow the host's clock.
EXACT_FLOATS = ("error_rate", "al_tokens", "al_requests", "al_prometheus", "draft_acceptance_rate")
EXACT = ("arm", "template", "concurrency", "variant", "category", "speculative", "method", "eagle_version", "status",
         "failure", "n_requests", "n_ok", "n_errors", "acceptance_histogram", "n_spec_malformed")


def comparable(summary: dict) -> dict:
    """summary.json less RUN_FIELDS and CLOCKED, with each row's and category's timed values
    reduced to their keys: what one scenario must give wherever it ran."""
    def row(r: dict) -> dict:
        # every key is there on both sides; values only where the fake's script fixes them
        # (identity, status, counts, AL, errors): the rest follow the host's clock, and a
        # busy fresh clone found yet another timed field each time a list was kept
        return {k: v if k in EXACT_FLOATS or k in EXACT else "timed" for k, v in r.items()}

    out = {k: v for k, v in summary.items() if k not in RUN_FIELDS + CLOCKED}
    out["rows"] = [row(r) for r in summary["rows"]]
    out["categories"] = [row(c) for c in summary["categories"]]
    return out


def test_a_failing_gate_gives_the_same_exit_code_and_summary_locally_and_under_slurm(cluster, tmp_path, tag):
    """Issue 46: one finish_run ends a local run and a Slurm gather, so a gate that cannot pass
    (an error rate below 0) fails both, with exit 1, over the same summary."""
    scen = slurm_scenario(tmp_path, "slurmgate", n_prompts=4, t_step=0.004, concurrency=(1,),
                          gates=[{"metric": "error_rate", "arm": "fast", "max": -1.0}])
    local = sb(cluster, ["run", str(scen), "-o", str(tmp_path / "local"), "--executor", "local", "--skip-doctor"],
               tag=tag, cwd=tmp_path)
    assert local.returncode == 1, local.stdout + local.stderr
    assert "gate FAIL: error_rate max -1 arm=fast" in local.stdout, local.stdout

    res = sb(cluster, ["run", str(scen), "-o", str(tmp_path / "slurm"), "--executor", "slurm", "--skip-doctor"],
             tag=tag, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr  # submitted
    run = the_run(tmp_path / "slurm")
    jobs = json.loads((run / "slurm" / "jobs.json").read_text())
    arms, gather = [ids[0] for ids in jobs["arms"].values()], jobs["gather"][0]
    states = wait_jobs(cluster, [*arms, gather])
    assert [states[j] for j in arms] == ["COMPLETED", "COMPLETED"], (states, job_output(run))
    assert (states[gather], show_job(cluster, gather)["ExitCode"]) == ("FAILED", "1:0"), job_output(run)
    assert "gate FAIL: error_rate max -1 arm=fast" in job_output(run)

    here = json.loads((the_run(tmp_path / "local") / "summary.json").read_text())
    there = json.loads((run / "summary.json").read_text())
    assert len(here["rows"]) == 2 and {r["status"] for r in here["rows"]} == {"ok"}
    assert comparable(here) == comparable(there)
    assert_nothing_left(cluster, tag, run)


def _wait_records(run: Path, n: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(len(jsonl(p)) for p in run.glob("records-*.jsonl")) >= n:
            return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} records after {timeout} s\n{job_output(run)}")


def test_cancel_leaves_no_job_and_no_server(cluster, tmp_path, tag):
    scen = slurm_scenario(tmp_path, "slurmcancel", n_prompts=40, t_step=0.05)
    res = sb(cluster, ["run", str(scen), "-o", str(tmp_path / "out"), "--executor", "slurm", "--skip-doctor"],
             tag=tag, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    run = the_run(tmp_path / "out")
    _wait_records(run, 2)
    assert [p for p in tagged(tag) if "fake_server" in " ".join(p.cmdline())], "no server running before cancel"
    res = sb(cluster, ["cancel", str(run)], tag=tag, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert_nothing_left(cluster, tag, run)
    # The cancelled jobs stopped their servers themselves and did not requeue.
    assert (run / "slurm" / "cancelled").exists()
    statuses = {p["status"] for f in run.glob("points-*.json") for p in json.loads(f.read_text())}
    assert "interrupted" in statuses or not statuses, statuses


def _is_job(cmd: list[str], arm: str) -> bool:
    return "speedbench.cli" in cmd and "job" in cmd and "--arm" in cmd and cmd[cmd.index("--arm") + 1] == arm


def test_killed_job_is_reported_and_resume_completes_without_duplicates(cluster, tmp_path, tag):
    # 0.05 s steps: after the third record the victim has seconds of work left, time for the
    # poll and the process scan to land the kill inside a point on a loaded host too
    scen = slurm_scenario(tmp_path, "slurmkill", n_prompts=12, t_step=0.05)
    res = sb(cluster, ["run", str(scen), "-o", str(tmp_path / "out"), "--executor", "slurm", "--skip-doctor"],
             tag=tag, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    run = the_run(tmp_path / "out")
    jobs = json.loads((run / "slurm" / "jobs.json").read_text())
    victim = jobs["arms"]["base"][0]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(jsonl(run / f"records-{victim}.jsonl")) < 3:
        time.sleep(0.1)
    procs = [p for p in tagged(tag) if _is_job(p.cmdline(), "base")]
    assert len(procs) == 1, [p.cmdline() for p in procs]
    os.kill(procs[0].pid, signal.SIGKILL)  # the OOM killer's way: no teardown runs

    states = wait_jobs(cluster, [*jobs["arms"]["base"], *jobs["arms"]["fast"], *jobs["gather"]])
    assert states[victim] == "FAILED", states
    st = sb(cluster, ["status", str(run)], tag=tag, cwd=tmp_path)
    assert st.returncode == 1, st.stdout
    assert victim in st.stdout and "FAILED (died)" in st.stdout and "exit 137" in st.stdout
    assert f"speedbench run --resume {run}" in st.stdout
    assert_nothing_left(cluster, tag, run)  # the watchdog stopped the killed job's server

    res = sb(cluster, ["run", "--resume", str(run), "--skip-doctor"], tag=tag, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "arms to run: base" in res.stdout
    jobs = json.loads((run / "slurm" / "jobs.json").read_text())
    assert len(jobs["arms"]["base"]) == 2 and len(jobs["arms"]["fast"]) == 1
    states = wait_jobs(cluster, [jobs["arms"]["base"][-1], jobs["gather"][-1]])
    assert set(states.values()) == {"COMPLETED"}, (states, job_output(run))

    recs = [r for p in run.glob("records-*.jsonl") for r in jsonl(p)]
    keys = [record_key(r) for r in recs]
    assert len(keys) == len(set(keys)), "duplicated records"
    assert len(keys) == 2 * 2 * 12  # 2 arms x 2 concurrency levels x 12 prompts, each once
    assert jsonl(run / "records.superseded.jsonl"), "the killed point's partial records were moved aside"
    summary = json.loads((run / "summary.json").read_text())
    assert {r["status"] for r in summary["rows"]} == {"ok"} and all(r["n_requests"] == 12 for r in summary["rows"])
    assert_nothing_left(cluster, tag, run)


# Stands in for `vllm serve` where the arm has a --speculative-config (which the fake's
# own CLI does not take): vLLM-only flags are accepted and ignored.
FAKE_VLLM = '''\
import argparse
from speedbench.testing.fake_server import main
ap = argparse.ArgumentParser()
for flag, default in (("--host", "127.0.0.1"), ("--port", "0"), ("--model", "fake-model"), ("--k", "0"),
                      ("--acceptance", ""), ("--t-step", "0.004")):
    ap.add_argument(flag, default=default)
a, _vllm_only = ap.parse_known_args()
main(["--host", a.host, "--port", a.port, "--model", a.model, "--t-step", a.t_step, "--output-tokens", "8",
      "--k", a.k] + (["--acceptance", a.acceptance] if a.acceptance else []))
'''


def test_nightly_matrix_of_two_checkpoints_builds_one_dashboard(cluster, tmp_path, tag):
    fake = tmp_path / "fake_vllm.py"
    fake.write_text(FAKE_VLLM)
    prompts = write_prompts(tmp_path / "p.jsonl", ["q0", "q1", "q2"])
    sc = scenario("nightly", prompts, server={**fake_local(), "command": [sys.executable, str(fake)]},
                  arms=[{"name": "base"},
                        {"name": "eagle3", "args": {"k": 3, "acceptance": "2,3"},
                         "speculative_config": {"method": "eagle3", "model": "/ckpt/none",
                                                "num_speculative_tokens": 3}}],
                  concurrency=[1])
    sc["executor"] = {"slurm": {"speedbench": [sys.executable, "-m", "speedbench.cli"],
                                "setup": [f"export PYTHONPATH={REPO}"], "mem": "1500M", "signal_before_s": 0}}
    write_yaml(tmp_path / "s.yaml", sc)
    matrix = write_yaml(tmp_path / "nightly.yaml", {
        "results": str(tmp_path / "nightly"), "scenarios": ["s.yaml"],
        "checkpoints": [{"name": "c1130", "set": ["arms.eagle3.speculative_config.model=/ckpt/1130",
                                                  "arms.eagle3.args.acceptance=1,2"]},
                        {"name": "c1201", "set": ["arms.eagle3.speculative_config.model=/ckpt/1201"]}],
    })
    res = sb(cluster, ["submit", str(matrix), "--skip-doctor"], tag=tag, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "nightly").glob("matrix-*.json")]
    assert [c["checkpoint"] for c in record["cells"]] == ["c1130", "c1201"]
    assert len({c["run"] for c in record["cells"]}) == 2
    ids = [j for c in record["cells"] for j in (*c["arm_jobs"], c["gather"])] + [record["dashboard_job"]]
    states = wait_jobs(cluster, ids, timeout=180)
    assert set(states.values()) == {"COMPLETED"}, (
        states, "\n".join(job_output(Path(c["run"])) for c in record["cells"]))
    index = Path(record["site"]) / "index.html"
    html = index.read_text()
    assert "/ckpt/1130" in html and "/ckpt/1201" in html  # one dashboard, both checkpoints side by side
    for c in record["cells"]:
        assert (Path(c["run"]) / "summary.json").exists()
    assert_nothing_left(cluster, tag, Path(record["cells"][0]["run"]))


# ---- issue 23: requeue at the time limit, max_requeues, sacct, GPUs --------------------

# The fake server, slow on a job's first attempt only: that attempt cannot finish its one
# request (8 tokens, 5 s each) before Slurm's time-limit signal; the requeued attempt
# (SLURM_RESTART_COUNT=1, inherited from the job) answers at once.
SLOW_FIRST = '''\
import os, sys
from speedbench.testing.fake_server import main
argv = sys.argv[1:]
if os.environ.get("SLURM_RESTART_COUNT", "0") == "0":
    argv += ["--t-step", "5"]  # argparse keeps the last --t-step
main(argv)
'''


def one_arm_scenario(tmp: Path, name: str, *, slow_first: bool, t_step: float, **slurm) -> Path:
    prompts = write_prompts(tmp / "p.jsonl", ["question 0", "question 1"])
    server = fake_local(**{"t-step": t_step, "output-tokens": 8})
    if slow_first:
        (tmp / "slow_first.py").write_text(SLOW_FIRST)
        server["command"] = [sys.executable, str(tmp / "slow_first.py")]
    sc = scenario(name, prompts, server=server, arms=[{"name": "base"}], concurrency=[1],
                  workload={"request_timeout_s": 120, "idle_timeout_s": 30})
    sc["executor"] = {"kind": "slurm", "slurm": {
        "speedbench": [sys.executable, "-m", "speedbench.cli"], "setup": [f"export PYTHONPATH={REPO}"],
        "cpus_per_task": 1, "mem": "1500M", **slurm}}
    return write_yaml(tmp / "s.yaml", sc)


def show_job(cluster: Cluster, job_id: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True,
                         env={**os.environ, **cluster.env})
    return dict(w.split("=", 1) for w in out.stdout.split() if "=" in w)


def submit_one(cluster: Cluster, scen: Path, tmp: Path, tag: str) -> tuple[Path, str, str]:
    res = sb(cluster, ["run", str(scen), "-o", str(tmp / "out"), "--skip-doctor"], tag=tag, cwd=tmp)
    assert res.returncode == 0, res.stdout + res.stderr
    run = the_run(tmp / "out")
    jobs = json.loads((run / "slurm" / "jobs.json").read_text())
    return run, jobs["arms"]["base"][0], jobs["gather"][0]


def test_time_limit_signal_requeues_the_job_which_finishes_on_its_second_attempt(cluster, tmp_path, tag):
    """--time=1 (Slurm's minimum) with --signal=B:TERM@20. slurmctld checks time limits
    every 30 s and signals once the limit is nearer than 20 + 30 s, so the signal comes
    10-40 s into the job: inside the point (its first request is 40 s long; on a busy host
    it may also land in the second, after the first finished), and early enough to stop
    and requeue before the limit. Nothing but Slurm signals the job here."""
    t0 = time.monotonic()
    scen = one_arm_scenario(tmp_path, "slurmtime", slow_first=True, t_step=0.004, time="00:01:00", signal_before_s=20)
    run, job, gather = submit_one(cluster, scen, tmp_path, tag)
    states = wait_jobs(cluster, [job, gather], timeout=300)  # states, not speed: a loaded host slows each start
    wall = time.monotonic() - t0
    assert states == {job: "COMPLETED", gather: "COMPLETED"}, (states, job_output(run))
    info = show_job(cluster, job)
    assert (info["Restarts"], info["TimeLimit"]) == ("1", "00:01:00"), info
    out = job_output(run)
    assert out.count(f"requeueing job {job} (requeue 1 of 3)") == 1, out
    assert (run / "slurm" / f"{job}.exit").read_text() == "0\n"
    # The same job id wrote both attempts; the second measured the point that the signal cut.
    prov = json.loads((run / f"provenance-{job}.json").read_text())["base"]["cluster"]
    assert prov["restart_count"] == "1"
    summary = json.loads((run / "summary.json").read_text())
    assert [(r["status"], r["n_requests"]) for r in summary["rows"]] == [("ok", 2)], summary["rows"]
    recs = jsonl(run / f"records-{job}.jsonl")
    assert len({record_key(r) for r in recs}) == len(recs) == 2, recs
    # The cut attempt's records, set aside: the request in flight at the signal, marked
    # interrupted, and any the point had finished before it (the point is measured again
    # whole). Which request the signal cut is the scheduler's: a fresh-clone run on a busy
    # host saw the first finish in 35 s and the signal cut the second 0.7 s in. At c=1 at
    # most one is in flight (none only if the signal beat the first request out).
    old = jsonl(run / "records.superseded.jsonl")
    cuts = [r for r in old if (r["error_detail"] or "").startswith("interrupted")]
    assert len(cuts) <= 1 and all(c["error"] == "cancelled" and c["t_end_ns"] > c["t_sent_ns"] for c in cuts), old
    assert all(r["error"] is None for r in old if r not in cuts), old
    assert {record_key(r) for r in old} <= {record_key(r) for r in recs} and len(old) <= len(recs), old
    st = sb(cluster, ["status", str(run)], tag=tag, cwd=tmp_path)
    assert st.returncode == 0 and "COMPLETED" in st.stdout and "1/1" in st.stdout, st.stdout
    assert_nothing_left(cluster, tag, run)
    cut = ", ".join(f"prompt {c['prompt_index']} after {(c['t_end_ns'] - c['t_sent_ns']) / 1e9:.1f} s" for c in cuts)
    print(f"time-limit requeue: {wall:.0f} s from submit to gathered; {len(old)} record(s) superseded; "
          f"the signal cut {cut or 'no request'}")


def _server_up(tag: str) -> bool:
    for p in tagged(tag):
        try:
            if "fake_server" in " ".join(p.cmdline()):
                return True
        except psutil.Error:  # it ended (or turned zombie) since tagged() listed it
            continue
    return False


def _wait(pred, what: str, run: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} not within {timeout} s\n{job_output(run)}")


def test_requeue_cap_fails_the_job_and_status_says_how_to_resume(cluster, tmp_path, tag):
    """max_requeues=1: Slurm's signal to the batch shell (`scancel --batch --signal=TERM`,
    what --signal=B:TERM sends, without waiting for the limit) requeues the job once; the
    second signal finds SLURM_RESTART_COUNT=1 and fails the job."""
    scen = one_arm_scenario(tmp_path, "slurmcap", slow_first=False, t_step=2.0, max_requeues=1, signal_before_s=0)
    run, job, gather = submit_one(cluster, scen, tmp_path, tag)
    env = {**os.environ, **cluster.env}
    for restarts in ("0", "1"):
        _wait(lambda r=restarts: show_job(cluster, job).get("Restarts") == r and _server_up(tag),
              f"attempt {restarts} serving", run)
        subprocess.run(["scancel", "--batch", "--signal=TERM", job], env=env, check=True)
        _wait(lambda: not _server_up(tag), "the server stopped", run)
    states = wait_jobs(cluster, [job, gather])
    assert states[job] == "FAILED", (states, job_output(run))
    assert show_job(cluster, job)["Restarts"] == "1"
    assert (run / "slurm" / f"{job}.requeue-cap").read_text() == "1\n"
    st = sb(cluster, ["status", str(run)], tag=tag, cwd=tmp_path)
    assert st.returncode == 1, st.stdout
    flat = " ".join(st.stdout.replace("│", " ").split())
    assert "FAILED (died)" in flat and "requeue cap reached" in flat, st.stdout
    js = sb(cluster, ["status", str(run), "--json"], tag=tag, cwd=tmp_path)
    (arm,) = json.loads(js.stdout)["jobs"]
    assert arm["died"] and ("requeue cap reached: stopped by the time limit or preemption after 1 requeue "
                            "(max_requeues=1)") in arm["reason"]
    assert f"speedbench run --resume {run}" in arm["reason"]
    assert_nothing_left(cluster, tag, run)


def test_status_of_jobs_slurm_has_forgotten_says_accounting_is_not_configured(cluster, tmp_path, tag):
    """This Slurm has no accounting database: sacct errors out for real, and status says so."""

    from speedbench.scenario import load_scenario, resolved_dict

    scen = one_arm_scenario(tmp_path, "slurmgone", slow_first=False, t_step=0.004)
    rd = RunDir.create(tmp_path / "out", "slurmgone")
    rd.write_scenario(resolved_dict(load_scenario(scen)))
    (rd.path / "slurm").mkdir()
    (rd.path / "slurm" / "jobs.json").write_text(json.dumps({"executor": "slurm", "arms": {"base": ["987654"]},
                                                              "gather": ["987655"], "submissions": []}))
    (rd.path / "slurm" / "987654.exit").write_text("0\n")
    js = sb(cluster, ["status", str(rd.path), "--json"], tag=tag, cwd=tmp_path)
    data = json.loads(js.stdout)
    (arm,) = data["jobs"]
    assert arm["state"] == "COMPLETED" and arm["died"]  # its points are not in the folder
    assert arm["reason"] == ("exit 0; slurmctld no longer knows the job and accounting is not configured "
                             "(sacct: Slurm accounting storage is disabled)")
    assert data["gather"]["state"].startswith("UNKNOWN (accounting is not configured")
    st = sb(cluster, ["status", str(rd.path)], tag=tag, cwd=tmp_path)
    assert st.returncode == 1 and "Traceback" not in st.stderr
    assert "accounting is not configured" in " ".join(st.stdout.replace("│", " ").split())


def test_gpu_job_sees_the_devices_slurm_gave_it(cluster, tmp_path, tag):
    """The fixture declares two fake GPUs (device nodes under its folder, gres.conf);
    slurmd sets CUDA_VISIBLE_DEVICES from the gres it allocates."""
    if not cluster.gpus:
        pytest.skip("mknod is not allowed here, so the test cluster declares no GPUs")
    scen = one_arm_scenario(tmp_path, "slurmgpu", slow_first=False, t_step=0.004, gpus_per_task=2)
    dry = sb(cluster, ["run", str(scen), "--dry-run", "--skip-doctor"], tag=tag, cwd=tmp_path)
    assert "#SBATCH --gpus-per-task=2" in dry.stdout, dry.stdout
    run, job, gather = submit_one(cluster, scen, tmp_path, tag)
    states = wait_jobs(cluster, [job, gather])
    assert set(states.values()) == {"COMPLETED"}, (states, job_output(run))
    prov = json.loads((run / f"provenance-{job}.json").read_text())["base"]["cluster"]
    assert (prov["cuda_visible_devices"], prov["gpus"]) == ("0,1", "0,1"), prov
    assert show_job(cluster, job).get("TresPerTask") == "gres:gpu:2"
    assert_nothing_left(cluster, tag, run)


# ---- a screening matrix (issue 21): 4 checkpoints start 4 servers, no baseline; the promote job then
# submits the promoted checkpoint's full run and the dashboard

SCREEN_SPEC = {"method": "eagle3", "model": "/ckpt/none", "num_speculative_tokens": 3}
CKPTS = {"c1": "0", "c2": "2", "c3": "1", "c4": "2/1"}  # accepted drafts per step: AL 1, 3, 2, ~2.5


def _record(root: Path) -> dict:
    (path,) = root.glob("matrix-*.json")
    return json.loads(path.read_text())


def test_screening_matrix_of_4_checkpoints_starts_4_servers_then_promotes(cluster, tmp_path, tag):
    prompts = write_prompts(tmp_path / "p.jsonl", [f"q{i}" for i in range(4)])
    server = {"launcher": "local", "model": "fake-model", "model_arg": "flag",
              "command": [sys.executable, "-m", "speedbench.testing.fake_server"],
              "args": {"t-step": "0.002", "output-tokens": "8"}}
    arms = [{"name": "base"}, {"name": "eagle3", "speculative_config": SCREEN_SPEC}]
    sc = scenario("scrn", prompts, server=server, arms=arms, concurrency=[1],
                  load={"mode": "screen", "screen_concurrency": 4})
    sc["executor"] = {"slurm": {"speedbench": [sys.executable, "-m", "speedbench.cli"],
                                "setup": [f"export PYTHONPATH={REPO}"], "mem": "1500M", "signal_before_s": 0}}
    write_yaml(tmp_path / "s.yaml", sc)
    root = tmp_path / "nightly"
    matrix = write_yaml(tmp_path / "m.yaml", {
        "results": str(root), "scenarios": ["s.yaml"], "promote": {"best": 1},
        "checkpoints": [{"name": n, "set": [f"arms.eagle3.speculative_config.model=/ckpt/{n}@accept={a}"]}
                        for n, a in CKPTS.items()]})
    res = sb(cluster, ["submit", str(matrix), "--skip-doctor"], tag=tag, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    rec = _record(root)
    cells = rec["cells"]
    assert [len(c["arm_jobs"]) for c in cells] == [1, 1, 1, 1]  # 4 server jobs, not 4 x (baseline + draft)
    states = wait_jobs(cluster, [j for c in cells for j in (*c["arm_jobs"], c["gather"])] + [rec["promote_job"]],
                       timeout=180)
    assert set(states.values()) == {"COMPLETED"}, (states, "\n".join(job_output(Path(c["run"])) for c in cells))
    for c in cells:
        assert sorted(RunDir.open(c["run"]).load_provenance()) == ["eagle3"]  # each job's file, merged
    deadline = time.monotonic() + 30  # the promote job rewrites the record once it has submitted
    while "dashboard_job" not in rec and time.monotonic() < deadline:
        time.sleep(0.5)
        rec = _record(root)
    assert [p["checkpoint"] for p in rec["promoted"]] == ["c2"]
    (full,) = rec["promoted"]
    states = wait_jobs(cluster, [*full["arm_jobs"], full["gather"], rec["dashboard_job"]], timeout=180)
    assert set(states.values()) == {"COMPLETED"}, (states, job_output(Path(full["run"])))
    summary = json.loads((Path(full["run"]) / "summary.json").read_text())
    assert summary["load"]["mode"] == "concurrency" and {r["arm"] for r in summary["rows"]} == {"base", "eagle3"}
    html = (Path(rec["site"]) / "index.html").read_text()
    assert "measured" in html and "no calibration" in html  # measured and screened runs are told apart
    assert_nothing_left(cluster, tag, Path(full["run"]))
