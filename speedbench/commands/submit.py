"""``speedbench submit MATRIX.yaml``: a nightly matrix, one run folder per cell, one dashboard."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console


def register(sub) -> None:
    p = sub.add_parser(
        "submit", help="submit a matrix of scenarios x draft checkpoints x overrides, then rebuild the dashboard",
        description="Cross the matrix file's scenarios, checkpoints and override sets into one run folder per "
        "cell under its results root, submit every cell's arm jobs and gather to Slurm, and a last job that "
        "rebuilds the dashboard once all gathers have ended. --executor local runs the cells here, one after "
        "another, then builds the dashboard. See docs/slurm.md. Exit 0 submitted (or, locally, all cells ok).",
    )
    p.add_argument("matrix", help="matrix YAML")
    p.add_argument("--executor", choices=("slurm", "local"), default="slurm")
    p.add_argument("--dry-run", action="store_true", help="list the cells and print the dashboard job; submit nothing")
    p.add_argument("--skip-doctor", action="store_true", help="the jobs skip the pre-flight checks")
    p.set_defaults(func=run)


def run(args) -> int:
    from speedbench.executors.matrix import cells, dashboard_script, load_matrix
    from speedbench.results import RunDir, atomic_write
    from speedbench.scenario import resolved_dict

    console = Console(highlight=False)
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
        from speedbench.commands.dashboard import run as dashboard
        from speedbench.run import new_run

        codes = [new_run(c.scenario.model_copy(
                             update={"executor": c.scenario.executor.model_copy(update={"kind": "local"})}),
                         root, overrides=c.overrides, skip_doctor=args.skip_doctor, console=console)
                 for c in all_cells]
        dashboard(type("A", (), {"results_dir": str(root), "output": str(site)})())
        return max(codes)

    from speedbench.executors.slurm import Slurm, submit

    slurm = Slurm()
    record = []
    for c in all_cells:
        sc = c.scenario.model_copy(update={"executor": c.scenario.executor.model_copy(update={"kind": "slurm"})})
        rd = RunDir.create(root, sc.name)
        rd.write_scenario(resolved_dict(sc), c.overrides)
        jobs = submit(sc, rd, skip_doctor=args.skip_doctor, slurm=slurm, cwd=cwd)
        record.append({"scenario": sc.name, "checkpoint": c.checkpoint, "override": c.override,
                       "run": str(rd.path), "arm_jobs": jobs["submissions"][-1]["arms"],
                       "gather": jobs["gather"][-1]})
        console.print(f"  {c.label}: {rd.path} jobs {' '.join(record[-1]['arm_jobs'])} gather {record[-1]['gather']}",
                      markup=False, soft_wrap=True)
    script = root / f"dashboard-{record[0]['gather']}.sbatch"
    atomic_write(script, dashboard_script(all_cells[0].scenario, root, site, cwd=cwd))
    dash = slurm.sbatch(script, dependency="afterany:" + ":".join(r["gather"] for r in record))
    atomic_write(root / f"matrix-{dash}.json", json.dumps({"matrix": str(Path(args.matrix).resolve()),
                                                          "cells": record, "dashboard_job": dash,
                                                          "site": str(site)}, indent=2) + "\n")
    console.print(f"dashboard job {dash} -> {site}/index.html", markup=False, soft_wrap=True)
    return 0
