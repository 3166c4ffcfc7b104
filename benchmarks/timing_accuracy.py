"""How close are speedbench's timings to the truth on every request path? A table.

Runs the matrix of speedbench/testing/accuracy.py ({chat, chat with role+first token in
one write, completions} x {fresh, reused connections} x {c=1, 4, 16}) against the fake
server, whose write times are the truth, and prints per point: the error of mean
per-user TPS for the baseline and speculative arms, the mean TTFT error, the speedup
error and whether the true speedup lies inside the reported 95% CI. The unit test
tests/integration/test_timing_matrix.py asserts bounds on the same figures. Usage::

    .venv/bin/python benchmarks/timing_accuracy.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from speedbench.metrics.table import request_table  # noqa: E402
from speedbench.testing.accuracy import run_matrix  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    matrix = run_matrix()  # one measurement per point, no retries
    out = []
    print(f"{'path':12} {'conn':7} {'c':>3} {'TPS err base':>13} {'TPS err spec':>13} {'TTFT err ms':>12} "
          f"{'speedup err':>12} {'truth in CI':>11} {'loop lag ms':>11}")
    for (path, conn, c), pt in matrix.items():
        errs, ttft, true_mean = {}, [], {}
        for arm in ("base", "sd"):
            table = request_table(pt.records[arm])
            true_tps = np.array([pt.truth_tps[(arm, i)] for i in table.prompt_index])
            true_mean[arm] = float(true_tps.mean())
            errs[arm] = pt.rows[arm]["per_user_tps_mean"] / true_mean[arm] - 1
            ttft += list(table.ttft_ms.to_numpy() - np.array([pt.truth_ttft_ms[(arm, i)] for i in table.prompt_index]))
        sd = pt.rows["sd"]
        truth = true_mean["sd"] / true_mean["base"]
        row = {"path": path, "conn": conn, "c": c, "tps_err_base": errs["base"], "tps_err_spec": errs["sd"],
               "ttft_err_ms": float(np.mean(ttft)), "speedup_err": sd["speedup_mean"] / truth - 1,
               "truth_in_ci": bool(sd["speedup_ci_low"] <= truth <= sd["speedup_ci_high"]),
               "loop_lag_ms_max": max(pt.rows[a]["loop_lag_ms_max"] for a in ("base", "sd"))}
        out.append(row)
        print(f"{path:12} {conn:7} {c:3d} {row['tps_err_base']:+13.3%} {row['tps_err_spec']:+13.3%} "
              f"{row['ttft_err_ms']:+12.3f} {row['speedup_err']:+12.3%} {'yes' if row['truth_in_ci'] else 'NO':>11} "
              f"{row['loop_lag_ms_max']:11.1f}")
    print(f"1-min load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
