"""The Slurm executor: one batch job per arm, a dependent gather, status and cancel.

The scripts are plain, readable sbatch files written into ``RUN/slurm/`` before they are
submitted, so what ran can always be read back (``--dry-run`` prints the same text).
Each arm's job runs ``speedbench job RUN --arm ARM``: it starts that arm's server on the
devices Slurm gave the job, measures every point not yet finished, and writes only its
own ``records-<jobid>.jsonl`` / ``points-<jobid>.json``. The gather job
(``--dependency=afterany``) runs ``speedbench gather RUN`` once every arm job has ended.

Faults: ``--signal=B:TERM@N`` makes the batch shell forward SIGTERM to speedbench N
seconds before the time limit; speedbench marks the running point interrupted, saves,
and exits 130, and the script then requeues its own job (same job id, same files),
which resumes from the finished points. ``speedbench cancel`` leaves a marker first, so
a cancelled job is not requeued.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from speedbench.errors import ServerError, UsageError
from speedbench.executors.base import ArmJob, Executor
from speedbench.executors.base import speedbench_argv as _speedbench_argv
from speedbench.run.plan import build_plan
from speedbench.results import RunDir, atomic_write
from speedbench.results.files import ensure_dir
from speedbench.scenario import Scenario, SlurmSpec, resolved_dict, validate_data

# Slurm's words for a job that is queued or running (scontrol's JobState)
ACTIVE_STATES = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
                 "REQUEUE_FED", "RESIZING", "SUSPENDED", "STAGE_OUT", "SIGNALING")

DIR = "slurm"  # inside the run folder: scripts, jobs.json, job output, exit codes
JOBS = "jobs.json"
CANCELLED = "cancelled"  # marker: `speedbench cancel` ran; jobs must not requeue
REQUEUE_CAP = "requeue-cap"  # <jobid>.requeue-cap: the job stopped at max_requeues (holds the count)


def speedbench_argv(spec: SlurmSpec) -> list[str]:
    return _speedbench_argv(spec.speedbench)


def _header(spec: SlurmSpec, *, name: str, output: str, cwd: Path, arm_job: bool) -> list[str]:
    lines = [f"--job-name={name}", f"--output={output}", "--open-mode=append", f"--chdir={cwd}",
             "--nodes=1", "--ntasks=1"]
    for flag, value in (("partition", spec.partition), ("account", spec.account), ("qos", spec.qos)):
        if value:
            lines.append(f"--{flag}={value}")
    if arm_job:
        sizes: tuple[tuple[str, str | int | None], ...] = (
            ("time", spec.time), ("gpus-per-node", spec.gpus_per_node), ("gpus-per-task", spec.gpus_per_task),
            ("gres", spec.gres), ("cpus-per-task", spec.cpus_per_task), ("mem", spec.mem),
            ("constraint", spec.constraint))
        for flag, size in sizes:
            if size is not None and size != "":
                lines.append(f"--{flag}={size}")
        if spec.signal_before_s:
            lines.append(f"--signal=B:TERM@{spec.signal_before_s}")
        lines.append("--requeue" if spec.requeue else "--no-requeue")
    else:
        lines.append("--cpus-per-task=1")  # the gather reads files; it needs no GPU
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


# ---- the Slurm commands --------------------------------------------------------------

Runner = Callable[..., subprocess.CompletedProcess]


class Slurm:
    """sbatch / scontrol / scancel. ``runner`` is subprocess.run, or a fake in unit tests."""

    def __init__(self, runner: Runner = subprocess.run, env: dict[str, str] | None = None):
        self.runner, self.env = runner, env

    def _run(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        try:
            out = self.runner(argv, capture_output=True, text=True, timeout=60,
                              env={**os.environ, **self.env} if self.env else None)
        except FileNotFoundError:
            raise UsageError(f"{argv[0]} not found: the slurm executor needs the Slurm client commands") from None
        if check and out.returncode != 0:
            raise ServerError(f"{shlex.join(argv)} failed ({out.returncode}): {(out.stderr or out.stdout).strip()}")
        return out

    def sbatch(self, script: Path, dependency: str | None = None) -> str:
        argv = ["sbatch", "--parsable"] + ([f"--dependency={dependency}"] if dependency else []) + [str(script)]
        return self._run(argv).stdout.strip().split(";")[0]

    def show(self, job_id: str) -> dict[str, str] | None:
        """``scontrol show job -o`` as a dict; None once the controller has forgotten the job."""
        out = self._run(["scontrol", "show", "job", "-o", job_id], check=False)
        if out.returncode != 0 or not out.stdout.strip():
            return None
        fields: dict[str, str] = {}
        for word in out.stdout.split():
            k, sep, v = word.partition("=")
            if sep and k not in fields:
                fields[k] = v
        return fields

    def accounting(self, job_id: str) -> dict[str, str] | str:
        """sacct's record of a job that slurmctld has forgotten, or a phrase saying why
        there is none (accounting not configured, sacct missing, no record)."""
        argv = ["sacct", "--jobs", job_id, "--allocations", "--noheader", "--parsable2",
                "--format=" + ",".join(SACCT_FIELDS)]
        try:
            out = self._run(argv, check=False)
        except UsageError:
            return "sacct is not installed"
        if out.returncode != 0:
            msg = " ".join((out.stderr or out.stdout).split()) or f"exit {out.returncode}"
            if "disabled" in msg.lower():  # AccountingStorageType=accounting_storage/none
                return f"accounting is not configured (sacct: {msg})"
            return f"sacct failed ({msg})"
        return parse_sacct(out.stdout, job_id) or "sacct has no record of it"

    def cancel(self, job_ids: list[str]) -> None:
        if job_ids:
            self._run(["scancel", *job_ids], check=False)


SACCT_FIELDS = ("JobID", "State", "ExitCode", "NodeList")


def parse_sacct(text: str, job_id: str) -> dict[str, str] | None:
    """``sacct --parsable2 --noheader`` rows -> the job's own row (not its steps,
    ``<id>.batch`` / ``<id>.0``), or None. With a requeued job sacct lists the latest
    attempt last, so the last matching row wins. "CANCELLED by 0" becomes CANCELLED."""
    row = None
    for line in text.splitlines():
        cells = line.strip().split("|")
        if len(cells) >= len(SACCT_FIELDS) and cells[0] == job_id:
            row = dict(zip(SACCT_FIELDS, cells))
    if row is not None:
        row["State"] = (row["State"].split() or ["UNKNOWN"])[0]
    return row


# ---- the run folder's job list -------------------------------------------------------


def load_jobs(run_path: Path) -> dict[str, Any]:
    p = Path(run_path) / DIR / JOBS
    if not p.exists():
        raise UsageError(f"{run_path} was not submitted to Slurm ({DIR}/{JOBS} is missing)")
    return json.loads(p.read_text(encoding="utf-8"))


def _save_jobs(run_path: Path, jobs: dict[str, Any]) -> None:
    atomic_write(Path(run_path) / DIR / JOBS, json.dumps(jobs, indent=2) + "\n")


def submit(sc: Scenario, run_dir: Any, *, arms: list[str] | None = None, skip_doctor: bool = False,
           slurm: Slurm | None = None, cwd: Path | None = None) -> dict[str, Any]:
    """Write and submit one script per arm (``arms``: only these) and the gather. Returns
    the updated jobs.json content."""
    slurm = slurm or Slurm()
    cwd = (cwd or Path.cwd()).resolve()
    run_path = Path(run_dir.path).resolve()
    folder = run_path / DIR
    ensure_dir(folder)
    (folder / CANCELLED).unlink(missing_ok=True)
    try:
        jobs = load_jobs(run_path)
    except UsageError:
        jobs = {"executor": "slurm", "arms": {}, "gather": [], "submissions": []}
    ids = []
    for arm in arms if arms is not None else [a.name for a in sc.arms]:
        script = folder / f"{arm}.sbatch"
        atomic_write(script, arm_script(sc, run_path, arm, cwd=cwd, skip_doctor=skip_doctor))
        job_id = slurm.sbatch(script)
        jobs["arms"].setdefault(arm, []).append(job_id)
        ids.append(job_id)
        _save_jobs(run_path, jobs)  # after every sbatch: a failure later still leaves a cancellable list
    script = folder / "gather.sbatch"
    atomic_write(script, gather_script(sc, run_path, cwd=cwd))
    jobs["gather"].append(slurm.sbatch(script, dependency="afterany:" + ":".join(ids) if ids else None))
    jobs["submissions"].append({"utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                                "arms": ids, "gather": jobs["gather"][-1]})
    _save_jobs(run_path, jobs)
    return jobs


def _exit_code(run_path: Path, job_id: str) -> str | None:
    p = run_path / DIR / f"{job_id}.exit"
    return p.read_text().strip() if p.exists() else None


def requeue_cap_message(run_path: Path, job_id: str) -> str | None:
    """Why the job failed, when it stopped at ``max_requeues`` (the job script leaves the
    marker), with how to go on; None otherwise."""
    p = run_path / DIR / f"{job_id}.{REQUEUE_CAP}"
    if not p.exists():
        return None
    n = p.read_text().strip() or "?"
    # the signal is the time limit's, or a preemption's; the script cannot tell them apart
    return (f"requeue cap reached: stopped by the time limit or preemption after {n} "
            f"requeue{'' if n == '1' else 's'} (max_requeues={n}); "
            f"resume with: speedbench run --resume {run_path} (raise executor.slurm.time or max_requeues "
            "in its scenario.resolved.yaml first if the arm needs longer)")


def _forgotten(run_path: Path, arm: str, job_id: str, slurm: Slurm) -> ArmJob:
    """A job that slurmctld no longer knows (MinJobAge): sacct's record, else the exit
    code that the job script wrote, with why sacct could not say."""
    rc = _exit_code(run_path, job_id)
    speedbench_rc = f" (speedbench exit {rc})" if rc else ""
    acct = slurm.accounting(job_id)
    if isinstance(acct, dict):
        node = acct.get("NodeList", "")
        return ArmJob(arm=arm, job_id=job_id, state=acct["State"], node="" if node in ("None assigned", "") else node,
                      reason=f"exit {acct.get('ExitCode', '?')}{speedbench_rc}, from sacct",
                      active=acct["State"] in ACTIVE_STATES)
    state = "UNKNOWN" if rc is None else ("COMPLETED" if rc == "0" else "FAILED")
    return ArmJob(arm=arm, job_id=job_id, state=state,
                  reason=(f"exit {rc}; " if rc else "") + f"slurmctld no longer knows the job and {acct}")


def arm_jobs(run_dir: Any, sc: Scenario, slurm: Slurm | None = None) -> list[ArmJob]:
    """Each arm's latest job with its state and point progress."""
    slurm = slurm or Slurm()
    run_path = Path(run_dir.path)
    jobs = load_jobs(run_path)
    rounds = run_dir.finished_rounds()
    plan = build_plan(sc)
    out = []
    for arm, ids in jobs["arms"].items():
        keys = plan.points(arm) if arm in {a.name for a in sc.arms} else []
        done = len(keys) - len(plan.unfinished(rounds, arm)) if keys else 0
        job_id = ids[-1]
        info = slurm.show(job_id)
        if info is None:
            job = _forgotten(run_path, arm, job_id, slurm)
        else:
            rc = _exit_code(run_path, job_id)
            state = info.get("JobState", "UNKNOWN")
            reason = info.get("Reason", "")
            if state not in ACTIVE_STATES:
                reason = f"exit {info.get('ExitCode', '?')}" + (f" (speedbench exit {rc})" if rc else "")
            node = info.get("NodeList", "") if info.get("NodeList") != "(null)" else ""
            job = ArmJob(arm=arm, job_id=job_id, state=state, node=node, reason="" if reason == "None" else reason,
                         active=state in ACTIVE_STATES)
        job.points_done, job.points_total = done, len(keys)
        capped = requeue_cap_message(run_path, job_id)
        if capped and job.state not in ACTIVE_STATES:
            job.reason = f"{job.reason}; {capped}" if job.reason else capped
        out.append(job)
    return out


