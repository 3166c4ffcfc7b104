"""Record lines: parsing one line, scanning a record file, and the digests that
points.json keeps for every finished round.

A finished round's entry in points.json holds ``record_count`` and ``records_sha256``, so
resume and ``speedbench verify`` can tell a complete round from one that lost or changed
lines (a file cut short, a line half written, an editor's accident). The digest is the
SHA-256 of the lines' own SHA-256s, *sorted*: the requests of one round complete in any
order, and a cluster run spreads rounds over several files, so it must not depend on
line order.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from speedbench.records import PointKey, RequestRecord
from speedbench.results.files import OUTPUT_ERRNOS, output_error

DAMAGED_NAME = "records.damaged.jsonl"


def line_sha(line: str) -> str:
    """The digest of one record line, without its newline."""
    return hashlib.sha256(line.encode("utf-8")).hexdigest()


def round_digest(shas: Iterable[str]) -> str:
    h = hashlib.sha256()
    for s in sorted(shas):
        h.update(s.encode("ascii"))
    return h.hexdigest()


def parse_line(line: str) -> RequestRecord:
    """One record line -> RequestRecord; ValueError says why it is not one."""
    try:
        d = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(d, dict):
        raise ValueError(f"not a record (a JSON {type(d).__name__})")
    try:
        return RequestRecord.from_dict(d)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise ValueError(f"not a record ({e})") from None


def round_of(rec: RequestRecord) -> tuple[PointKey, int]:
    return PointKey(rec.arm, rec.concurrency, rec.variant or ""), int(rec.repeat or 0)


@dataclass
class Good:
    lineno: int
    text: str  # without the newline
    record: RequestRecord


@dataclass
class Damaged:
    lineno: int
    text: str
    why: str


@dataclass
class FileScan:
    """One record file, line by line. ``torn`` is a last line without its newline that
    is not a whole record (what a crash mid-write leaves); it is also in ``damaged``."""

    path: Path
    good: list[Good] = field(default_factory=list)
    damaged: list[Damaged] = field(default_factory=list)
    torn: bool = False
    ends_without_newline: bool = False


def scan_file(path: Path) -> FileScan:
    out = FileScan(path)
    if not path.exists():
        return out
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        lines = f.readlines()
    for i, raw in enumerate(lines, 1):
        text = raw.rstrip("\n")
        if not text.strip():
            continue
        last = i == len(lines) and not raw.endswith("\n")
        out.ends_without_newline = out.ends_without_newline or last
        try:
            out.good.append(Good(i, text, parse_line(text)))
        except ValueError as e:
            out.damaged.append(Damaged(i, text, "cut short (a crash mid-write)" if last else str(e)))
            out.torn = out.torn or last
    return out


def damaged_entry(path: Path, d: Damaged) -> str:
    """A line of records.damaged.jsonl: the damaged text and where it was, as JSON (the
    text itself may not be JSON at all)."""
    return json.dumps({"file": path.name, "line": d.lineno, "why": d.why, "text": d.text}) + "\n"


def append_whole(path: Path, text: str, fsync: bool = False) -> None:
    """Append whole lines or nothing: a disk that fills part-way through is cut back to
    where it was, so the file keeps only complete records (and the cut frees the space).
    A full or read-only folder raises OutputError (exit 3)."""
    data = text.encode("utf-8")
    try:
        with open(path, "ab", buffering=0) as f:
            start = f.tell()
            try:
                view = memoryview(data)
                while view:
                    n = f.write(view)
                    if not n:  # a regular file never does this; do not spin if it does
                        raise OSError(errno.ENOSPC, "short write")
                    view = view[n:]
                if fsync:
                    os.fsync(f.fileno())
            except OSError:
                os.ftruncate(f.fileno(), start)
                raise
    except OSError as e:
        if e.errno in OUTPUT_ERRNOS:
            raise output_error(e, path) from None
        raise
