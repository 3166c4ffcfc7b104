"""The committed tiny-fixture weights (speedbench/data/tiny/) and their hash check.

The trained target, the two trained drafts and the tokenizer are a few MB, produced by
``scripts/train_tiny_fixtures.py`` (the recipe: :mod:`speedbench.tiny_recipe`) and
committed, because training them costs far more than a fixture build may take on two
cores (docs/fixtures.md). ``SHA256SUMS`` pins every file: a build refuses files that do
not match, so a corrupted checkout or a half-finished retraining is never served.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from speedbench.errors import UsageError

WEIGHTS = Path(__file__).parent / "data" / "tiny"
FILES = ("tokenizer.json", "target.safetensors", "eagle3.safetensors", "eagle3.1.safetensors", "recipe.json")
SUMS = "SHA256SUMS"
RETRAIN = "python scripts/train_tiny_fixtures.py"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_sums(folder: Path) -> str:
    """Write ``SHA256SUMS`` (the ``sha256sum`` format) for :data:`FILES`; returns its text."""
    text = "".join(f"{file_sha256(Path(folder) / name)}  {name}\n" for name in FILES)
    (Path(folder) / SUMS).write_text(text)
    return text


def read_sums(folder: Path) -> dict[str, str]:
    path = Path(folder) / SUMS
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise UsageError(f"{path}: cannot read the weights' checksums ({e.strerror}) -- fix: restore it with "
                         f"`git checkout -- {_rel(path)}` or retrain with `{RETRAIN}`") from None
    sums = {}
    for n, line in enumerate(lines, 1):
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise UsageError(f"{path}:{n}: not a sha256sum line: {line!r} -- fix: restore the file with "
                             f"`git checkout -- {_rel(path)}`")
        sums[name] = digest
    return sums


def verify(folder: Path | None = None) -> str:
    """Check every weight file in ``folder`` (default :data:`WEIGHTS`) against
    ``SHA256SUMS``; returns the sums' text (the build's identity). Raises UsageError
    naming the file and the fix on any mismatch."""
    folder = Path(folder) if folder is not None else WEIGHTS
    sums = read_sums(folder)
    for name in FILES:
        path = folder / name
        if name not in sums:
            raise UsageError(f"{folder / SUMS}: no checksum for {name} -- fix: retrain with `{RETRAIN}`")
        if not path.is_file():
            raise UsageError(f"{path}: missing -- fix: `git checkout -- {_rel(path)}` "
                             "(a Git LFS or sparse checkout may have skipped it)")
        got = file_sha256(path)
        if got != sums[name]:
            raise UsageError(f"{path}: sha256 {got[:12]}... does not match {SUMS} ({sums[name][:12]}...) -- "
                             f"fix: `git checkout -- {_rel(path)}`, or, after a deliberate retraining, "
                             f"`{RETRAIN}` rewrites both")
    return (folder / SUMS).read_text()


def _rel(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