def gather_job(run_dir: Any, slurm: Slurm | None = None) -> tuple[str, str] | None:
    jobs = load_jobs(Path(run_dir.path))
    if not jobs.get("gather"):
        return None
    job_id = jobs["gather"][-1]
    slurm = slurm or Slurm()
    info = slurm.show(job_id)
    if info is None:
        acct = slurm.accounting(job_id)
        return job_id, acct["State"] if isinstance(acct, dict) else f"UNKNOWN ({acct})"
    return job_id, info.get("JobState", "UNKNOWN")


def cancel(run_dir: Any, slurm: Slurm | None = None, wait_s: float = 120) -> list[str]:
    """Cancel every job of the run and wait until none is left in the queue; returns the
    job ids that were still active."""
    slurm = slurm or Slurm()
    run_path = Path(run_dir.path)
    jobs = load_jobs(run_path)
    atomic_write(run_path / DIR / CANCELLED, _dt.datetime.now(_dt.timezone.utc).isoformat() + "\n")
    every = [i for ids in jobs["arms"].values() for i in ids] + list(jobs.get("gather") or [])
    active = [i for i in every if (slurm.show(i) or {}).get("JobState", "") in ACTIVE_STATES]
    slurm.cancel(active)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not any((slurm.show(i) or {}).get("JobState", "") in ACTIVE_STATES for i in active):
            return active
        time.sleep(0.5)
    raise ServerError(f"jobs {active} were cancelled but are still in the queue after {wait_s:.0f} s")


