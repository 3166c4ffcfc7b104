"""Per request: records -> one table row each, and the pooled inter-token latencies."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from speedbench.metrics.numbers import NAN
from speedbench.records import RequestRecord

# A client-side decode window shorter than this share of the engine's generation time is
# delivery, not decoding: the client cannot see tokens arrive faster than the engine made
# them, so the API server held the first tokens back and sent the rest together. Over
# 2,405 requests of four CPU runs, 90% read within 5% of the engine, and the short tail
# ran down to 1% of it with no gap to set the line in; at under half, the client's TPS
# is more than twice the engine's and says nothing about decoding.
COMPRESSED_WINDOW = 0.5

COLUMNS = [  # the request table's columns, in order (metrics may use them by name)
    "arm", "concurrency", "variant", "repeat", "prompt_index", "prompt_id", "turn", "category", "warmup",
    "error", "ok", "n_out", "n_chunks", "n_reads", "burst", "engine_tps", "engine_ttft_ms", "ttft_ms", "e2e_s",
            "decode_s", "tpot_ms", "per_user_tps", "lag_ms", "tps_lag_low", "tps_lag_high",
    "per_user_e2e_tps", "queue_wait_ms", "t_sent_ns", "t_end_ns", "spec_steps", "spec_accepted",
    "spec_draft_tokens", "spec_hist", "has_spec", "spec_malformed", "spec_overcount",
]


def request_table(records: Iterable[RequestRecord]) -> pd.DataFrame:
    """One row per record. Times: ttft_ms, tpot_ms, queue_wait_ms in ms; e2e_s, decode_s
    in s. NaN where undefined (no token; fewer than 2 tokens; all tokens in one chunk).

    ``n_reads``: the socket reads the output tokens arrived in (distinct arrival stamps).
    ``burst``: an ok request with at least 2 tokens that all arrived in one read, or
    (with engine timing) whose client-side decode window was under ``COMPRESSED_WINDOW``
    of the engine's generation time; its client-side TPS (``per_user_tps``) is undefined
    (the server delivered the output in one go, or nearly).
    ``engine_tps``: ``(n - 1) / generation_ms`` from the engine's own per-request timing
    (NaN without it).
    ``lag_ms``: the client's event-loop lag while the request was in flight (NaN where
    not recorded). ``tps_lag_low`` / ``tps_lag_high``: the per-user TPS were the decode
    window longer / shorter by that lag, the range its true value lies in when the first
    and last stamps are each late by at most ``lag_ms`` (inf when the lag is as long as the
    window; both equal ``per_user_tps`` without a recorded lag). See metrics/lag.py."""
    return pd.DataFrame([{**_timing_cells(r), **_spec_cells(r)} for r in records], columns=COLUMNS)


class Requests:
    """A run's records and their request table, built once on first use and shared by every
    reader of the same records (a run's finish builds it once: the summary's rows, noise
    floor, categories and stopping, then the report's prompt tables). Iterating it gives
    the records, so it goes wherever a list of records does."""

    def __init__(self, records: Iterable[RequestRecord]):
        self.records = list(records)

    @classmethod
    def of(cls, records: Iterable[RequestRecord]) -> Requests:
        """``records`` as Requests: the same object when it is one (its table is shared)."""
        return records if isinstance(records, Requests) else cls(records)

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    @cached_property
    def table(self) -> pd.DataFrame:
        """:func:`request_table` of every record, warmup included."""
        return request_table(self.records)

    def where(self, keep: Callable[[pd.DataFrame], pd.Series]) -> pd.DataFrame:
        """The table's rows where ``keep(table)`` holds, as :func:`request_table` builds
        them from those records alone: the same rows, in the same order, and with none,
        the untyped empty table (its sums and means are what a reader always got)."""
        rows = self.table[keep(self.table).astype(bool)]
        return rows if len(rows) else request_table([])


def _timing_cells(r: RequestRecord) -> dict[str, Any]:
    """One record's identity, times and throughput cells."""
    n = r.n_output
    first = r.chunk_ns[0] if r.chunk_ns else None
    last = r.chunk_ns[-1] if r.chunk_ns else None
    decode_ns = (last - first) if first is not None and last is not None else 0
    timed = n >= 2 and decode_ns > 0  # (n-1)/(t_last-t_first) needs both
    e2e = (r.t_end_ns - r.t_sent_ns) / 1e9 if r.t_end_ns and r.t_sent_ns else NAN
    n_reads = len(set(r.chunk_ns))
    eng = r.engine
    gen_ms = eng.generation_ms if eng is not None else None
    compressed = bool(gen_ms) and decode_ns / 1e6 < COMPRESSED_WINDOW * (gen_ms or 0.0)
    burst = r.error is None and n >= 2 and (n_reads == 1 or compressed)
    tps = (n - 1) / (decode_ns / 1e9) if timed and not burst else NAN
    lag_ns = r.loop_lag_ns or 0
    return {
        "arm": r.arm, "concurrency": r.concurrency, "variant": r.variant, "repeat": r.repeat,
        "prompt_index": r.prompt_index, "prompt_id": r.prompt_id, "turn": r.turn,
        "category": r.category, "warmup": r.warmup, "error": r.error, "ok": r.error is None,
        "n_out": n, "n_chunks": len(r.chunk_ns), "n_reads": n_reads,
        "burst": burst,
        "engine_tps": (n - 1) / (gen_ms / 1e3) if gen_ms and n >= 2 else NAN,
        "engine_ttft_ms": eng.ttft_ms if eng is not None and eng.ttft_ms is not None else NAN,
        "ttft_ms": (first - r.t_sent_ns) / 1e6 if first is not None else NAN,
        "e2e_s": e2e,
        "decode_s": decode_ns / 1e9 if first is not None else NAN,
        "tpot_ms": decode_ns / (n - 1) / 1e6 if timed else NAN,
        "per_user_tps": tps,
        "lag_ms": r.loop_lag_ns / 1e6 if r.loop_lag_ns is not None else NAN,
        "tps_lag_low": (n - 1) / ((decode_ns + lag_ns) / 1e9) if math.isfinite(tps) else NAN,
        "tps_lag_high": ((n - 1) / ((decode_ns - lag_ns) / 1e9) if decode_ns > lag_ns else math.inf)
        if math.isfinite(tps) else NAN,
        "per_user_e2e_tps": n / e2e if e2e and e2e > 0 else NAN,
        "queue_wait_ms": (r.t_sent_ns - r.t_queued_ns) / 1e6 if r.t_queued_ns else NAN,
        "t_sent_ns": r.t_sent_ns, "t_end_ns": r.t_end_ns,
    }


def _spec_cells(r: RequestRecord) -> dict[str, Any]:
    """One record's per-request spec-decode cells."""
    sp = r.spec
    return {
        "spec_steps": sp.num_spec_steps if sp else 0,
        "spec_accepted": sp.num_accepted_tokens if sp else 0,
        "spec_draft_tokens": sp.num_draft_tokens if sp else 0,
        "spec_hist": list(sp.acceptance_histogram) if sp else [],
        "has_spec": sp is not None and sp.num_spec_steps > 0,
        "spec_malformed": r.spec_error is not None,
        # Tokens the server's counters imply (the prefill token, then 1 + accepted
        # per step) minus the tokens delivered: > 0 when EOS or max_tokens cut a
        # step inside its accepted drafts, which vLLM still counts as accepted.
        "spec_overcount": (1 + sp.num_spec_steps + sp.num_accepted_tokens - r.n_output)
        if sp is not None and sp.num_spec_steps > 0 and r.output_tokens is not None else 0,
    }


def itl_values(records: Iterable[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Pooled inter-token latencies in ms. Inter-chunk: every gap between consecutive
    token chunks. Per-token: each gap divided by the tokens of the later chunk and
    counted once per such token (token-weighted), so a 3-token chunk after 30 ms gives
    three 10 ms values."""
    chunk: list[np.ndarray] = []
    token: list[np.ndarray] = []
    for r in records:
        if len(r.chunk_ns) < 2:
            continue
        gaps = np.diff(np.asarray(r.chunk_ns, dtype=np.int64)) / 1e6
        n = np.asarray(r.chunk_tokens[1:], dtype=np.int64)
        chunk.append(gaps)
        token.append(np.repeat(gaps / np.maximum(n, 1), np.maximum(n, 1)))

    def cat(xs: list) -> np.ndarray:
        return np.concatenate(xs) if xs else np.empty(0)

    return cat(chunk), cat(token)
