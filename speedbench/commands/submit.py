"""``speedbench submit MATRIX.yaml``: a nightly matrix, one run folder per cell, one dashboard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from speedbench.commands.dashboard import run as dashboard
from speedbench.errors import UsageError
from speedbench.executors.base import Executor
from speedbench.executors.kinds import executor_for
from speedbench.executors.matrix import (cells, dashboard_script, load_matrix, promote_rule, promote_script,
                                         promoted_cells, screening)
from speedbench.results import RunDir, atomic_write
from speedbench.scenario import resolved_dict


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
    p.add_argument("--executor", choices=("slurm", "local"), default="slurm")
    p.add_argument("--dry-run", action="store_true", help="list the cells and print the dashboard job; submit nothing")
    p.add_argument("--skip-doctor", action="store_true", help="the jobs skip the pre-flight checks")
    p.add_argument("--promote-from", metavar="RECORD",
                   help="(the promote job) submit the promoted cells of this screening matrix record, then the "
                        "dashboard")
    p.set_defaults(func=run)


def _local(m, all_cells, root: Path, site: Path, args, console: Console) -> int:
    local = executor_for("local")

    def run_cell(c) -> tuple[int, Path | None]:
        sc = c.scenario.model_copy(update={"executor": c.scenario.executor.model_copy(update={"kind": "local"})})
        before = set((root / sc.name).glob("*")) if (root / sc.name).is_dir() else set()
        code = local.submit(sc, root, console, overrides=c.overrides, skip_doctor=args.skip_doctor)
        made = sorted(set((root / sc.name).glob("*")) - before) if (root / sc.name).is_dir() else []
        return code, (made[-1] if made else None)

    done = [(c, *run_cell(c)) for c in all_cells]
    codes = [code for _, code, _ in done]
    if screening(all_cells) and promote_rule(m, all_cells):
        full = promoted_cells(m, [(c, path) for c, _, path in done if path is not None])
        console.print(f"promoted to a full run: {[c.label for c in full] or 'none'}", markup=False, soft_wrap=True)
        codes += [run_cell(c)[0] for c in full]
    dashboard(type("A", (), {"results_dir": str(root), "output": str(site)})())
    return max(codes)


def _submit_cells(cells, root: Path, executor: Executor, args, cwd: Path, console: Console) -> list[dict[str, Any]]:
    record = []
    for c in cells:
        sc = c.scenario.model_copy(update={"executor": c.scenario.executor.model_copy(update={"kind": "slurm"})})
        rd = RunDir.create(root, sc.name)
        rd.write_scenario(resolved_dict(sc), c.overrides)
        arm_jobs, gather = executor.submit_jobs(sc, rd, cwd=cwd, skip_doctor=args.skip_doctor)
        record.append({"scenario": sc.name, "checkpoint": c.checkpoint, "override": c.override,
                       "run": str(rd.path), "arm_jobs": arm_jobs, "gather": gather})
        console.print(f"  {c.label}: {rd.path} jobs {' '.join(record[-1]['arm_jobs'])} gather {record[-1]['gather']}",
                      markup=False, soft_wrap=True)
    return record


def _dashboard_job(sc, root: Path, site: Path, cwd: Path, executor: Executor, after: list[str], tag: str) -> str:
    script = root / f"dashboard-{tag}.sbatch"
    atomic_write(script, dashboard_script(sc, root, site, cwd=cwd))
    return executor.submit_after(script, after)


def _promote_from(record_path: Path, args, console: Console) -> int:
    """The promote job: every screening cell is gathered; submit the promoted ones in full."""
    rec = json.loads(record_path.read_text(encoding="utf-8"))
    m = load_matrix(rec["matrix"])
    all_cells = cells(m, Path(rec["matrix"]).parent)
    runs = [(c, Path(r["run"])) for c, r in zip(all_cells, rec["cells"], strict=True)]
    full = promoted_cells(m, runs)
    console.print(f"promoted to a full run: {[c.label for c in full] or 'none'}", markup=False, soft_wrap=True)
    executor, cwd, root = executor_for("slurm"), Path(rec["cwd"]), Path(rec["root"])
    promoted = _submit_cells(full, root, executor, args, cwd, console)
    dash = _dashboard_job(all_cells[0].scenario, root, Path(rec["site"]), cwd, executor,
                          [r["gather"] for r in promoted], rec.get("promote_job", "promoted"))
    atomic_write(record_path, json.dumps({**rec, "promoted": promoted, "dashboard_job": dash}, indent=2) + "\n")
    console.print(f"dashboard job {dash} -> {rec['site']}/index.html", markup=False, soft_wrap=True)
    return 0


def run(args) -> int:
    console = Console(highlight=False)
    if args.promote_from:
        return _promote_from(Path(args.promote_from), args, console)
    if not args.matrix:
        raise UsageError("submit needs a matrix file (or --promote-from RECORD)")
    m = load_matrix(args.matrix)
    all_cells = cells(m, Path(args.matrix).parent)
    root, site, cwd = Path(m.results).resolve(), m.site.resolve(), Path.cwd().resolve()
    console.print(f"matrix {args.matrix}: {len(all_cells)} cells -> {root}", markup=False, soft_wrap=True)
    for c in all_cells:
        console.print(f"  {c.label}: {' '.join(c.overrides) or '(no overrides)'}", markup=False, soft_wrap=True)
    if args.dry_run:
        console.print(dashboard_script(all_cells[0].scenario, root, site, cwd=cwd), markup=False, soft_wrap=True)
        return 0
    if args.executor == "local":
        return _local(m, all_cells, root, site, args, console)

    executor = executor_for("slurm")
    record = _submit_cells(all_cells, root, executor, args, cwd, console)
    gathers = [r["gather"] for r in record]
    meta = {"matrix": str(Path(args.matrix).resolve()), "cells": record, "site": str(site), "root": str(root),
            "cwd": str(cwd)}
    if screening(all_cells) and promote_rule(m, all_cells):
        path = root / f"matrix-{gathers[0]}.json"
        atomic_write(path, json.dumps(meta, indent=2) + "\n")
        script = root / f"promote-{gathers[0]}.sbatch"
        atomic_write(script, promote_script(all_cells[0].scenario, path, cwd=cwd, skip_doctor=args.skip_doctor))
        job = executor.submit_after(script, gathers)
        atomic_write(path, json.dumps({**meta, "promote_job": job}, indent=2) + "\n")
        console.print(f"promote job {job}: submits the promoted cells' full runs, then the dashboard",
                      markup=False, soft_wrap=True)
        return 0
    dash = _dashboard_job(all_cells[0].scenario, root, site, cwd, executor, gathers, gathers[0])
    atomic_write(root / f"matrix-{dash}.json", json.dumps({**meta, "dashboard_job": dash}, indent=2) + "\n")
    console.print(f"dashboard job {dash} -> {site}/index.html", markup=False, soft_wrap=True)
    return 0
