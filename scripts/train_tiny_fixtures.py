#!/usr/bin/env python
"""Retrain the committed tiny-fixture weights (speedbench/data/tiny/): the exact recipe.

    .venv/bin/python scripts/train_tiny_fixtures.py            # the committed run (seed 0)
    .venv/bin/python scripts/train_tiny_fixtures.py --small --out /tmp/tiny   # a minute, to try it

Rewrites tokenizer.json, target.safetensors, eagle3.safetensors, eagle3.1.safetensors,
recipe.json and SHA256SUMS in --out. The full run takes about 40 minutes on one core of
the 2-core development machine (docs/fixtures.md). Progress is logged every 20 steps.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from speedbench.fixtures.training.drafts import TrainParams  # noqa: E402
from speedbench.fixtures.weights import WEIGHTS  # noqa: E402
from speedbench.fixtures.training.target import TargetTrainParams  # noqa: E402
from speedbench.fixtures.training.recipe import retrain_drafts, train_all  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=WEIGHTS, help=f"output folder (default {WEIGHTS})")
    ap.add_argument("--seed", type=int, default=0, help="the recipe's seed (default 0, the committed one)")
    ap.add_argument("--small", action="store_true", help="a small-scale run that still learns (about a minute)")
    ap.add_argument("--drafts-only", action="store_true",
                    help="retrain only the drafts against the target already in --out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    target_tp, draft_tp = TargetTrainParams(), TrainParams()
    if args.small:
        target_tp, draft_tp = target_tp.small(), draft_tp.small()
    if args.drafts_only:
        recipe = retrain_drafts(args.out, seed=args.seed, tp=draft_tp)
    else:
        recipe = train_all(args.out, seed=args.seed, target_tp=target_tp, draft_tp=draft_tp)
    summary = {"seconds": recipe["seconds"], "target": {k: recipe["target"][k] for k in ("loss_first", "loss_last",
               "heldout_loss")}, "drafts": {n: {k: r[k] for k in ("loss_first", "loss_last", "holdout_accuracy")}
                                         for n, r in recipe["drafts"].items()}}
    print(json.dumps(summary, indent=2))
    print(f"wrote {args.out} (SHA256SUMS updated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
