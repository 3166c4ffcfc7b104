"""Prometheus text-format parsing, the ``/metrics`` scrape and spec-decode counter deltas.

The runner scrapes ``/metrics`` around each point; the difference of the counters
gives the server's own acceptance figures, which :mod:`speedbench.metrics` compares
with the per-request ones (``al_agree``). Which series hold those counters is the
engine's to say (``Engine.spec_counters``; vLLM's names: engine/vllm/prometheus.py).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import asdict, dataclass, field
from collections.abc import Mapping

import aiohttp

from speedbench.errors import ServerError

Parsed = dict[str, list[tuple[dict[str, str], float]]]

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def _parse_labels(s: str, i: int) -> tuple[dict[str, str], int]:
    """Parse ``{a="x",b="y\\"z"}`` starting at ``s[i] == "{"``; returns labels and the
    index after ``}``. A hand-rolled scanner because label values may hold ``,``, ``}``
    and escaped quotes, which defeat a split or a simple regex."""
    labels: dict[str, str] = {}
    i += 1
    n = len(s)
    while i < n:
        while i < n and s[i] in " ,":
            i += 1
        if i < n and s[i] == "}":
            return labels, i + 1
        eq = s.index("=", i)
        name = s[i:eq].strip()
        i = s.index('"', eq) + 1
        buf: list[str] = []
        while s[i] != '"':
            if s[i] == "\\" and i + 1 < n:
                buf.append(_ESCAPES.get(s[i + 1], "\\" + s[i + 1]))
                i += 2
            else:
                buf.append(s[i])
                i += 1
        labels[name] = "".join(buf)
        i += 1
    raise ValueError("unterminated label set")


def _parse_value(tok: str) -> float:
    t = tok.strip()
    if t in ("+Inf", "Inf"):
        return math.inf
    if t == "-Inf":
        return -math.inf
    return float(t)  # handles NaN and exponents


def parse_prometheus(text: str, keep_created: bool = False) -> Parsed:
    """Sample name -> [(labels, value)]. ``# HELP``/``# TYPE`` lines, blank lines and
    (unless ``keep_created``) ``*_created`` samples (counter creation timestamps, not
    counts; an engine's ``spec_counters`` keeps them to see a counter reset) are dropped; lines
    that do not parse are skipped rather than failing a whole scrape."""
    out: Parsed = {}
    # "\n" only: str.splitlines() also splits at \x1c-\x1e, \x85 and \u2028, which a
    # label value may hold (found by tests/unit/client/test_properties.py).
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            brace = line.find("{")
            space = line.find(" ")
            if brace != -1 and (space == -1 or brace < space):
                name = line[:brace]
                labels, end = _parse_labels(line, brace)
                rest = line[end:].split()
            else:
                name, *rest = line.split()
                labels = {}
            if (name.endswith("_created") and not keep_created) or not rest:
                continue
            value = _parse_value(rest[0])  # rest[1], if any, is a timestamp
        except (ValueError, IndexError):
            continue
        out.setdefault(name, []).append((labels, value))
    return out


@dataclass
class SpecCounters:
    """Spec-decode counters summed over engines and label sets (an engine's
    ``spec_counters`` fills them from its own series).

    ``series`` keeps each counter series (one per engine with data parallelism, one per
    position) as ``key -> [value, created, field, position]`` so :func:`delta` can see a reset of one
    series; ``warnings`` says what :func:`delta` had to correct."""

    drafts: float = 0.0  # drafting steps
    draft_tokens: float = 0.0
    accepted: float = 0.0
    # per_position[i]: steps that accepted at least i+1 drafts (vLLM's per-position count)
    per_position: list[float] = field(default_factory=list)
    series: dict[str, list] = field(default_factory=dict)  # key -> [value, created, field, position]
    warnings: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return self.drafts == 0 and self.draft_tokens == 0 and self.accepted == 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> SpecCounters | None:
        if d is None:
            return None
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def series_key(base: str, labels: dict[str, str]) -> str:
    """One counter series' key in :attr:`SpecCounters.series`: its name and sorted labels."""
    return base + "{" + ",".join(f"{k}={labels[k]}" for k in sorted(labels)) + "}"


def fold_series(out: SpecCounters, per: dict[int, float], attr: str, pos: int | None, v: float) -> None:
    """Fold one series' value into the summed counters (per position for ``per_position``)."""
    if attr != "per_position":
        setattr(out, attr, getattr(out, attr) + v)
    elif pos is not None:
        per[pos] = per.get(pos, 0.0) + v


def by_position(per: dict[int, float]) -> list[float]:
    return [per.get(i, 0.0) for i in range(max(per) + 1)] if per else []


def counters_of(parsed: Parsed, names: Mapping[str, str]) -> SpecCounters:
    """Spec-decode totals from one parsed scrape, given which counter (by base name) is
    which field (``drafts``, ``draft_tokens``, ``accepted``, ``per_position``): the names
    are the engine's, the folding is not. Sums over engines and label sets and keeps each
    series for :func:`delta` (its ``_created`` time shows a reset)."""
    out = SpecCounters()
    per: dict[int, float] = {}
    for base, attr in names.items():
        created = {series_key(base, lab): v for lab, v in parsed.get(base + "_created", [])}
        # prometheus_client exposes counters as <name>_total; accept a bare name too
        for labels, v in parsed.get(base + "_total") or parsed.get(base) or []:
            key = series_key(base, labels)
            try:
                pos = int(labels["position"]) if attr == "per_position" else None
            except (KeyError, ValueError):
                continue  # a per-position sample without a usable position counts nowhere
            # [value, created, field, position]: what delta() needs, no key parsing
            out.series[key] = [v, created.get(key), attr, pos]
            fold_series(out, per, attr, pos, v)
    out.per_position = by_position(per)
    return out


def delta(before: SpecCounters, after: SpecCounters) -> SpecCounters:
    """Counts accumulated between two scrapes, series by series.

    A series whose ``_created`` time changed, or whose value went down, was reset in
    between (its engine restarted); its ``after`` value is then the count since that
    reset, which is the best available answer, and a warning says so. A series that
    appears only in ``after`` counts from zero. Without per-series data (counters
    saved by an older speedbench) the summed totals are compared instead."""
    if not before.series or not after.series:
        return _delta_totals(before, after)
    out = SpecCounters()
    per: dict[int, float] = {}
    resets: list[str] = []
    for key, (a, a_created, attr, pos) in after.series.items():
        b, b_created = before.series.get(key, (0.0, a_created))[:2]
        if (a_created is not None and b_created is not None and a_created != b_created) or a < b:
            resets.append(key)
            d = a
        else:
            d = a - b
        fold_series(out, per, attr, pos, d)
    out.per_position = by_position(per)
    gone = [k for k in before.series if k not in after.series]
    if resets:
        out.warnings.append(f"Prometheus counter reset during the point (engine restarted?) in {len(resets)} series, "
                            f"e.g. {resets[0]}; counted from the reset")
    if gone:
        out.warnings.append(f"{len(gone)} Prometheus series disappeared during the point, e.g. {gone[0]}")
    return out


def _delta_totals(before: SpecCounters, after: SpecCounters) -> SpecCounters:
    if after.drafts < before.drafts or after.accepted < before.accepted or after.draft_tokens < before.draft_tokens:
        return SpecCounters(drafts=after.drafts, draft_tokens=after.draft_tokens, accepted=after.accepted,
                            per_position=list(after.per_position),
                            warnings=["Prometheus counters went down during the point (server restart); counted from "
                                      "the reset"])
    n = max(len(before.per_position), len(after.per_position))
    b = before.per_position + [0.0] * (n - len(before.per_position))
    a = after.per_position + [0.0] * (n - len(after.per_position))
    return SpecCounters(
        drafts=after.drafts - before.drafts,
        draft_tokens=after.draft_tokens - before.draft_tokens,
        accepted=after.accepted - before.accepted,
        per_position=[x - y for x, y in zip(a, b)],
    )


async def scrape(target: str | aiohttp.ClientSession, base_url: str | None = None, timeout_s: float = 10.0) -> str:
    """GET ``/metrics`` text. ``target`` is a base URL, or a session used with
    ``base_url``. Raises :class:`ServerError` when the endpoint does not answer 200."""
    if isinstance(target, str):
        async with aiohttp.ClientSession() as session:
            return await scrape(session, target, timeout_s)
    if base_url is None:
        raise ValueError("scrape(session, base_url): base_url is required with a session")
    url = base_url.rstrip("/")
    if not url.endswith("/metrics"):
        url += "/metrics"
    try:
        async with target.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            text = await resp.text()
            if resp.status != 200:
                raise ServerError(f"GET {url} answered HTTP {resp.status}: {text[:200]}")
            return text
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        raise ServerError(f"GET {url} failed: {type(e).__name__}: {e}") from None


def add(a: SpecCounters | None, b: SpecCounters | None) -> SpecCounters | None:
    """The sum of two deltas (one per round of server starts); None + x = x."""
    if a is None or b is None:
        return a or b
    n = max(len(a.per_position), len(b.per_position))
    pos = [(a.per_position[i] if i < len(a.per_position) else 0.0)
           + (b.per_position[i] if i < len(b.per_position) else 0.0) for i in range(n)]
    return SpecCounters(drafts=a.drafts + b.drafts, draft_tokens=a.draft_tokens + b.draft_tokens,
                        accepted=a.accepted + b.accepted, per_position=pos, warnings=[*a.warnings, *b.warnings])