# ---- the executor --------------------------------------------------------------------


def _print_jobs(jobs: dict, run_path: Path, console: Console) -> None:
    sub = jobs["submissions"][-1]
    console.print(f"submitted {len(sub['arms'])} arm jobs ({' '.join(sub['arms'])}) and gather job {sub['gather']}")
    console.print(f"  speedbench status {run_path}    speedbench cancel {run_path}", markup=False, soft_wrap=True)


class SlurmExecutor(Executor):
    """One sbatch job per arm and an afterany gather (``executor.kind: slurm``)."""

    kind = "slurm"

    def __init__(self, slurm: Slurm | None = None):
        self.slurm = slurm

    def plan(self, sc: Scenario, output_root: Path, console: Console, *, skip_doctor: bool = False) -> None:
        """The exact batch scripts, as ``submit`` would write them."""
        run_path = Path(output_root).resolve() / sc.name / "<run id>"
        cwd = Path.cwd()
        console.print("\n[bold]batch scripts[/bold] (written to the run folder's slurm/ and submitted with sbatch; "
                      "the gather with --dependency=afterany:<every arm job>)")
        for a in sc.arms:
            console.print(f"\n# ---- {a.name}.sbatch", markup=False)
            console.print(arm_script(sc, run_path, a.name, cwd=cwd, skip_doctor=skip_doctor),
                          markup=False, highlight=False, soft_wrap=True, end="")
        console.print("\n# ---- gather.sbatch", markup=False)
        console.print(gather_script(sc, run_path, cwd=cwd), markup=False, highlight=False, soft_wrap=True, end="")

    def submit(self, sc: Scenario, output_root: Path, console: Console, *, overrides: list[str],
               skip_doctor: bool = False) -> int:
        run_dir = RunDir.create(Path(output_root), sc.name)
        run_dir.write_scenario(resolved_dict(sc), overrides)
        console.print(f"run folder: {run_dir.path}", markup=False, soft_wrap=True)
        _print_jobs(submit(sc, run_dir, skip_doctor=skip_doctor, slurm=self.slurm), run_dir.path, console)
        return 0

    def resume(self, run_path: Path, console: Console, *, overrides: list[str], skip_doctor: bool = False) -> int:
        """Submit again the arms whose points are not all finished, and a new gather."""
        if overrides:
            raise UsageError("--set does not go with resuming a Slurm run: the jobs read the saved scenario")
        run_dir = RunDir.open(run_path)
        sc = validate_data(run_dir.load_scenario(), str(run_dir.scenario_path))
        busy = [j for j in arm_jobs(run_dir, sc, self.slurm) if not j.died and j.points_done < j.points_total]
        if busy:
            raise UsageError(f"jobs still queued or running: "
                             f"{', '.join(f'{j.arm}={j.job_id} {j.state}' for j in busy)}; "
                             f"wait, or `speedbench cancel {run_path}` first")
        done = run_dir.finished_points()
        plan, rounds = build_plan(sc), run_dir.finished_rounds()
        todo = [a.name for a in sc.arms if plan.unfinished(rounds, a.name)]
        console.print(f"resuming {run_dir.path}: {len(done)} finished points are kept; arms to run: "
                      f"{', '.join(todo) or 'none'}",
                      markup=False, soft_wrap=True)
        _print_jobs(submit(sc, run_dir, arms=todo, skip_doctor=skip_doctor, slurm=self.slurm), run_dir.path, console)
        return 0

    def status(self, run_dir: Any, sc: Scenario) -> list[ArmJob]:
        return arm_jobs(run_dir, sc, self.slurm)

    def gather(self, run_dir: Any) -> tuple[str, str] | None:
        return gather_job(run_dir, self.slurm)

    def cancel(self, run_dir: Any, wait_s: float = 120) -> list[str]:
        return cancel(run_dir, self.slurm, wait_s=wait_s)

    def submit_jobs(self, sc: Scenario, run_dir: Any, *, cwd: Path, skip_doctor: bool = False) -> tuple[list[str], str]:
        self.slurm = self.slurm or Slurm()  # one Slurm for the whole matrix
        jobs = submit(sc, run_dir, skip_doctor=skip_doctor, slurm=self.slurm, cwd=cwd)
        return jobs["submissions"][-1]["arms"], jobs["gather"][-1]

    def submit_after(self, script: Path, after: list[str]) -> str:
        self.slurm = self.slurm or Slurm()
        return self.slurm.sbatch(script, dependency="afterany:" + ":".join(after) if after else None)
