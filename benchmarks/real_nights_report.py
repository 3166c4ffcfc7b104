"""benchmarks/real_nights.py's read-back: what the nights say, as docs/dashboard.md's "Real
nights" section reports it. Reads only the results folder, through speedbench's own
readers (the same ones `compare --checkpoints`, `changes` and `dashboard` use)."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

from speedbench.analysis import checkpoints as cstats
from speedbench.metrics.headline import headline
from speedbench.report import checkpoints, nightly, trust
from speedbench.report.dashboard import results_verdicts, scan

ROOT = Path(__file__).resolve().parent.parent
ARMS = ("step150", "step300", "step450", "step600")
SB = [sys.executable, "-m", "speedbench.cli"]


def offline_al() -> dict[str, float]:
    tiny = ROOT / ".fixtures" / "tiny" / "checkpoints"
    return {a: json.loads((tiny / f"eagle3-step{int(a[4:]):04d}" / "training.json").read_text())["offline_al"]
            for a in ARMS}


def figures(run) -> dict[tuple[str, str], dict[str, float]]:
    """(metric, point) -> arm -> the night's value; a confounded speedup is left out."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for arm in ARMS:
        out.setdefault(("AL", "pooled"), {})[arm] = nightly.pooled_al(run, arm, "")
    for r in run.rows:
        if str(r.arm) in ARMS and r.status != "failed":
            c = int(r.concurrency or 0)
            if not trust.confounded(run, str(r.arm), c, ""):
                out.setdefault(("speedup", f"c={c}"), {})[str(r.arm)] = headline(r)[0]
    return out


def tau(offline: dict[str, float], served: dict[str, float]) -> float:
    arms = [a for a in ARMS if math.isfinite(served.get(a, math.nan))]
    if len(arms) < 2:
        return math.nan
    return float(sps.kendalltau([offline[a] for a in arms], [served[a] for a in arms]).statistic)


def orders(runs, offline: dict[str, float]) -> list[str]:
    """Per figure: each checkpoint pooled over the nights, its interval and spread, tau."""
    nights = [figures(r) for r in runs]
    lines = ["| figure | " + " | ".join(ARMS) + " | Kendall tau (pooled) | tau per night |",
             "|---|" + "---|" * (len(ARMS) + 2)]
    for fig in sorted({f for n in nights for f in n}, key=lambda f: (f[0] != "AL", f[1])):
        pooled, cells = {}, []
        for a in ARMS:
            vals = [n[fig][a] for n in nights if a in n.get(fig, {})]
            p = cstats.pool(vals)
            pooled[a] = p.value
            sd = float(np.std(vals, ddof=1) / np.mean(vals)) if len(vals) > 1 else math.nan
            cells.append(f"{p.value:.3f} [{p.low:.3f}, {p.high:.3f}] n={p.nights}, sd {100 * sd:.1f}%")
        per_night = [tau(offline, n.get(fig, {})) for n in nights]
        lines.append(f"| {fig[0]} {fig[1]} | " + " | ".join(cells) + f" | {tau(offline, pooled):.2f} | "
                     + ", ".join("–" if math.isnan(t) else f"{t:.2f}" for t in per_night) + " |")
    return lines


def nights_needed(runs) -> list[str]:
    """For each checkpoint and figure: the fewest nights from which `compare --checkpoints`'
    call stays what it is on the last night."""
    calls: dict[tuple[str, tuple[str, str]], list[str]] = {}
    for k in range(1, len(runs) + 1):
        sc = checkpoints.compare_scenario("cpu_checkpoints", runs[:k], "step600")
        for r in sc.checkpoints if sc else []:
            for c in r.comparisons:
                calls.setdefault((r.name.split(" · ")[0], c.figure), []).append(c.call)
    lines = []
    for (arm, fig), seq in sorted(calls.items()):
        final = seq[-1]
        k = next(i for i in range(len(seq)) if all(s == final for s in seq[i:])) + 1
        lines.append(f"{arm} {fig[0]} {fig[1]}: {final} (from night {k} of {len(seq)})")
    return lines


def regression(results: Path) -> list[str]:
    vs, _ = results_verdicts(results)
    out = []
    for v in vs:
        if v.series.arm == "step600" and v.status != nightly.NO_CHANGE:
            night = v.series.nights[v.change.index] + 1 if v.change else "–"
            out.append(f"{v.series.metric} {v.series.point}: {v.status}, night {night}; "
                       f"{'; '.join(v.what_changed) or 'no provenance change'}"
                       + (f"; open since {v.open.began.created:%H:%M}" if v.open else ""))
    return out


def costs(results: Path) -> list[str]:
    """The dry-run's estimate of one night: fixed count, with stopping, with screening."""
    scenario = str(ROOT / "scenarios" / "cpu_checkpoints.yaml")
    designs = {"fixed count (as run)": [],
               "stopping (stop: speedup_ci_halfwidth 0.05, min_prompts 8)":
                   ["--set", "stop={speedup_ci_halfwidth: 0.05, min_prompts: 8}"],
               "screening (load.mode: screen, AL only)": ["--set", "load.mode=screen"]}
    lines = []
    for name, sets in designs.items():
        done = subprocess.run(SB + ["run", scenario, "--dry-run", "-o", str(results), *sets], cwd=ROOT,
                              capture_output=True, text=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
        total = re.search(r"total: about ([^\n]*server-hours[^\n]*)", done.stdout)
        lines.append(f"{name}: {total.group(1) if total else done.stdout[-300:] + done.stderr[-300:]}")
    return lines


def analyse(out: Path, ordinary: int) -> None:
    results = out / "results"
    runs = [sr.run for sr in scan(results)[0]]
    offline = offline_al()
    report = ["offline AL: " + ", ".join(f"{a} {v:.3f}" for a, v in offline.items()),
              f"{len(runs)} nights; the first {ordinary} ordinary", "", *orders(runs[:ordinary], offline), "",
              "calls against step600 (compare --checkpoints, ordinary nights):", *nights_needed(runs[:ordinary]), "",
              "step600 over every night (changes):", *regression(results), "",
              "one night's cost as the dry-run estimates it:", *costs(results)]
    every = checkpoints.compare_scenario("cpu_checkpoints", runs, "step600")
    report += ["", "checkpoints over every night:"] + [f"{r.name}: {r.nights} nights; {r.verdict}"
                                                         for r in (every.checkpoints if every else [])]
    for cmd, name in ((["changes", str(results)], "changes.txt"),
                      (["compare", "--checkpoints", str(results), "--reference", "step600"], "compare.txt"),
                      (["dashboard", str(results), "-o", str(out / "site")], "dashboard.txt")):
        done = subprocess.run(SB + cmd, cwd=ROOT, capture_output=True, text=True)
        (out / name).write_text(done.stdout + done.stderr)
        report.append(f"speedbench {cmd[0]}: exit {done.returncode} ({out / name})")
    screenshot(out)
    (out / "real_nights.md").write_text("\n".join(report) + "\n")
    print("\n".join(report))


def screenshot(out: Path) -> None:
    exe = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
    if exe is None:
        print("no chromium: no screenshot")
        return
    subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={out / 'chromium'}", "--window-size=1366,768",
                    f"--screenshot={out / 'dashboard.png'}", (out / "site" / "index.html").as_uri()],
                   capture_output=True, timeout=120, check=False)
