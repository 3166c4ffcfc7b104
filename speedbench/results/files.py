"""Writing files so that a crash never leaves half of one, and names that are safe."""

from __future__ import annotations

import datetime as _dt
import math
import os
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def new_run_id(now: _dt.datetime | None = None) -> str:
    """``YYYYmmddTHHMMSSZ-<6 hex>``: sorts by time, and the hex part keeps two runs
    started in the same second apart."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return now.astimezone(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def finite(obj: Any) -> Any:
    """NaN/inf -> None: strict JSON has no NaN, and other tools choke on it."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return finite(obj.item())
    return obj


def atomic_write(path: Path, text: str, fsync: bool = False) -> None:
    """Write then rename: a crash leaves the old file or the new one, never half of one.
    ``fsync`` also survives power loss, at tens of milliseconds per file on some disks."""
    atomic_write_with(path, lambda f: f.write(text.encode("utf-8")), fsync)


def atomic_write_with(path: Path, write: Callable[[IO[bytes]], Any], fsync: bool = False) -> None:
    """:func:`atomic_write` for any writer: ``write(f)`` fills a binary file object."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # pid + thread: arms of one wave write from several threads.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def safe_part(s: str) -> str:
    """Arm and variant names go into file names; scenario validation already limits arm
    names, but variants and external callers may not be so tidy."""
    out = "".join(c if c.isalnum() or c in "._-" else "-" for c in str(s))
    return out.lstrip(".") or "_"
