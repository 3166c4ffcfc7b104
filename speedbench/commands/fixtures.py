"""``speedbench fixtures tiny DIR``: build the tiny local models for CPU runs and tests."""

from __future__ import annotations

import time
from pathlib import Path

from speedbench.errors import UsageError
from speedbench.fixtures.assemble import MARKER, ensure_tiny, is_built


def register(sub) -> None:
    p = sub.add_parser(
        "fixtures",
        help="build tiny local models (a Llama trained on code, trained EAGLE 3 / 3.1 drafts)",
        description="Assemble the tiny fixtures, with no download and no training, from the "
        "weights committed in speedbench/data/tiny (checked against their SHA256SUMS): "
        "DIR/target (Llama, hidden 128, 8 layers, trained on the Python standard library, "
        "byte-level BPE vocabulary of 2048 with a chat template), DIR/eagle3 and DIR/eagle3.1 "
        "(drafts in vLLM's EAGLE3 layout trained against that target) and DIR/eagle-random "
        "(their untrained start, a control that accepts nothing). Retraining the committed "
        "weights is scripts/train_tiny_fixtures.py (docs/fixtures.md). "
        f"An existing identical build (DIR/{MARKER}) is kept unless --force.",
    )
    p.add_argument("kind", choices=["tiny"], help="which fixture set to build")
    p.add_argument("dir", nargs="?", help="output folder, e.g. .fixtures/tiny (or -o/--output)")
    p.add_argument("-o", "--output", metavar="DIR", help="output folder (the same as DIR)")
    p.add_argument("--force", action="store_true", help="rebuild even when an identical build exists")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the untrained control's weights (default 0, the trained drafts' start)")
    p.set_defaults(func=run)


def run(args) -> int:
    if bool(args.dir) == bool(args.output):
        raise UsageError("give the output folder once: `speedbench fixtures tiny DIR` or `-o DIR`")
    root = Path(args.dir or args.output)
    if not args.force and is_built(root, seed=args.seed):
        print(f"{root}: up to date (delete it or pass --force to rebuild)")
        return 0
    t0 = time.monotonic()
    ensure_tiny(root, force=args.force, seed=args.seed)
    took = time.monotonic() - t0
    print(f"{root}: assembled target, eagle3, eagle3.1, eagle-random and the training checkpoints in {took:.1f} s")
    return 0
