"""Open regressions: listed first by the dashboard and ``speedbench changes`` until they
recover, whatever their age, unless acknowledged with a reason in a plain file under the
results folder, ``RESULTS_DIR/acknowledged.yaml``::

    - series: eagle3 speedup c=4     # "arm figure point" as the verdicts print it, or its
                                     # first words ("eagle3": every figure of the arm)
      scenario: cpu_tiny             # optional: every scenario when left out
      since: 2026-11-12              # the night the regression began (a later one is news again)
      reason: vLLM 0.33 trades c=4 speed for memory; accepted in #812

An acknowledged regression stays listed (with its reason) but no longer makes
``speedbench changes`` exit 1.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from speedbench.report import html
from speedbench.report.nightly import OpenRegression, Verdict

ACK_FILE = "acknowledged.yaml"


@dataclass(frozen=True)
class Ack:
    series: str
    since: dt.date
    reason: str
    scenario: str = ""

    def covers(self, v: Verdict) -> bool:
        s, op = v.series, v.open
        if op is None or (self.scenario and self.scenario != s.scenario):
            return False
        label = f"{s.arm} {s.metric} {s.point}"
        named = label == self.series or label.startswith(self.series + " ")
        return named and op.began.created.date() == self.since


def _entry(item: object) -> Ack:
    if not isinstance(item, dict):
        raise ValueError("each entry is a mapping with series, since and reason")
    series, reason = str(item.get("series") or "").strip(), str(item.get("reason") or "").strip()
    since = item.get("since")
    if not series or not reason or since is None:
        raise ValueError("series, since and reason are all required")
    day = since if isinstance(since, dt.date) else dt.date.fromisoformat(str(since))
    return Ack(series, day, reason, str(item.get("scenario") or ""))


def load(results_dir: str | Path) -> tuple[list[Ack], list[str]]:
    """The acknowledgements under results_dir, and a problem line for each entry that cannot
    be read (it acknowledges nothing)."""
    path = Path(results_dir) / ACK_FILE
    if not path.is_file():
        return [], []
    try:
        items = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except (OSError, yaml.YAMLError) as e:
        return [], [f"{path}: not read: {e}"]
    if not isinstance(items, list):
        return [], [f"{path}: expected a list of entries"]
    acks, problems = [], []
    for i, item in enumerate(items):
        try:
            acks.append(_entry(item))
        except (ValueError, TypeError) as e:
            problems.append(f"{path}: entry {i + 1} ignored: {e}")
    return acks, problems


def apply(vs: Sequence[Verdict], acks: Sequence[Ack]) -> None:
    for v in vs:
        if v.open is not None:
            ack = next((a for a in acks if a.covers(v)), None)
            v.open.acknowledged = ack.reason if ack else ""


def open_items(vs: Sequence[Verdict]) -> list[Verdict]:
    """Series with an open regression: unacknowledged first, then the oldest first."""
    out = [v for v in vs if v.open is not None]
    return sorted(out, key=lambda v: (bool(_op(v).acknowledged), _op(v).began.created))


def _op(v: Verdict) -> OpenRegression:
    assert v.open is not None
    return v.open


def unacknowledged(vs: Sequence[Verdict]) -> list[Verdict]:
    return [v for v in open_items(vs) if not _op(v).acknowledged]


def describe_open(v: Verdict) -> str:
    """``eagle3 speedup c=4: open since 2026-10-11, 20 nights, −15.0% (1.710 → 1.453)``."""
    op, s = _op(v), v.series
    ch = op.change
    size = f"{100 * ch.relative:+.1f}%".replace("-", "−") if math.isfinite(ch.relative) else "?"
    digits = 3 if abs(ch.before) < 10 else 1
    nights = "1 night" if op.nights == 1 else f"{op.nights} nights"
    head = (f"{s.arm} {s.metric} {s.point}: open since {op.began.created:%Y-%m-%d}, {nights}, {size} "
            f"({ch.before:.{digits}f} → {ch.after:.{digits}f})")
    return head + (f" · acknowledged: {op.acknowledged}" if op.acknowledged else "")


def text_lines(vs: Sequence[Verdict]) -> list[str]:
    items = open_items(vs)
    if not items:
        return []
    n = len(unacknowledged(vs))
    lines = [f"OPEN REGRESSIONS: {n} unacknowledged, {len(items) - n} acknowledged"]
    return lines + [f"  {v.series.scenario} · {describe_open(v)}" for v in items]


def block(vs: Sequence[Verdict]) -> str:
    """The dashboard's first card: every open regression, unacknowledged first."""
    items = open_items(vs)
    if not items:
        return ""
    rows = [[html.pill("acknowledged") if _op(v).acknowledged else html.pill("open"), v.series.scenario,
             v.checkpoint, describe_open(v)] for v in items]
    note = (f'<p class="muted">Regressions called and not recovered, whatever their age; acknowledge one with a '
            f"reason in RESULTS/{ACK_FILE}.</p>")
    return html.card(html.Safe(note + html.table(["", "scenario", "checkpoint", "open regression"], rows, left=4)),
                     "Open regressions", "warn" if unacknowledged(vs) else "")
