"""What the output check found in a run folder, and what it cost (docs/metrics.md, "Outputs").

Reads a finished run folder only (summary.json, points.json, outputs/): per point, the
verdict, the identical fraction and the first divergences against the reference, the two
floors (the A/A twin against the baseline, the baseline across concurrencies), the margins
the check pass read, and the cost: the outputs files' bytes per output token, the check
pass's seconds against the run's measured wall time, and the size the outputs of
scenarios/kimi_coding.yaml would take at the same bytes per token.

    .venv/bin/python benchmarks/output_check.py results/cpu_tiny/<run id>
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

KIMI = {"prompts": 880, "max_tokens": 2048, "points": 3, "arms": 2, "repeats": 1}  # kimi_coding.yaml


def _checks(run: Path) -> list[dict]:
    path = run / "outputs" / "checks.json"
    return json.loads(path.read_text()) if path.exists() else []


def _rounds(run: Path) -> list[dict]:
    rounds = []
    for f in sorted(run.glob("points*.json")):
        rounds += json.loads(f.read_text())
    return rounds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    a = ap.parse_args(argv)
    summary = json.loads((a.run / "summary.json").read_text())
    block = summary.get("outputs") or {}
    print(f"{'point':<28} {'floor':<12} {'identical':>10} {'div':>4} {'pos med':>7} {'checked':>7}  verdict")
    for e in block.get("points", []):
        fd = e.get("first_divergence") or {}
        frac = e.get("identical_fraction")
        print(f"{e['arm'] + ' c=' + str(e['concurrency']):<28} {e.get('floor') or '':<12} "
              f"{'-' if frac is None else f'{frac:.3f}':>10} {e.get('divergences', 0):>4} "
              f"{fd.get('median', '-')!s:>7} {e.get('checked', 0):>7}  {e['verdict']} ({e['reason']})")
    checks = _checks(a.run)
    margins = sorted(c["margin"] for c in checks if c.get("margin") is not None)
    print(f"\ncheck pass: {len(checks)} checks, margins (nats) {[round(m, 3) for m in margins]}")
    check_s = sum(c.get("check_s") or 0 for c in checks)
    rounds = _rounds(a.run)
    wall = sum(r.get("wall_s") or 0 for r in rounds)
    arms_wall = sum(r.get("wall_s") or 0 for r in json.loads((a.run / "arms.json").read_text())) \
        if (a.run / "arms.json").exists() else 0.0
    files = [r["outputs"] for r in rounds if (r.get("outputs") or {}).get("file")]
    size, tokens = sum(f["bytes"] for f in files), sum(f["tokens"] for f in files)
    per_token = size / tokens if tokens else float("nan")
    print(f"check pass: {check_s:.2f} s; measured points {wall:.1f} s ({100 * check_s / wall if wall else 0:.2f}%); "
          f"servers' lives {arms_wall:.1f} s ({100 * check_s / arms_wall if arms_wall else 0:.2f}%)")
    print(f"outputs: {len(files)} files, {size} bytes, {tokens} tokens, {per_token:.2f} bytes per output token")
    k = KIMI
    n = k["prompts"] * k["max_tokens"] * k["points"] * k["arms"] * k["repeats"]
    # Kimi's vocabulary (~164k) needs 4-byte ids where the tiny one fits 2; the rate above
    # also counts the tiny prompts' ids, so only the bound on the outputs is scaled here.
    print(f"kimi_coding.yaml ({k['prompts']} prompts x {k['max_tokens']} tokens x {k['points']} concurrencies x "
          f"{k['arms']} arms x {k['repeats']} round = {n} output tokens): at most {4 * n / 1e6:.1f} MB for the "
          "outputs before compression, plus 4 bytes a prompt token per point for the prompts' ids")
    return 0


if __name__ == "__main__":
    sys.exit(main())
