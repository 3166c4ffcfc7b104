"""The Slurm executor without a cluster (issue 23): the GPU and requeue lines of the
generated arm script, sacct's output, and what `speedbench status` says about a job that
hit max_requeues or that slurmctld has forgotten. Running the generated script under bash
is in tests/integration/test_executors.py; the real Slurm in tests/integration/test_slurm.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from speedbench.errors import ScenarioError
from speedbench.executors.slurm.client import Slurm, parse_sacct
from speedbench.executors.slurm.scripts import arm_script, gather_script
from speedbench.executors.slurm.states import arm_jobs, gather_job
from speedbench.executors.slurm.submission import submit
from speedbench.results import RunDir
from speedbench.scenario import validate_data

DATA = Path(__file__).resolve().parents[2] / "data" / "slurm"
BASE = {"name": "k", "server": {"model": "m"}, "arms": [{"name": "baseline"}], "concurrency": [1, 4]}


def sc_with(**slurm):
    return validate_data({**BASE, "executor": {"kind": "slurm", "slurm": slurm}})


def sbatch_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("#SBATCH ")]


@pytest.mark.parametrize(("setting", "line"), [
    ({"gpus_per_node": 4}, "#SBATCH --gpus-per-node=4"),
    ({"gpus_per_task": 2}, "#SBATCH --gpus-per-task=2"),
    ({"gres": "gpu:h100:8"}, "#SBATCH --gres=gpu:h100:8"),
])
def test_each_way_of_asking_for_gpus_is_one_sbatch_line_and_the_gather_asks_none(setting, line):
    sc = sc_with(container_image="nvcr.io#nvidia/vllm:0.32", container_mounts=["/lustre:/lustre"], **setting)
    text = arm_script(sc, Path("/lustre/r/R"), "baseline", cwd=Path("/lustre/w"))
    gpu_lines = [ln for ln in sbatch_lines(text) if "gpu" in ln or "gres" in ln]
    assert gpu_lines == [line]
    # pyxis: speedbench is a job step in the container; the step inherits the job's GPUs
    step = next(ln for ln in text.splitlines() if "speedbench.cli" in ln)
    assert step.startswith("srun --ntasks=1 '--container-image=nvcr.io#nvidia/vllm:0.32' --container-workdir=/lustre/w "
                           "--container-mounts=/lustre:/lustre ")
    assert "--gpus" not in step and "--gres" not in step
    gather = gather_script(sc, Path("/lustre/r/R"), cwd=Path("/lustre/w"))
    assert not [ln for ln in sbatch_lines(gather) if "gpu" in ln or "gres" in ln]


def test_gpus_asked_two_ways_are_refused_but_other_gres_go_with_gpus():
    with pytest.raises(ScenarioError, match="ask for GPUs one way: gpus_per_node and gres"):
        sc_with(gpus_per_node=4, gres="gpu:4")
    sc = sc_with(gpus_per_node=4, gres="nvme:1")
    assert {"#SBATCH --gpus-per-node=4", "#SBATCH --gres=nvme:1"} <= set(sbatch_lines(arm_script(
        sc, Path("/r"), "baseline", cwd=Path("/"))))


def test_the_script_requeues_at_most_max_requeues_times():
    text = arm_script(sc_with(max_requeues=2, signal_before_s=120), Path("/r/R"), "baseline", cwd=Path("/"))
    assert "#SBATCH --signal=B:TERM@120" in sbatch_lines(text) and "#SBATCH --requeue" in sbatch_lines(text)
    assert "restarts=${SLURM_RESTART_COUNT:-0}" in text and '[ "$restarts" -lt 2 ]' in text
    assert text.index("scontrol requeue") < text.index('> "$RUN/slurm/$SLURM_JOB_ID.requeue-cap"')
    assert "(requeue $((restarts + 1)) of 2)" in text
    # the trap marks the signal, so a speedbench killed before its own handler still requeues
    assert "trap 'signalled=1; kill -TERM \"$pid\" 2>/dev/null' TERM INT" in text
    never = arm_script(sc_with(requeue=False), Path("/r/R"), "baseline", cwd=Path("/"))
    assert "scontrol requeue" not in never and "requeue-cap" not in never and "--no-requeue" in never


def test_sacct_rows_give_the_jobs_own_line_not_its_steps():
    text = (DATA / "sacct_parsable2.txt").read_text()
    assert parse_sacct(text, "4242") == {"JobID": "4242", "State": "CANCELLED", "ExitCode": "0:15",
                                         "NodeList": "gpu-node-07"}
    assert parse_sacct(text, "4243") == {"JobID": "4243", "State": "FAILED", "ExitCode": "130:0",
                                         "NodeList": "gpu-node-03"}
    assert parse_sacct(text, "424") is None and parse_sacct("", "4242") is None
    # a requeued job listed with --duplicates: the latest attempt comes last
    assert parse_sacct("77|REQUEUED|0:0|n1\n77|COMPLETED|0:0|n2\n", "77")["State"] == "COMPLETED"


class Runner:
    """scontrol knows only ``known``; sacct answers ``sacct`` = (rc, stdout, stderr)."""

    def __init__(self, sacct: tuple[int, str, str], known: dict[str, str] | None = None):
        self.sacct, self.known, self.calls = sacct, known or {}, []
        self.next_id = 500

    def __call__(self, argv, **kw):
        self.calls.append(argv)
        if argv[0] == "sbatch":
            self.next_id += 1
            return subprocess.CompletedProcess(argv, 0, f"{self.next_id}\n", "")
        if argv[0] == "scontrol":
            state = self.known.get(argv[-1])
            if state is None:
                return subprocess.CompletedProcess(argv, 1, "", "slurm_load_jobs error: Invalid job id specified")
            return subprocess.CompletedProcess(argv, 0, f"JobId={argv[-1]} JobState={state} Reason=None "
                                                        "NodeList=n1 ExitCode=130:0\n", "")
        if argv[0] == "sacct":
            return subprocess.CompletedProcess(argv, *self.sacct)
        raise AssertionError(argv)


def submitted(tmp_path: Path, runner: Runner) -> RunDir:
    rd = RunDir.create(tmp_path, "k")
    submit(sc_with(speedbench=["speedbench"]), rd, slurm=Slurm(runner=runner), cwd=tmp_path)
    return rd


def test_status_says_the_requeue_cap_was_reached_and_how_to_resume(tmp_path):
    runner = Runner((1, "", ""), known={"501": "FAILED"})
    rd = submitted(tmp_path, runner)
    RunDir.open(rd.path, tag="501").mark_point(("baseline", 1, ""), status="ok")
    (rd.path / "slurm" / "501.exit").write_text("130\n")
    (rd.path / "slurm" / "501.requeue-cap").write_text("3\n")
    (job,) = arm_jobs(rd, sc_with(), Slurm(runner=runner))
    assert job.died and (job.state, job.points_done, job.points_total) == ("FAILED", 1, 2)
    assert job.reason.startswith("exit 130:0 (speedbench exit 130); requeue cap reached: stopped by the time limit "
                                 "or preemption after 3 requeues (max_requeues=3)")
    assert f"speedbench run --resume {rd.path}" in job.reason
    # while the job is still active the marker of an earlier attempt says nothing
    runner.known["501"] = "RUNNING"
    (job,) = arm_jobs(rd, sc_with(), Slurm(runner=runner))
    assert "requeue cap" not in job.reason


def test_a_forgotten_job_is_read_from_sacct(tmp_path):
    sample = (DATA / "sacct_parsable2.txt").read_text().replace("4243", "501")
    runner = Runner((0, sample, ""))
    rd = submitted(tmp_path, runner)
    (rd.path / "slurm" / "501.exit").write_text("130\n")
    (job,) = arm_jobs(rd, sc_with(), Slurm(runner=runner))
    assert (job.state, job.node, job.reason) == ("FAILED", "gpu-node-03",
                                                 "exit 130:0 (speedbench exit 130), from sacct")
    sacct = next(c for c in runner.calls if c[0] == "sacct")
    assert sacct[1:3] == ["--jobs", "501"] and "--parsable2" in sacct
    assert gather_job(rd, Slurm(runner=runner)) == ("502", "UNKNOWN (sacct has no record of it)")


def test_without_accounting_status_says_so_instead_of_failing(tmp_path):
    runner = Runner((1, "", "Slurm accounting storage is disabled\n"))
    rd = submitted(tmp_path, runner)
    (job,) = arm_jobs(rd, sc_with(), Slurm(runner=runner))
    assert job.state == "UNKNOWN" and job.died
    assert job.reason == ("slurmctld no longer knows the job and accounting is not configured "
                          "(sacct: Slurm accounting storage is disabled)")
    (rd.path / "slurm" / "501.exit").write_text("0\n")
    (job,) = arm_jobs(rd, sc_with(), Slurm(runner=runner))
    assert job.state == "COMPLETED" and job.reason.startswith("exit 0; slurmctld no longer knows the job")
    other = Runner((1, "", "sacct: error: Problem talking to the database: Connection refused"))
    (job,) = arm_jobs(rd, sc_with(), Slurm(runner=other))
    assert job.reason.endswith("sacct failed (sacct: error: Problem talking to the database: Connection refused)")


def test_without_sacct_installed_status_says_so(tmp_path):
    def runner(argv, **kw):
        if argv[0] == "sacct":
            raise FileNotFoundError(argv[0])
        return Runner((0, "", ""))(argv, **kw)

    rd = submitted(tmp_path, Runner((0, "", "")))
    (job,) = arm_jobs(rd, sc_with(), Slurm(runner=runner))
    assert job.reason == "slurmctld no longer knows the job and sacct is not installed"
