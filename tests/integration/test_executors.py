"""The Slurm executor without a cluster: batch scripts, per-job run-folder files, the
watchdog that stops a server whose owner was SIGKILLed, the doctor's leftover check and
the nightly matrix. The real single-node Slurm tests are in test_slurm.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from speedbench.executors.base import ArmJob
from speedbench.executors.matrix import cells, load_matrix
from speedbench.executors.slurm.client import Slurm
from speedbench.executors.slurm.scripts import arm_script, gather_script
from speedbench.executors.slurm.states import arm_jobs
from speedbench.executors.slurm.submission import submit
from speedbench.records import RequestRecord
from speedbench.results import RunDir
from speedbench.scenario import validate_data
from speedbench.errors import ScenarioError

BASE = {
    "name": "k", "server": {"model": "m"},
    "arms": [{"name": "baseline"},
             {"name": "eagle3", "speculative_config": {"method": "eagle3", "model": "d", "num_speculative_tokens": 3}}],
    "concurrency": [1, 4],
}


def sc_with(**slurm):
    return validate_data({**BASE, "executor": {"kind": "slurm", "slurm": slurm}})


def test_arm_script_for_a_4_gpu_node_has_every_setting():
    sc = sc_with(partition="gpu", account="team", qos="high", time="04:00:00", gpus_per_node=4, cpus_per_task=32,
                 mem="400G", constraint="h100", sbatch_lines=["--exclusive", "#SBATCH --comment=nightly"],
                 setup=["module load cuda/12.4", "source /shared/venv/bin/activate"], speedbench=["speedbench"],
                 signal_before_s=600)
    text = arm_script(sc, Path("/shared/results/k/RUN1"), "eagle3", cwd=Path("/shared/work"))
    for line in ("#SBATCH --job-name=sb-k-eagle3", "#SBATCH --output=/shared/results/k/RUN1/slurm/eagle3-%j.out",
                 "#SBATCH --chdir=/shared/work", "#SBATCH --partition=gpu", "#SBATCH --account=team",
                 "#SBATCH --qos=high", "#SBATCH --time=04:00:00", "#SBATCH --gpus-per-node=4",
                 "#SBATCH --cpus-per-task=32", "#SBATCH --mem=400G", "#SBATCH --constraint=h100",
                 "#SBATCH --signal=B:TERM@600", "#SBATCH --requeue", "#SBATCH --exclusive", "#SBATCH --comment=nightly",
                 "module load cuda/12.4\nsource /shared/venv/bin/activate\n", 'speedbench job "$RUN" --arm eagle3 &',
                 'scontrol requeue "$SLURM_JOB_ID"'):
        assert line in text, line
    assert text.index("#SBATCH --comment") < text.index("RUN=")  # sbatch stops reading at the first command
    assert "srun" not in text and "CUDA_VISIBLE_DEVICES" not in text  # Slurm's devices are used as given
    r = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    assert r.returncode == 0, r.stderr


def test_pyxis_runs_speedbench_in_the_container_and_gather_needs_no_gpu():
    sc = sc_with(container_image="nvcr.io#nvidia/vllm:0.32",
                 container_mounts=["/lustre/ckpt:/ckpt", "/lustre/res:/res"],
                 gpus_per_node=4, requeue=False, speedbench=["speedbench"])
    text = arm_script(sc, Path("/res/k/R"), "baseline", cwd=Path("/res"))
    assert ("srun --ntasks=1 '--container-image=nvcr.io#nvidia/vllm:0.32' --container-workdir=/res "
            "--container-mounts=/lustre/ckpt:/ckpt,/lustre/res:/res speedbench job \"$RUN\" --arm baseline") in text
    assert "--no-requeue" in text and "scontrol requeue" not in text
    g = gather_script(sc, Path("/res/k/R"), cwd=Path("/res"))
    assert "gpus" not in g and "speedbench gather \"$RUN\"" in g and "#SBATCH --cpus-per-task=1" in g


def test_multi_node_is_refused_with_the_reason():
    with pytest.raises(ScenarioError, match="multi-node servers"):
        validate_data({**BASE, "executor": {"kind": "slurm", "slurm": {"nodes": 2}}})


class FakeSlurm:
    """sbatch/scontrol/scancel as a dict of jobs."""

    def __init__(self):
        self.jobs: dict[str, dict] = {}
        self.calls: list[list[str]] = []

    def __call__(self, argv, **kw):
        self.calls.append(argv)
        if argv[0] == "sbatch":
            jid = str(100 + len(self.jobs))
            self.jobs[jid] = {"JobState": "PENDING", "argv": argv}
            return subprocess.CompletedProcess(argv, 0, f"{jid};cluster\n", "")
        if argv[0] == "scontrol":
            j = self.jobs.get(argv[-1])
            if not j:
                return subprocess.CompletedProcess(argv, 1, "", "Invalid job id specified")
            return subprocess.CompletedProcess(argv, 0, f"JobId={argv[-1]} JobState={j['JobState']} Reason=None "
                                                        f"NodeList=n1 ExitCode={j.get('ExitCode', '0:0')}\n", "")
        if argv[0] == "scancel":
            for i in argv[1:]:
                self.jobs[i]["JobState"] = "CANCELLED"
            return subprocess.CompletedProcess(argv, 0, "", "")
        raise AssertionError(argv)


def test_submit_writes_scripts_jobs_and_gather_dependency(tmp_path):
    sc = sc_with(speedbench=["speedbench"])
    rd = RunDir.create(tmp_path, "k")
    fake = FakeSlurm()
    jobs = submit(sc, rd, slurm=Slurm(runner=fake), cwd=tmp_path)
    assert jobs["arms"] == {"baseline": ["100"], "eagle3": ["101"]} and jobs["gather"] == ["102"]
    assert fake.calls[-1][:3] == ["sbatch", "--parsable", "--dependency=afterany:100:101"]
    assert (rd.path / "slurm" / "eagle3.sbatch").exists() and (rd.path / "slurm" / "gather.sbatch").exists()
    # status: one arm finished its points and ended, the other died after one point
    rd2 = RunDir.open(rd.path, tag="100")
    for c in (1, 4):
        rd2.mark_point(("baseline", c, ""), status="ok")
    RunDir.open(rd.path, tag="101").mark_point(("eagle3", 1, ""), status="ok")
    fake.jobs["100"]["JobState"] = "COMPLETED"
    fake.jobs["101"].update(JobState="FAILED", ExitCode="137:0")
    (rd.path / "slurm" / "101.exit").write_text("137\n")
    got = {j.arm: j for j in arm_jobs(rd, sc, Slurm(runner=fake))}
    assert got["baseline"] == ArmJob("baseline", "100", "COMPLETED", "n1", "exit 0:0", 2, 2) \
        and not got["baseline"].died
    assert got["eagle3"].died and got["eagle3"].reason == "exit 137:0 (speedbench exit 137)"
    assert (got["eagle3"].points_done, got["eagle3"].points_total) == (1, 2)


def rec(arm, conc, i, **kw):
    return RequestRecord(arm=arm, concurrency=conc, prompt_index=i, prompt_id=f"p{i}", **kw)


def test_per_job_files_load_as_one_run_and_prune_touches_only_its_arm(tmp_path):
    rd = RunDir.create(tmp_path, "k")
    a, b = RunDir.open(rd.path, tag="11"), RunDir.open(rd.path, tag="12")
    a.append_record(rec("a", 1, 0))
    a.append_record(rec("a", 1, 1))
    a.mark_point(("a", 1, ""), status="ok")
    a.append_record(rec("a", 4, 0))  # point a/4 unfinished: its job died here
    b.append_record(rec("b", 1, 0))  # b/1 in progress in another job
    a.save_provenance("a", {"cluster": {"job_id": "11"}})
    b.save_provenance("b", {"cluster": {"job_id": "12"}})
    assert sorted(p.name for p in rd.path.glob("records*")) == ["records-11.jsonl", "records-12.jsonl"]
    reader = RunDir.open(rd.path)
    assert len(reader.load_records()) == 4
    assert set(reader.load_provenance()) == {"a", "b"}
    assert list(reader.finished_points()) == [("a", 1, "")]
    # The resubmitted job of arm a (a new tag) moves a/4 aside and leaves b's records alone.
    again = RunDir.open(rd.path, tag="13")
    assert again.prune_unfinished_records(arms=["a"]) == 1
    assert [r.arm for r in reader.load_records()] == ["a", "a", "b"]
    again.mark_point(("a", 4, ""), status="ok")
    assert set(reader.finished_points()) == {("a", 1, ""), ("a", 4, "")}
    assert reader.all_points()[("a", 4, "")]["job"] == "13"


WORKER = textwrap.dedent("""\
    import subprocess, sys, time
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # a worker in the group
    time.sleep(300)
