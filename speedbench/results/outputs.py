"""Each round's output tokens, kept beside the records for the output check (docs/results.md).

A round of a point writes one file, ``outputs/<arm>/c<C>[-<variant>].r<R>.npz``, when it
ends: every measured request that finished well and whose stream carried token ids, as
numpy arrays (compressed): ``prompt_index``, ``turn``, ``lengths`` and all the ids end to
end (``uint16`` when every id fits, else ``uint32``). The prompts' ids as the server
tokenised them go in too (``prompt_lengths``, ``prompt_ids``), for the check pass. The
round's entry in points.json holds the file's name, its request and token counts and its
SHA-256 (read back as :class:`OutputsFile`), so ``verify`` can check it and ``resume``
re-runs a round whose file is missing or changed. Text (for an engine that sends no ids) is already in the record lines
(``output_text``).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from speedbench.metrics.stored import StoredRow
from speedbench.records import PointKey, RequestRecord
from speedbench.results.files import atomic_write_with, safe_part

FOLDER = "outputs"
Outputs = dict[tuple[int, int], np.ndarray]  # (prompt index, turn) -> the output's token ids


@dataclass(frozen=True)
class OutputsFile(StoredRow):
    """A round's ``outputs`` entry in points.json (:func:`write_round`): its file, counts and
    SHA-256; or, for a round whose stream carried no token ids, no file and why."""

    file: str | None = None
    requests: int | None = None
    tokens: int | None = None
    bytes: int | None = None
    sha256: str | None = None
    why: str | None = None


RoundFiles = dict[tuple[PointKey, int], OutputsFile | None]  # (point, round) -> its outputs entry


def round_files(rounds: Mapping[tuple[PointKey, int], Any]) -> RoundFiles:
    """Each round's ``outputs`` entry (points.json's rounds, typed: RunDir.rounds), read
    once; None for a round that has none (a folder from before outputs were kept)."""
    return {k: outputs_file(e.outputs) for k, e in rounds.items()}


def outputs_file(own: Any) -> OutputsFile | None:
    """A points.json entry's ``outputs`` value, typed; None where it is missing or empty."""
    return OutputsFile.from_dict(own) if isinstance(own, Mapping) and own else None


def relative_path(key: PointKey, repeat: int) -> str:
    arm, c, variant = key
    tail = f"-{safe_part(variant)}" if variant else ""
    return f"{FOLDER}/{safe_part(arm)}/c{int(c)}{tail}.r{int(repeat)}.npz"


def _kept(records: Iterable[RequestRecord]) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    out: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for r in records:
        if r.warmup or not r.ok or not r.output_ids:
            continue
        out.setdefault((r.prompt_index, r.turn), (np.asarray(r.output_ids, dtype=np.int64),
                                                   np.asarray(r.prompt_ids or [], dtype=np.int64)))
    return out


