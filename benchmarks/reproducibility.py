"""How well a scenario's figures reproduce across runs: give it the run folders of
several runs of the same scenario (e.g. three fresh `bash scripts/main.sh`) and it prints,
per arm and concurrency, the median and range of each source's speedup and of the
baseline's per-user TPS, whether the speedup intervals overlap pairwise, and each run's
A/A noise floor.

    .venv/bin/python benchmarks/reproducibility.py RUN_DIR RUN_DIR RUN_DIR [--arm eagle3.1]

Exit code 1 when an arm's intervals (either source) fail to overlap pairwise at some
concurrency, or an A/A interval excludes 1.0; 0 otherwise.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from pathlib import Path


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) else math.nan


def _rng(values: list[float], digits: int = 2) -> str:
    xs = [v for v in values if math.isfinite(v)]
    if not xs:
        return "–"
    return f"{statistics.median(xs):.{digits}f} [{min(xs):.{digits}f}, {max(xs):.{digits}f}]"


def _overlap(ivs: list[tuple[float, float]]) -> bool | None:
    ivs = [iv for iv in ivs if all(map(math.isfinite, iv))]
    if len(ivs) < 2:
        return None
    return all(a[0] <= b[1] and b[0] <= a[1] for a, b in itertools.combinations(ivs, 2))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--arm", action="append", help="arms to check for overlap (default: every speculative arm)")
    a = ap.parse_args(argv)
    summaries = [json.loads((p / "summary.json").read_text()) for p in a.runs]
    base = summaries[0]["baseline"]
    rows = [{(r["arm"], r["concurrency"], r["variant"]): r for r in s["rows"]} for s in summaries]
    keys = list(rows[0])
    bad = []
    print(f"{len(summaries)} runs of {summaries[0]['scenario']}: median [min, max] over runs")
    print(f"{'point':<28} {'speedup (client)':>22} {'overlap':>8} {'speedup (engine)':>22} {'overlap':>8}")
    for key in keys:
        got = [r.get(key) for r in rows]
        if any(g is None for g in got) or not got[0].get("speculative"):
            continue
        cols = []
        for m, lo, hi in (("speedup_mean", "speedup_ci_low", "speedup_ci_high"),
                          ("speedup_engine_mean", "speedup_engine_ci_low", "speedup_engine_ci_high")):
            ov = _overlap([(_num(g.get(lo)), _num(g.get(hi))) for g in got])
            cols += [_rng([_num(g.get(m)) for g in got]), {None: "–", True: "yes", False: "NO"}[ov]]
            if ov is False and (not a.arm or key[0] in a.arm):
                bad.append(f"{key[0]} c={key[1]}: {m} intervals do not overlap")
        print(f"{key[0] + ' c=' + str(key[1]):<28} {cols[0]:>22} {cols[1]:>8} {cols[2]:>22} {cols[3]:>8}")
    print(f"\nbaseline ({base}) per-user TPS, client / engine:")
    for key in keys:
        if key[0] == base:
            got = [r[key] for r in rows]
            print(f"  c={key[1]}: client {_rng([_num(g.get('per_user_tps_mean')) for g in got], 1)}"
                  f"   engine {_rng([_num(g.get('per_user_tps_engine_mean')) for g in got], 1)}"
                  f"   bursts {[g.get('n_burst') for g in got]}")
    print("\nA/A noise floor per run (client; engine):")
    for p, s in zip(a.runs, summaries):
        cells = []
        for f in s.get("noise_floor") or []:
            cells.append(f"c={f['concurrency']} {_num(f.get('speedup')):.3f} [{_num(f.get('ci_low')):.3f}, "
                         f"{_num(f.get('ci_high')):.3f}]; {_num(f.get('speedup_engine')):.3f} "
                         f"[{_num(f.get('engine_ci_low')):.3f}, {_num(f.get('engine_ci_high')):.3f}]")
            for side, lo, hi in (("client", "ci_low", "ci_high"), ("engine", "engine_ci_low", "engine_ci_high")):
                if math.isfinite(_num(f.get(lo))) and not _num(f.get(lo)) <= 1.0 <= _num(f.get(hi)):
                    bad.append(f"{p.name} c={f['concurrency']}: the A/A {side} interval excludes 1.0")
        print(f"  {p.name}: " + (" | ".join(cells) or "no A/A check"))
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