""")

OWNER = textwrap.dedent("""\
    import subprocess, sys, time
    from speedbench.engine import watchdog
    srv = subprocess.Popen([sys.executable, "-c", sys.argv[1]], start_new_session=True)
    watchdog.spawn(srv.pid, grace_s=2)
    print(srv.pid, flush=True)
    time.sleep(300)
""")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_watchdog_stops_the_server_group_when_its_owner_is_sigkilled():
    owner = subprocess.Popen([sys.executable, "-c", OWNER, WORKER], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    pgid = int(owner.stdout.readline())
    try:
        time.sleep(0.5)
        assert _group_alive(pgid)
        owner.send_signal(signal.SIGKILL)  # no teardown runs in the owner
        owner.wait()
        deadline = time.monotonic() + 10
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _group_alive(pgid), "the server group outlived its SIGKILLed owner"
    finally:
        if _group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)


def test_doctor_names_a_server_whose_owner_is_gone():
    import socket

    from speedbench.doctor.servers import Tagged, check_leftover_servers

    dead_owner = 2 ** 22 + 12345  # above pid_max on default kernels
    procs = [Tagged(4242, 4242, "python -m vllm.entrypoints.openai.api_server --model m", dead_owner,
                    socket.gethostname(), "eagle3"),
             Tagged(4243, 4242, "VLLM::EngineCore", dead_owner, socket.gethostname(), "eagle3"),
             Tagged(5000, 5000, "vllm serve x", os.getpid(), socket.gethostname(), "live")]
    from types import SimpleNamespace

    checks = check_leftover_servers(SimpleNamespace(facts=SimpleNamespace(processes=lambda: procs)))
    assert len(checks) == 1 and checks[0].status == "warn"
    detail = checks[0].detail
    assert "pid 4242 (arm eagle3" in detail and "4243" not in detail and "5000" not in detail
    assert checks[0].fix == "kill -TERM -- -4242"


def test_matrix_crosses_scenarios_checkpoints_and_overrides(tmp_path):
    scen = tmp_path / "s.yaml"
    scen.write_text(yaml.safe_dump(BASE))
    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump({
        "results": str(tmp_path / "nightly"), "scenarios": ["s.yaml"],
        "checkpoints": [{"name": "c1", "set": ["arms.eagle3.speculative_config.model=/ck/1"]},
                        {"name": "c2", "set": ["arms.eagle3.speculative_config.model=/ck/2"]}],
        "overrides": [{"name": "short", "set": ["workload.max_tokens=64"]}, {"name": "long", "set": []}],
        "set": ["executor.slurm.partition=gpu"],
    }))
    got = cells(load_matrix(m), m.parent)
    assert [c.label for c in got] == ["k x c1 x short", "k x c1 x long", "k x c2 x short", "k x c2 x long"]
    assert got[0].scenario.arm("eagle3").speculative_config.model == "/ck/1"
    assert got[2].scenario.arm("eagle3").speculative_config.model == "/ck/2"
    assert got[0].scenario.workload.max_tokens == 64 and got[0].scenario.executor.slurm.partition == "gpu"
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenarios: [s.yaml]\ncheckpoints: []\n")
    with pytest.raises(ScenarioError, match="checkpoints"):
        load_matrix(bad)


def test_jobs_and_gather_without_a_scheduler_and_gather_returns_the_gate_exit(tmp_path):
    """`speedbench job` and `speedbench gather` are plain commands: two "jobs" run here one
    after the other into one folder, and the gather's exit code is the gates' (a gate that
    cannot pass) or 1 while a point is unfinished."""
    from speedbench.scenario import load_scenario, resolved_dict
    from tests.helpers.cli_runs import fake_local, scenario, write_prompts, write_yaml

    prompts = write_prompts(tmp_path / "p.jsonl", ["q0", "q1"])
    sc = scenario("jobs", prompts, server=fake_local(**{"t-step": 0.002, "output-tokens": 8}),
                  arms=[{"name": "a"}, {"name": "b"}], gates=[{"metric": "error_rate", "arm": "b", "max": -1.0}])
    rd = RunDir.create(tmp_path / "out", "jobs")
    rd.write_scenario(resolved_dict(load_scenario(write_yaml(tmp_path / "s.yaml", sc))))

    def sb(*args):
        return subprocess.run([sys.executable, "-m", "speedbench.cli", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120, env={**os.environ, "COLUMNS": "200",
                                                              "PYTHONPATH": str(Path(__file__).resolve().parents[2])})

    r = sb("job", str(rd.path), "--arm", "a", "--tag", "j1", "--skip-doctor")
    assert r.returncode == 0, r.stdout + r.stderr
    g = sb("gather", str(rd.path))
    assert g.returncode == 1 and "1 points unfinished or failed: b c=1" in g.stdout, g.stdout + g.stderr
    r = sb("job", str(rd.path), "--arm", "b", "--tag", "j2", "--skip-doctor")
    assert r.returncode == 0, r.stdout + r.stderr
    g = sb("gather", str(rd.path), "--junit", str(tmp_path / "gates.xml"))
    assert g.returncode == 1 and "gate FAIL" in g.stdout and "unfinished" not in g.stdout, g.stdout
    assert (tmp_path / "gates.xml").exists() and (rd.path / "report.html").exists()
    assert sorted(p.name for p in rd.path.glob("records*.jsonl")) == ["records-j1.jsonl", "records-j2.jsonl"]
    assert len(json.loads((rd.path / "summary.json").read_text())["rows"]) == 2


def _run_arm_script(tmp_path: Path, body: str, *, restarts: int | None = None, term_when_started: bool = False,
                    cancelled: bool = False) -> tuple[int, str, list[str]]:
    """The generated arm script under bash, with speedbench replaced by ``body`` and a
    scontrol that only logs: -> (exit code, output, scontrol calls). ``term_when_started``:
    SIGTERM the script once ``body`` has touched ``tmp_path/started`` (by then the script's
    trap is set, however slowly a busy host ran it)."""
    bin_dir, run = tmp_path / "bin", tmp_path / "R"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (run / "slurm").mkdir(parents=True, exist_ok=True)
    for name, text in (("scontrol", f'echo "$*" >> {tmp_path}/scontrol.log\n'), ("fake-speedbench", body)):
        (bin_dir / name).write_text("#!/bin/bash\n" + text)
        (bin_dir / name).chmod(0o755)
    if cancelled:
        (run / "slurm" / "cancelled").write_text("x\n")
    script = arm_script(sc_with(speedbench=["fake-speedbench"], max_requeues=2), run, "baseline", cwd=tmp_path)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "7"}
    env.pop("SLURM_RESTART_COUNT", None)
    if restarts is not None:
        env["SLURM_RESTART_COUNT"] = str(restarts)
    p = subprocess.Popen(["bash", "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if term_when_started:
        deadline = time.monotonic() + 30
        while not (tmp_path / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        p.send_signal(signal.SIGTERM)  # what --signal=B:TERM does: only the batch shell gets it
    out, _ = p.communicate(timeout=30)
    log = tmp_path / "scontrol.log"
    return p.returncode, out, log.read_text().splitlines() if log.exists() else []


def test_arm_script_requeues_on_slurms_signal_until_max_requeues(tmp_path):
    rc, out, calls = _run_arm_script(tmp_path / "a", "exit 130\n")
    assert (rc, calls) == (130, ["requeue 7"]) and "requeueing job 7 (requeue 1 of 2)" in out
    assert (tmp_path / "a" / "R" / "slurm" / "7.exit").read_text() == "130\n"
    rc, out, calls = _run_arm_script(tmp_path / "b", "exit 130\n", restarts=1)
    assert calls == ["requeue 7"] and "(requeue 2 of 2)" in out
    # the cap: the third stop fails the job and leaves the marker that status reads
    rc, out, calls = _run_arm_script(tmp_path / "c", "exit 130\n", restarts=2)
    assert (rc, calls) == (130, []) and "after 2 requeues (max_requeues); not requeueing" in out
    assert (tmp_path / "c" / "R" / "slurm" / "7.requeue-cap").read_text() == "2\n"
    # speedbench killed by the forwarded SIGTERM before its own handler (during start-up)
    rc, out, calls = _run_arm_script(tmp_path / "d", f"touch {tmp_path / 'd' / 'started'}\nexec sleep 20\n",
                                     term_when_started=True)
    assert (rc, calls) == (143, ["requeue 7"]), out


@pytest.mark.parametrize(("body", "cancelled", "rc"), [("exit 0\n", False, 0), ("exit 1\n", False, 1),
                                                       ("exit 130\n", True, 130)])
def test_arm_script_does_not_requeue_a_finished_failed_or_cancelled_arm(tmp_path, body, cancelled, rc):
    got, out, calls = _run_arm_script(tmp_path, body, cancelled=cancelled)
    assert (got, calls) == (rc, []), out
    assert not (tmp_path / "R" / "slurm" / "7.requeue-cap").exists()
