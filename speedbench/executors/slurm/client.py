"""The Slurm commands speedbench calls: sbatch, scontrol, sacct and scancel."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable

from speedbench.errors import ServerError, UsageError

Runner = Callable[..., subprocess.CompletedProcess]

SACCT_FIELDS = ("JobID", "State", "ExitCode", "NodeList")


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

    def sbatch(self, script, after: list[str] | None = None) -> str:
        """Submit ``script``; with ``after``, it starts once every one of those jobs has ended."""
        argv = ["sbatch", "--parsable"] + ([f"--dependency=afterany:{':'.join(after)}"] if after else [])
        return self._run([*argv, str(script)]).stdout.strip().split(";")[0]

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
