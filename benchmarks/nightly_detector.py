"""How well the nightly detector and the checkpoint comparison work, on seeded synthetic
histories made by tests/helpers/histories.py from the real CPU run folders (each night the
real run with every figure multiplied by 1 + SD · N(0, 1), independently per night and
figure, and each night's interval set to what that noise implies).

    .venv/bin/python benchmarks/nightly_detector.py [--reps 4] [--flat 8] [--histories 200] [--json out.json]

Prints:
- the detector: steps in speedup planted on three arms (eagle3, eagle3.1, self-draft; each
  at c=1, 4, 16: 9 series per history) on the last H nights of a 30-night history; per step
  size and H, the share of series with a regression tonight (news or still open, as
  `speedbench changes` gives it) and of those that began within one night of the plant,
  and the share called suspicious; false regressions over whole histories with no
  change, per 100 series-nights;
- the checkpoint comparison: histories of N nights where the eagle3.1 slot carries eagle3
  (another checkpoint with the same truth) and eagle3's speedup is planted +3%: how often
  the 95% interval of eagle3 against it covers the truth (×1.03 speedup at each
  concurrency, ×1 AL), and, with nothing planted, how often any of eagle3's figures is
  called "better" after Benjamini–Hochberg: beside checkpoints that do differ from the
  reference (partial null), and when every checkpoint carries eagle3 (complete null: any
  "better" call of the whole family).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.histories import START, Plant, load_nights, write_history  # noqa: E402

from speedbench.analysis import checkpoints as cstats  # noqa: E402
from speedbench.analysis.changepoints import REGRESSION, SUSPICIOUS  # noqa: E402
from speedbench.report import checkpoints, nightly  # noqa: E402

SD = 0.015  # night-to-night spread of every figure (the histories' default)
NIGHTS = 30
ARMS = ("eagle3", "eagle3.1", "self-draft")
SIZES = (0.05, 0.10, 0.15)
HELD = (1, 2, 3, 5, 10)


def _verdicts(root: Path, plants: list[Plant], seed: int, nights: int = NIGHTS) -> list[nightly.Verdict]:
    ns = load_nights(write_history(root, nights, plants, sd=SD, seed=seed, report=False))
    out = nightly.verdicts({"cpu_tiny": ns})
    shutil.rmtree(root)
    return out


def detector(tmp: Path, reps: int) -> dict[str, dict[str, float]]:
    """Per (size, held): the share of planted series called a regression (with the start
    within a night) and suspicious."""
    table: dict[str, dict[str, float]] = {}
    for size in SIZES:
        for held in HELD:
            n = reg = sus = on_time = 0
            for rep in range(reps):
                night = NIGHTS - held
                start = START + dt.timedelta(days=night)
                plants = [Plant(arm, night, "speedup", -size) for arm in ARMS]
                for v in _verdicts(tmp / "h", plants, seed=10_000 + 100 * held + rep + int(1000 * size)):
                    if v.series.metric != "speedup" or v.series.arm not in ARMS:
                        continue
                    n += 1  # a regression: news tonight, or open since an earlier night
                    sus += v.status == SUSPICIOUS
                    reg += v.open is not None
                    on_time += v.open is not None and abs((v.open.began.created - start).days) <= 1
            table[f"{int(100 * size)}% held {held}"] = {"series": n, "regression": reg / n, "suspicious": sus / n,
                                                         "regression with the right start": on_time / n}
    return table


def flat(tmp: Path, histories: int) -> dict[str, float]:
    series_nights = false = 0
    for h in range(histories):
        ns = load_nights(write_history(tmp / "f", NIGHTS, [], sd=SD, seed=20_000 + h, report=False))
        for s in nightly.collect("cpu_tiny", ns):
            found, _, _ = nightly.changes(s)
            series_nights += len(s.values)
            false += sum(c.kind == REGRESSION for c in found)
        shutil.rmtree(tmp / "f")
    return {"series-nights": series_nights, "false regressions": false,
            "per 100 series-nights": 100 * false / series_nights}


def _comparison(tmp: Path, nights: int, seed: int, effect: float, slots: tuple[str, ...] = ("eagle3.1",)
                ) -> checkpoints.ScenarioComparison:
    plants = [Plant(slot, 0, swap_with="eagle3", size=0.0) for slot in slots]
    if effect:
        plants.append(Plant("eagle3", 0, "speedup", effect))
    ns = load_nights(write_history(tmp / "c", nights, plants, sd=SD, seed=seed, report=False))
    sc = checkpoints.compare_scenario("cpu_tiny", [n.run for n in ns], "eagle3.1")
    shutil.rmtree(tmp / "c")
    assert sc is not None
    return sc


def comparison(tmp: Path, histories: int, nights: int) -> dict[str, float]:
    covered = total = false_better = false_full = 0
    for h in range(histories):
        sc = _comparison(tmp, nights, 30_000 + h, 0.03)
        (mine,) = [r for r in sc.checkpoints if r.name.startswith("eagle3 ·")]
        for c in mine.comparisons:
            truth = 1.03 if c.figure[0] == "speedup" else 1.0
            total += 1
            covered += c.contrast.low <= truth <= c.contrast.high
        null = _comparison(tmp, nights, 40_000 + h, 0.0)  # the other checkpoints differ
        (mine,) = [r for r in null.checkpoints if r.name.startswith("eagle3 ·")]
        false_better += any(c.call == cstats.BETTER for c in mine.comparisons)
        full = _comparison(tmp, nights, 50_000 + h, 0.0, ("eagle3.1", "self-draft", "eagle3-untrained"))
        false_full += any(c.call == cstats.BETTER for r in full.checkpoints for c in r.comparisons)
    return {"nights": nights, "histories": histories, "intervals": total, "coverage": covered / total,
            "false better, partial null": false_better / histories,
            "false better, complete null": false_full / histories}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=4, help="histories per step size and nights held")
    ap.add_argument("--flat", type=int, default=8, help="histories with no change")
    ap.add_argument("--histories", type=int, default=200, help="histories for the comparison (each nights count)")
    ap.add_argument("--nights", type=int, nargs="+", default=[3, 6, 10], help="nights of the comparison's histories")
    ap.add_argument("--json", help="also write the numbers here")
    a = ap.parse_args()
    out: dict[str, object] = {"sd": SD}
    with tempfile.TemporaryDirectory() as d:
        tmp, t0 = Path(d), time.perf_counter()
        out["detector"] = detector(tmp, a.reps)
        out["flat"] = flat(tmp, a.flat)
        out["comparison"] = [comparison(tmp, a.histories, n) for n in a.nights]
        out["seconds"] = round(time.perf_counter() - t0, 1)
    _print(out)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


def _print(out: dict) -> None:
    print(f"night-to-night sd {100 * out['sd']:.1f}% of every figure; {NIGHTS}-night histories")
    print("| step, nights held | series | regression, start within 1 night | regression | suspicious |")
    print("|---|---|---|---|---|")
    for k, v in out["detector"].items():
        print(f"| −{k} | {v['series']} | {v['regression with the right start']:.2f} | {v['regression']:.2f} | "
              f"{v['suspicious']:.2f} |")
    f = out["flat"]
    print(f"\nflat histories: {f['false regressions']} false regressions in {f['series-nights']} series-nights "
          f"({f['per 100 series-nights']:.3f} per 100)\n")
    print("| nights | histories | intervals | 95% coverage | false 'better': partial null | complete null |")
    print("|---|---|---|---|---|---|")
    for c in out["comparison"]:
        print(f"| {c['nights']} | {c['histories']} | {c['intervals']} | {c['coverage']:.3f} | "
              f"{c['false better, partial null']:.3f} | {c['false better, complete null']:.3f} |")
    print(f"\n{out['seconds']} s")


if __name__ == "__main__":
    main()
