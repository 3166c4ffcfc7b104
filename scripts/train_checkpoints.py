#!/usr/bin/env python
"""Intermediate checkpoints of the tiny drafts' training run (issue 56: real checkpoints).

Retrains both drafts with the committed recipe (scripts/train_tiny_fixtures.py
--drafts-only: the same data, init, batch order and seed) against the committed target,
and saves each draft at the given steps along the way, with its offline acceptance:
teacher-forced top-1 agreement with the target on the recipe's held-out sequences at each
of the k=3 draft positions, and the acceptance length it implies, 1 + a1 + a1*a2 +
a1*a2*a3 (each position's agreement given correct earlier ones), computed with no server.

    .venv/bin/python scripts/train_checkpoints.py --out /tmp/tiny-checkpoints

Writes <draft>-step<N>.safetensors, checkpoints.json (each checkpoint's step, held-out
agreement, offline AL and SHA256) and says whether the final weights reproduce the
committed ones bit for bit (speedbench/data/tiny/SHA256SUMS). About 25 minutes on one
core of the 2-core development machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from speedbench.fixtures import build  # noqa: E402
from speedbench.fixtures.training.drafts import TrainParams  # noqa: E402
from speedbench.fixtures.training.recipe import train_drafts_stage  # noqa: E402
from speedbench.fixtures.weights import WEIGHTS  # noqa: E402


def offline_al(agreement: list[float]) -> float:
    al, joint = 1.0, 1.0
    for a in agreement:
        joint *= a
        al += joint
    return round(al, 4)


class Snapshots:
    """Saves a draft at the chosen steps (drafts.train_draft calls it)."""

    def __init__(self, out: Path, steps: list[int]) -> None:
        self.out, self.steps, self.silent, self.saved = out, set(steps), [], []

    def wants(self, step: int) -> bool:
        return step in self.steps

    def __call__(self, name: str, step: int, tensors: dict, agreement: list[float]) -> None:
        tensors = dict(tensors)
        tensors["lm_head.weight"] = build.centre_and_silence(tensors["lm_head.weight"], self.silent)
        path = self.out / f"{name}-step{step:04d}.safetensors"
        build.save_tensors(tensors, path)
        self.saved.append({"draft": name, "step": step, "file": path.name, "heldout_agreement": agreement,
                           "offline_al": offline_al(agreement),
                           "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
        logging.info("checkpoint %s step %d: agreement %s, offline AL %.3f", name, step, agreement,
                     offline_al(agreement))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("/tmp/tiny-checkpoints"))
    ap.add_argument("--steps", default="150,300,450,600", help="steps to save at (the run has 600)")
    ap.add_argument("--small", action="store_true", help="the recipe's small run (60 steps), to try it")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    for f in ("tokenizer.json", "target.safetensors", "recipe.json"):
        shutil.copy(WEIGHTS / f, args.out / f)
    snaps = Snapshots(args.out, [int(s) for s in args.steps.split(",")])
    old = json.loads((WEIGHTS / "recipe.json").read_text())
    tp = TrainParams().small() if args.small else TrainParams()
    train_drafts_stage(args.out, old.get("seed", 0), tp, old["target"], snapshot=snaps)
    sums = dict(reversed(ln.split()) for ln in (WEIGHTS / "SHA256SUMS").read_text().splitlines() if ln.strip())
    reproduced = {}
    for name in ("eagle3", "eagle3.1"):
        got = hashlib.sha256((args.out / f"{name}.safetensors").read_bytes()).hexdigest()
        reproduced[name] = got == sums.get(f"{name}.safetensors")
    (args.out / "checkpoints.json").write_text(json.dumps({"checkpoints": snaps.saved,
                                                           "final_reproduces_committed": reproduced}, indent=2) + "\n")
    print(json.dumps({"final_reproduces_committed": reproduced,
                      "checkpoints": [(c["draft"], c["step"], c["offline_al"]) for c in snaps.saved]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
