"""Every sbatch file speedbench writes: one arm's job, the gather, and the follow-up jobs of
a nightly matrix (promote, dashboard).

The scripts are plain, readable files written into the run folder (or the matrix's results
root) before they are submitted, so what ran can always be read back (``--dry-run`` prints
the same text). Each arm's job runs ``speedbench job RUN --arm ARM``: it starts that arm's
server on the devices Slurm gave the job, measures every point not yet finished, and
writes only its own ``records-<jobid>.jsonl`` / ``points-<jobid>.json``. The gather job
(``--dependency=afterany``) runs ``speedbench gather RUN`` once every arm job has ended.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from speedbench.scenario import Scenario, SlurmSpec

DIR = "slurm"  # inside the run folder: scripts, jobs.json, job output, exit codes
CANCELLED = "cancelled"  # marker: `speedbench cancel` ran; jobs must not requeue
REQUEUE_CAP = "requeue-cap"  # <jobid>.requeue-cap: the job stopped at max_requeues (holds the count)


def speedbench_argv(spec: SlurmSpec) -> list[str]:
    """The argv that starts speedbench inside a job: the scenario's own, else this
    interpreter's ``python -m speedbench.cli`` (right on a shared filesystem)."""
    return list(spec.speedbench or [sys.executable, "-m", "speedbench.cli"])


def _account(spec: SlurmSpec) -> list[str]:
    return [f"--{flag}={value}" for flag, value in
            (("partition", spec.partition), ("account", spec.account), ("qos", spec.qos)) if value]


def _arm_sizes(spec: SlurmSpec) -> list[str]:
    """An arm job's resources, its time-limit signal and whether Slurm may requeue it."""
    sizes: tuple[tuple[str, str | int | None], ...] = (
        ("time", spec.time), ("gpus-per-node", spec.gpus_per_node), ("gpus-per-task", spec.gpus_per_task),
        ("gres", spec.gres), ("cpus-per-task", spec.cpus_per_task), ("mem", spec.mem),
        ("constraint", spec.constraint))
    lines = [f"--{flag}={size}" for flag, size in sizes if size is not None and size != ""]
    if spec.signal_before_s:
        lines.append(f"--signal=B:TERM@{spec.signal_before_s}")
    lines.append("--requeue" if spec.requeue else "--no-requeue")
    return lines


def _header(spec: SlurmSpec, *, name: str, output: str, cwd: Path, arm_job: bool) -> list[str]:
    lines = [f"--job-name={name}", f"--output={output}", "--open-mode=append", f"--chdir={cwd}",
             "--nodes=1", "--ntasks=1", *_account(spec)]
    # the gather reads files; it needs no GPU
    lines += _arm_sizes(spec) if arm_job else ["--cpus-per-task=1"]
    out = [f"#SBATCH {ln}" for ln in lines]
    out += [ln if ln.lstrip().startswith("#SBATCH") else f"#SBATCH {ln}" for ln in spec.sbatch_lines]
    return out


def _launcher(spec: SlurmSpec, cwd: Path) -> str:
    """The words before speedbench's argv: pyxis runs it inside the container as a step."""
    if not spec.container_image:
        return ""
    words = ["srun", "--ntasks=1", f"--container-image={spec.container_image}", f"--container-workdir={cwd}"]
    if spec.container_mounts:
        words.append("--container-mounts=" + ",".join(spec.container_mounts))
    return shlex.join(words) + " "


def _script_head(sc: Scenario, run_path: Path | str, *, what: str, job: str, cwd: Path, arm_job: bool) -> str:
    """What both job scripts start with: the shebang, what the script is, its #SBATCH
    lines (job name and output file from ``job``), ``RUN=`` and the scenario's setup lines."""
    spec = sc.executor.slurm
    return (
        "#!/bin/bash\n"
        f"# speedbench: {what} of scenario {sc.name} (generated; docs/slurm.md)\n"
        + "\n".join(_header(spec, name=f"sb-{sc.name}-{job}", output=f"{run_path}/{DIR}/{job}-%j.out",
                            cwd=cwd, arm_job=arm_job)) + "\n"
        f"RUN={shlex.quote(str(run_path))}\n"
        + "".join(f"{ln}\n" for ln in spec.setup)
    )


