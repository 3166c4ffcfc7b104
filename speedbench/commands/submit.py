"""``speedbench submit MATRIX.yaml``: a nightly matrix, one run folder per cell, one dashboard."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from speedbench.commands.dashboard import run as dashboard
from speedbench.errors import UsageError
from speedbench.executors.base import Executor, Step, Submission
from speedbench.executors.kinds import EXECUTORS, executor_for
from speedbench.executors.matrix import Cell, cells, load_matrix, promote_rule, promoted_cells, screening
from speedbench.results import atomic_write
from speedbench.scenario import Scenario


def register(sub) -> None:
    p = sub.add_parser(
        "submit", help="submit a matrix of scenarios x draft checkpoints x overrides, then rebuild the dashboard",
        description="Cross the matrix file's scenarios, checkpoints and override sets into one run folder per "
        "cell under its results root, submit every cell's arm jobs and gather to Slurm, and a last job that "
        "rebuilds the dashboard once all gathers have ended. --executor local runs the cells here, one after "
        "another, then builds the dashboard. Screening cells (load.mode: screen) with a promote rule: the "
        "promoted cells run again in full before the dashboard. See docs/slurm.md. Exit 0 submitted (or, "
        "locally, all cells ok).",
    )
    p.add_argument("matrix", nargs="?", help="matrix YAML")
    p.add_argument("--executor", choices=tuple(reversed(EXECUTORS)), default="slurm")  # {slurm,local}, as ever
    p.add_argument("--dry-run", action="store_true", help="list the cells and print the dashboard job; submit nothing")
    p.add_argument("--skip-doctor", action="store_true", help="the jobs skip the pre-flight checks")
    p.add_argument("--promote-from", metavar="RECORD",
                   help="(the promote job) submit the promoted cells of this screening matrix record, then the "
                        "dashboard")
    p.set_defaults(func=run)


def _submit_cells(cells: list[Cell], root: Path, executor: Executor, args,
                  console: Console) -> list[tuple[Cell, Submission]]:
    """Each cell as a run of its own under ``root``, through ``executor``."""
    out = []
    for c in cells:
        sc = c.scenario.model_copy(update={"executor": c.scenario.executor.model_copy(update={"kind": executor.kind})})
        sub = executor.submit(sc, root, console, overrides=c.overrides, skip_doctor=args.skip_doctor)
        jobs = f" jobs {' '.join(sub.jobs)} gather {sub.last_job}" if sub.last_job else ""
        console.print(f"  {c.label}: {sub.run}{jobs}", markup=False, soft_wrap=True)
        out.append((c, sub))
    return out


def _cell_records(subs: list[tuple[Cell, Submission]]) -> list[dict[str, Any]]:
    """The matrix record's ``cells`` (or ``promoted``): each cell's run folder and jobs."""
    return [{"scenario": c.scenario.name, "checkpoint": c.checkpoint, "override": c.override,
             "run": str(s.run) if s.run else None, "arm_jobs": list(s.jobs), "gather": s.last_job}
            for c, s in subs]


def _dashboard_step(sc: Scenario, root: Path, site: Path, tag: str) -> Step:
    return Step("dashboard", "nightly matrix dashboard", sc, root / f"dashboard-{tag}.sbatch",
                ["dashboard", str(root), "-o", str(site)],
                here=lambda: dashboard(argparse.Namespace(results_dir=str(root), output=str(site))))


def _dashboard(executor: Executor, sc: Scenario, root: Path, site: Path, tag: str, after: list[Submission],
               console: Console) -> str | None:
    """Rebuild the dashboard once every run in ``after`` has ended; its job id (None: built here)."""
    dash = executor.follow_up(_dashboard_step(sc, root, site, tag), after, console)
    console.print(f"dashboard{f' job {dash.last_job}' if dash.last_job else ''} -> {site}/index.html",
                  markup=False, soft_wrap=True)
    return dash.last_job


def _promote_from(record_path: Path, args, console: Console) -> int:
    """The promote step: every screening cell has ended; submit the promoted ones in full,
    then the dashboard after them. The record names the executor (older ones: Slurm's)."""
    rec = json.loads(record_path.read_text(encoding="utf-8"))
    m = load_matrix(rec["matrix"])
    all_cells = cells(m, Path(rec["matrix"]).parent)
    runs = [(c, Path(r["run"])) for c, r in zip(all_cells, rec["cells"], strict=True) if r["run"]]
    full = promoted_cells(m, runs)
    console.print(f"promoted to a full run: {[c.label for c in full] or 'none'}", markup=False, soft_wrap=True)
    executor, root = executor_for(rec.get("executor", "slurm")), Path(rec["root"])
    promoted = _submit_cells(full, root, executor, args, console)
    dash = _dashboard(executor, all_cells[0].scenario, root, Path(rec["site"]), rec.get("promote_job", "promoted"),
                      [s for _, s in promoted], console)
    atomic_write(record_path, json.dumps({**rec, "promoted": _cell_records(promoted), "dashboard_job": dash},
                                         indent=2) + "\n")
    return max((s.code for _, s in promoted), default=0)


def _promote(executor: Executor, m, all_cells: list[Cell], subs: list[tuple[Cell, Submission]], meta: dict,
             tag: str, args, console: Console) -> int:
    """A screening matrix: the promote step follows every cell (``_promote_from`` on its record)."""
    root = Path(meta["root"])
    path = root / f"matrix-{tag}.json"
    atomic_write(path, json.dumps(meta, indent=2) + "\n")
    words = ["submit", "--promote-from", str(path)] + (["--skip-doctor"] if args.skip_doctor else [])
    step = Step("promote", "promote screened checkpoints to full runs", all_cells[0].scenario,
                root / f"promote-{tag}.sbatch", words, here=lambda: _promote_from(path, args, console))
    job = executor.follow_up(step, [s for _, s in subs], console)
    if job.last_job:  # read back: a promote step run here has already added its promoted cells
        rec = json.loads(path.read_text(encoding="utf-8"))
        atomic_write(path, json.dumps({**rec, "promote_job": job.last_job}, indent=2) + "\n")
        console.print(f"promote job {job.last_job}: submits the promoted cells' full runs, then the dashboard",
                      markup=False, soft_wrap=True)
    return job.code


def run(args) -> int:
    console = Console(highlight=False)
    if args.promote_from:
        return _promote_from(Path(args.promote_from), args, console)
    if not args.matrix:
        raise UsageError("submit needs a matrix file (or --promote-from RECORD)")
    m = load_matrix(args.matrix)
    all_cells = cells(m, Path(args.matrix).parent)
    root, site, cwd = Path(m.results).resolve(), m.site.resolve(), Path.cwd().resolve()
    executor = executor_for(args.executor)
    console.print(f"matrix {args.matrix}: {len(all_cells)} cells -> {root}", markup=False, soft_wrap=True)
    for c in all_cells:
        console.print(f"  {c.label}: {' '.join(c.overrides) or '(no overrides)'}", markup=False, soft_wrap=True)
    if args.dry_run:
        executor.plan_follow_up(_dashboard_step(all_cells[0].scenario, root, site, "dry-run"), console)
        return 0
    subs = _submit_cells(all_cells, root, executor, args, console)
    first = subs[0][1]
    tag = first.last_job or (first.run.name if first.run else "matrix")  # a gather's job id, else a run id
    meta = {"matrix": str(Path(args.matrix).resolve()), "executor": executor.kind, "cells": _cell_records(subs),
            "site": str(site), "root": str(root), "cwd": str(cwd)}
    code = max(s.code for _, s in subs)
    if screening(all_cells) and promote_rule(m, all_cells):
        return max(code, _promote(executor, m, all_cells, subs, meta, tag, args, console))
    dash = _dashboard(executor, all_cells[0].scenario, root, site, tag, [s for _, s in subs], console)
    atomic_write(root / f"matrix-{dash or tag}.json", json.dumps({**meta, "dashboard_job": dash}, indent=2) + "\n")
    return code