def _ends(seqs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, all ids end to end) in the narrowest unsigned type that holds them."""
    ids = np.concatenate(seqs) if seqs else np.zeros(0, dtype=np.int64)
    dtype = np.uint16 if ids.size == 0 or (ids.min() >= 0 and ids.max() < 1 << 16) else np.uint32
    return np.asarray([len(s) for s in seqs], dtype=np.int32), ids.astype(dtype)


def encode(kept: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]) -> bytes:
    """The prompts' ids go in too: the check pass at the run's end (or a resumed run's)
    sends them back to the baseline's server."""
    keys = sorted(kept)
    lengths, ids = _ends([kept[k][0] for k in keys])
    prompt_lengths, prompt_ids = _ends([kept[k][1] for k in keys])
    buf = io.BytesIO()
    np.savez_compressed(buf, prompt_index=np.asarray([k[0] for k in keys], dtype=np.int32),
                        turn=np.asarray([k[1] for k in keys], dtype=np.int16), lengths=lengths, ids=ids,
                        prompt_lengths=prompt_lengths, prompt_ids=prompt_ids)
    return buf.getvalue()


def _split(lengths: np.ndarray, ids: np.ndarray) -> list[np.ndarray]:
    ends = np.cumsum(lengths)
    return [ids[a:b].astype(np.int64) for a, b in zip(ends - lengths, ends)]


def decode(data: bytes, prompts: bool = False) -> Outputs:
    """{(prompt index, turn): output ids}, or with ``prompts`` the prompts' ids."""
    with np.load(io.BytesIO(data)) as z:
        keys = list(zip(z["prompt_index"].tolist(), z["turn"].tolist()))
        seqs = _split(z["prompt_lengths"], z["prompt_ids"]) if prompts else _split(z["lengths"], z["ids"])
    return dict(zip(keys, seqs))


def write_round(root: Path, key: PointKey, repeat: int, records: Iterable[RequestRecord],
                fsync: bool = False) -> dict[str, Any]:
    """Write the round's file; returns its entry for points.json (``outputs``). A round whose
    stream carried no token ids writes nothing and says so."""
    outputs = _kept(records)
    if not outputs:
        return {"requests": 0, "why": "no token ids in the stream"}
    data = encode(outputs)
    rel = relative_path(key, repeat)
    atomic_write_with(root / rel, lambda f: f.write(data), fsync)
    return {"file": rel, "requests": len(outputs), "tokens": int(sum(len(v[0]) for v in outputs.values())),
            "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def read_round(root: Path, entry: OutputsFile | None, prompts: bool = False) -> Outputs | None:
    """A round's outputs (or with ``prompts`` its prompts' ids) from its points.json entry;
    None when it has none or the file is missing or damaged (verify names which)."""
    if entry is None or not entry.file:
        return None
    try:
        return decode((root / entry.file).read_bytes(), prompts)
    except (OSError, ValueError, KeyError, EOFError):
        return None


def problem(root: Path, entry: OutputsFile | None) -> str | None:
    """What is wrong with a round's outputs file, or None (verify's and resume's check)."""
    if entry is None or not entry.file:
        return None
    try:
        data = (root / entry.file).read_bytes()
    except OSError:
        return f"{entry.file} is missing"
    if hashlib.sha256(data).hexdigest() != entry.sha256:
        return f"{entry.file} does not match its SHA-256 in points.json"
    return None


CHECKS = f"{FOLDER}/checks.json"  # the check pass's answers, every arm's (run/output_check.py)


def reference(key: PointKey, baseline: str | None, points: list[PointKey]) -> PointKey | None:
    """The point ``key``'s outputs are held against: the baseline's point at the same load;
    for the baseline's own points, its lowest concurrency on the same workload."""
    if not baseline:
        return None
    if key.arm != baseline:
        return key._replace(arm=baseline)
    same = [k.concurrency for k in points if k.arm == baseline and k.variant == key.variant]
    low = min(same, default=key.concurrency)
    return None if key.concurrency == low else key._replace(concurrency=low)


def reference_round(found: RoundFiles, ref: PointKey, repeat: int) -> int | None:
    """The reference's round to compare with: the same round where there is one, else its first."""
    have = sorted(r for (k, r), f in found.items() if k == ref and f is not None and f.file)
    if not have:
        return None
    return repeat if repeat in have else have[0]


def round_pair(root: Path, found: RoundFiles, key: PointKey, repeat: int,
               ref: PointKey) -> tuple[Outputs | None, Outputs | None, str]:
    """(a round's outputs, its reference's, why one is missing: "" when both are there); the
    one pairing the summary's verdicts and the check pass both read (``found``: :func:`round_files`)."""
    own = found.get((key, repeat))
    if own is None:
        return None, None, "not recorded"
    if not own.file:
        return None, None, own.why or "not recorded"
    rr = reference_round(found, ref, repeat)
    if rr is None:
        return None, None, f"{ref.label} has no recorded outputs"
    mine, theirs = read_round(root, own), read_round(root, found[(ref, rr)])
    if mine is None or theirs is None:
        return None, None, "an outputs file is missing or damaged (speedbench verify names it)"
    return mine, theirs, ""
