"""The verdict block that opens the dashboard, and the same verdicts as text and JSON for
``speedbench changes``: per scenario the counts, then one line per item that is not
"no change".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from speedbench.analysis.changepoints import SUSPICIOUS
from speedbench.report import acknowledged, html
from speedbench.report.nightly import INSUFFICIENT, NO_CHANGE, STATUSES, Verdict, counts, describe

_CLASS = {"regression": "v-reg", "improvement": "v-imp", "suspicious": "v-sus"}


def _pill(status: str) -> html.Safe:
    return html.Safe(f'<span class="pill {_CLASS.get(status, "")}">{html.esc(status)}</span>')


def by_scenario(vs: Sequence[Verdict]) -> dict[str, list[Verdict]]:
    out: dict[str, list[Verdict]] = {}
    for v in vs:
        out.setdefault(v.series.scenario, []).append(v)
    return out


def _interval(mean: float, hw: float) -> str:
    digits = 3 if abs(mean) < 10 else 1
    return f"{mean:.{digits}f}" + (f" ±{hw:.{digits}f}" if math.isfinite(hw) else "")


def _row(v: Verdict, link: Callable[[Any], str | None]) -> list[Any]:
    ch = v.change
    assert ch is not None  # only changes get a row
    size = f"{100 * ch.relative:+.1f}% · " + ("≫" if math.isinf(ch.sigmas) else f"{ch.sigmas:.1f}") + " sd"
    if math.isfinite(v.floor_rel):
        size += f" (floor ±{100 * v.floor_rel:.1f}%)"
    runs = []
    for name, night in (("before", v.before), ("after", v.after)):
        href = link(night.run) if night else None
        runs.append(f'<a href="{html.esc(href)}">{name}</a>' if href else name)
    return [_pill(v.status), f"{v.series.metric} {v.series.point}",
            f"{_interval(ch.before, ch.before_hw)} → {_interval(ch.after, ch.after_hw)}", size,
            html.Safe(" · ".join(runs))]


def _groups(changes: list[Verdict]) -> dict[tuple[str, str, tuple[str, ...]], list[Verdict]]:
    """Changes of one checkpoint that began the same night with the same provenance
    difference: one heading (what changed), then one line per figure."""
    out: dict[tuple[str, str, tuple[str, ...]], list[Verdict]] = {}
    for v in changes:
        began = f"{v.began:%Y-%m-%d}" if v.began else "–"
        out.setdefault((v.checkpoint, began, tuple(v.what_changed)), []).append(v)
    return out


def block(vs: Sequence[Verdict], link: Callable[[Any], str | None]) -> str:
    """``link(run)``: the href of a run's report in the site, or None."""
    parts = []
    for scen, items in by_scenario(vs).items():
        n = counts(items)
        line = " · ".join(f"<b>{n[s]}</b> {html.esc(s)}" for s in STATUSES)
        inner = f'<div class="counts">{line}</div>'
        for (ck, began, why), group in _groups([v for v in items if v.status not in (NO_CHANGE, INSUFFICIENT)]).items():
            said = "; ".join(why) or "nothing in the provenance"
            inner += (f'<p class="why"><b>{html.esc(ck)}</b> from {html.esc(began)} · what changed: '
                      f"{html.esc(said)}</p>")
            inner += html.table(["verdict", "figure", "before → after (95%)", "size vs noise", "reports"],
                                [_row(v, link) for v in group], left=2)
        parts.append(html.card(html.Safe(inner), f"Last night · {scen}"))
    return ('<section id="verdict"><h2>Did anything change?</h2>' + acknowledged.block(vs) + "".join(parts)
            + "</section>")


def text_lines(vs: Sequence[Verdict]) -> list[str]:
    """Counts per scenario, then per change (checkpoint, night, what changed) its figures."""
    lines = acknowledged.text_lines(vs)
    for scen, items in by_scenario(vs).items():
        n = counts(items)
        lines.append(f"{scen}: " + ", ".join(f"{n[s]} {s}" for s in STATUSES))
        for (ck, began, why), group in _groups([v for v in items if v.status not in (NO_CHANGE, INSUFFICIENT)]).items():
            lines.append(f"  {ck} from {began}: what changed: " + ("; ".join(why) or "nothing in the provenance"))
            lines += [f"    {v.status.upper()}: {describe(v)}" for v in group]
    return lines


def as_json(vs: Sequence[Verdict]) -> list[dict[str, Any]]:
    out = []
    for v in vs:
        ch = v.change
        item: dict[str, Any] = {"scenario": v.series.scenario, "arm": v.series.arm, "checkpoint": v.checkpoint,
                                "metric": v.series.metric, "point": v.series.point, "status": v.status}
        if ch is not None:
            item.update(before=ch.before, after=ch.after, before_half_width=_finite(ch.before_hw),
                        after_half_width=_finite(ch.after_hw), relative=ch.relative,
                        noise_sd=ch.noise_sd, sigmas=_finite(ch.sigmas), nights=ch.nights,
                        baseline_nights=ch.baseline_nights,
                        began=v.began.isoformat() if v.began else None,
                        before_run=v.before.run.run_id if v.before else None,
                        after_run=v.after.run.run_id if v.after else None,
                        floor_rel=_finite(v.floor_rel), what_changed=v.what_changed)
        if v.open is not None:
            op = v.open
            item["open_regression"] = {"since": op.began.created.isoformat(), "nights": op.nights,
                                       "before": op.change.before, "after": op.change.after,
                                       "relative": op.change.relative, "acknowledged": op.acknowledged or None}
        out.append(item)
    return out


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def exit_code(vs: Sequence[Verdict], strict: bool = False) -> int:
    """1 for an open, unacknowledged regression (whatever its age), and with ``strict`` for a
    suspicious last night too; 0 otherwise."""
    if acknowledged.unacknowledged(vs):
        return 1
    return 1 if strict and any(v.status == SUSPICIOUS for v in vs) else 0
