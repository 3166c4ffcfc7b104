"""Writing files so that a crash never leaves half of one, and names that are safe."""

from __future__ import annotations

import datetime as _dt
import errno
import math
import os
import secrets
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from speedbench.errors import OutputError

# Write errors that waiting or retrying does not fix: the disk (or quota) is full, the
# folder is read-only or not ours, or a file stands where a folder must go (and the
# reverse). They stop a command cleanly (exit 3) instead of a traceback.
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                           errno.ENOTDIR, errno.EISDIR, errno.EEXIST})


def new_run_id(now: _dt.datetime | None = None) -> str:
    """``YYYYmmddTHHMMSSZ-<6 hex>``: sorts by time, and the hex part keeps two runs
    started in the same second apart."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return now.astimezone(_dt.timezone.utc).strftime(RUN_ID_TIME) + "-" + secrets.token_hex(3)


RUN_ID_TIME = "%Y%m%dT%H%M%SZ"


def started_at(text: Any) -> _dt.datetime | None:
    """A run's start time from an ISO time (``created_utc``, ``measured_utc``) or a run id's
    time part (``YYYYmmddTHHMMSSZ``); UTC when it names no zone, None when it is neither."""
    for parse in (_dt.datetime.fromisoformat, lambda t: _dt.datetime.strptime(t, RUN_ID_TIME)):
        try:
            t = parse(text)
        except (ValueError, TypeError):
            continue
        return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)
    return None


def run_started(*stamps: Any, folder: Path | None = None) -> _dt.datetime:
    """When a run started: the first of ``stamps`` that reads as a time (``created_utc``,
    ``measured_utc``, a run id, whose first 16 characters are its start). The one fallback,
    for a folder whose summary and name carry no time (copied or renamed): when its
    summary.json, else the folder, last changed; the epoch when there is neither."""
    for stamp in stamps:
        t = started_at(stamp) or started_at(str(stamp or "")[:16])
        if t is not None:
            return t
    for path in ([folder / "summary.json", folder] if folder is not None else []):
        if path.exists():
            return _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.timezone.utc)
    return _dt.datetime.fromtimestamp(0, _dt.timezone.utc)


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
    """:func:`atomic_write` for any writer: ``write(f)`` fills a binary file object.
    Every file a command writes (other than the append-only logs) goes through here, so
    an unwritable output ends as one :class:`OutputError` (exit 3), never a traceback."""
    path = Path(path)
    ensure_dir(path.parent)
    # pid + thread: arms of one wave write from several threads.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:  # a read-only folder: nothing was created either
            pass
        if isinstance(e, OSError) and e.errno in OUTPUT_ERRNOS:
            raise output_error(e, path) from None
        raise


def ensure_dir(folder: Path) -> Path:
    """Create ``folder`` (and its parents); an unwritable place is an :class:`OutputError`."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if e.errno in OUTPUT_ERRNOS:
            raise output_error(e, Path(folder)) from None
        raise
    return Path(folder)


def free_space(path: Path) -> tuple[Path, int | None]:
    """The nearest existing folder of ``path`` and the bytes free there (None: unknown)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    if p.is_file():
        p = p.parent
    try:
        return p, shutil.disk_usage(p).free
    except OSError:
        return p, None


def human_bytes(size: int | None) -> str:
    if size is None:
        return "unknown"
    n = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def output_error(e: OSError, path: Path) -> OutputError:
    """An :class:`OutputError` naming the file, the reason and the free space."""
    folder, free = free_space(path)
    why = e.strerror or str(e)
    # No option is named here: the commands differ in how they choose where to write
    # (-o/--output, --junit FILE, the run folder itself); each one's --help says how.
    fix = ("free space there" if e.errno in (errno.ENOSPC, errno.EDQUOT)
           else f"make {folder} writable (a folder, not a file), or choose an output path elsewhere")
    return OutputError(f"cannot write {path}: {why} (free space in {folder}: {human_bytes(free)}) -- fix: {fix}",
                       path=path)


def safe_part(s: str) -> str:
    """Arm and variant names go into file names; scenario validation already limits arm
    names, but variants and external callers may not be so tidy."""
    out = "".join(c if c.isalnum() or c in "._-" else "-" for c in str(s))
    return out.lstrip(".") or "_"
