"""A draft checkpoint's weights, by content.

A nightly that retrains a draft usually writes it to the same path with the same
config.json, so the config's hash alone cannot tell last night's checkpoint from
tonight's. The weights' sha256 can. Reading every byte took 0.38 s for 0.5 GiB from the
page cache on a 2-core host; the result is kept per (file, size, mtime) for the rest of
the process, so the servers of later rounds do not read the same checkpoint again.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

# What vLLM loads weights from (safetensors first; PyTorch pickles for older checkpoints).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
_CHUNK = 1 << 20


def weight_files(folder: Path) -> list[Path]:
    """The folder's weight files (not its subfolders), in name order."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))


def weights_digest(folder: Path) -> tuple[str, int]:
    """(sha256 hex, total bytes) over the weight files' names and contents, in name order;
    ("", 0) when the folder has none. Hub-cache snapshots hold symlinks: their targets are read."""
    files = weight_files(folder)
    stamps = tuple((str(p.resolve()), st.st_size, st.st_mtime_ns) for p in files for st in [p.stat()])
    return _digest(tuple(p.name for p in files), stamps) if files else ("", 0)


@functools.lru_cache(maxsize=32)
def _digest(names: tuple[str, ...], stamps: tuple[tuple[str, int, int], ...]) -> tuple[str, int]:
    h = hashlib.sha256()
    for name, (path, size, _) in zip(names, stamps, strict=True):
        # the name and length go in first, so moving bytes between files changes the hash
        h.update(f"{name}\0{size}\0".encode())
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
    return h.hexdigest(), sum(s for _, s, _ in stamps)