def _requeue_lines(spec: SlurmSpec) -> str:
    """After speedbench exits: requeue this job when Slurm's signal stopped an unfinished
    arm, at most ``max_requeues`` times. The shell's own trap is the proof of the signal:
    speedbench exits 130 once its handler is installed, but is simply killed (143) when
    the signal comes during its start-up, and both must requeue."""
    if not spec.requeue:
        return ""
    cap = spec.max_requeues
    return (
        'if [ "$rc" != 0 ] && { [ -n "$signalled" ] || [ "$rc" = 130 ]; } '
        f'&& [ ! -e "$RUN/{DIR}/{CANCELLED}" ]; then\n'
        "  restarts=${SLURM_RESTART_COUNT:-0}\n"
        f'  if [ "$restarts" -lt {cap} ]; then\n'
        f'    echo "speedbench: stopped before the time limit; requeueing job $SLURM_JOB_ID'
        f' (requeue $((restarts + 1)) of {cap})"\n'
        '    scontrol requeue "$SLURM_JOB_ID"\n'
        "  else\n"
        # status reads this marker: the job failed because it may not requeue again
        f'    echo "$restarts" > "$RUN/{DIR}/$SLURM_JOB_ID.{REQUEUE_CAP}"\n'
        f'    echo "speedbench: stopped before the time limit after {cap} requeues (max_requeues); not requeueing"\n'
        "  fi\n"
        "fi\n"
    )


def arm_script(sc: Scenario, run_path: Path | str, arm: str, *, cwd: Path, skip_doctor: bool = False) -> str:
    spec = sc.executor.slurm
    cmd = (_launcher(spec, cwd) + shlex.join([*speedbench_argv(spec), "job"]) + ' "$RUN" '
           + shlex.join(["--arm", arm] + (["--skip-doctor"] if skip_doctor else [])))
    return (
        _script_head(sc, run_path, what=f"arm {arm}", job=arm, cwd=cwd, arm_job=True)
        + "# speedbench runs in the background so that this shell can pass on Slurm's SIGTERM\n"
        f"{cmd} &\n"
        "pid=$!\n"
        "signalled=\n"
        "trap 'signalled=1; kill -TERM \"$pid\" 2>/dev/null' TERM INT\n"
        'wait "$pid"; rc=$?\n'
        'while kill -0 "$pid" 2>/dev/null; do wait "$pid"; rc=$?; done\n'
        'echo "$rc" > "$RUN/slurm/$SLURM_JOB_ID.exit"\n'
        + _requeue_lines(spec)
        + 'exit "$rc"\n'
    )


def gather_script(sc: Scenario, run_path: Path | str, *, cwd: Path) -> str:
    spec = sc.executor.slurm
    cmd = " ".join(shlex.quote(w) for w in [*speedbench_argv(spec), "gather"]) + ' "$RUN"'
    return _script_head(sc, run_path, what="gather", job="gather", cwd=cwd,
                        arm_job=False) + f"{_launcher(spec, cwd)}{cmd}\n"


def follow_up_script(spec: SlurmSpec, *, name: str, what: str, folder: Path, cwd: Path, words: list[str]) -> str:
    """A one-CPU job that runs ``speedbench WORDS`` once the runs it follows have ended
    (the matrix's promote and dashboard jobs); its output goes to FOLDER/slurm-NAME-<id>.out."""
    head = [f"--job-name=sb-{name}", f"--output={folder}/slurm-{name}-%j.out", f"--chdir={cwd}",
            "--nodes=1", "--ntasks=1", "--cpus-per-task=1", *_account(spec)]
    return (f"#!/bin/bash\n# speedbench: {what} (generated; docs/slurm.md)\n"
            + "".join(f"#SBATCH {h}\n" for h in head)
            + "".join(f"{ln}\n" for ln in spec.setup)
            + shlex.join([*speedbench_argv(spec), *words]) + "\n")
