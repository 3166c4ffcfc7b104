"""Planted output faults on real vLLM (CPU): does the output check fire, and where do the
margins of honest numerics lie? The evidence behind the near-tie threshold (docs/metrics.md,
"Outputs").

Runs scenarios/cpu_tiny.yaml's target with four arms, one round, at c=1 and c=16:
- baseline (float16, as the CPU scenarios serve);
- eagle3: the trained EAGLE 3 draft, an honest speculative path;
- float32: the same target computed in float32: every divergence from the baseline is
  numerics, so its margins are the floor the threshold must clear;
- penalty: the baseline with a repetition penalty of 1.5 the client never asked for
  (`--override-generation-config`), a serving path that changes tokens on purpose: its
  divergences are losses, and the check must call them so.
Then prints benchmarks/output_check.py's table for the run folder.

    .venv/bin/python benchmarks/output_faults.py -o /tmp/output-faults
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARMS = ("[{name: baseline}, "
        "{name: eagle3, speculative_config: {method: eagle3, model: .fixtures/tiny/eagle3, num_speculative_tokens: 3}}, "
        "{name: float32, args: {dtype: float32}}, "
        "{name: penalty, args: {override-generation-config: '{\"repetition_penalty\": 1.5}'}}]")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, default=Path("/tmp/output-faults"))
    ap.add_argument("--tokens", type=int, default=128)
    a = ap.parse_args(argv)
    cmd = [sys.executable, "-m", "speedbench.cli", "run", "scenarios/cpu_tiny.yaml", "-o", str(a.output),
           "--set", f"arms={ARMS}", "--set", "repeats=1", "--set", "aa_check=false", "--set", "concurrency=[1, 16]",
           "--set", f"workload.max_tokens={a.tokens}", "--set", "gates=[]", "--set", "reference={}",
           "--skip-doctor"]
    proc = subprocess.run(cmd, cwd=ROOT)
    runs = sorted(p for p in (a.output / "cpu_tiny").iterdir() if (p / "summary.json").exists())
    print(f"speedbench run exited {proc.returncode} (1 expected: the lossless gate fails on the penalty arm)")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "output_check.py"), str(runs[-1])], cwd=ROOT)
    checks = runs[-1] / "outputs" / "checks.json"
    if checks.exists():
        by_arm: dict[str, list[float]] = {}
        for c in json.loads(checks.read_text()):
            if c.get("margin") is not None:
                by_arm.setdefault(c["arm"], []).append(round(c["margin"], 3))
        for arm, ms in sorted(by_arm.items()):
            print(f"margins {arm}: {sorted(ms)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
