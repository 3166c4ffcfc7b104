"""The summary side of sequential stopping: summary.json's ``stopping`` block (one entry
per stopped round), read from points.json, where the run wrote the intervals its last
look found when it decided to stop (stopping/point.py). The point's row widens its
speedup intervals to these same entries (metrics/formulas.py), so the block and the row
come from one computation (docs/metrics.md, "Sequential stopping"). Run folders written
before the intervals were kept have them recomputed from the records."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from speedbench.metrics.table import Requests
from speedbench.records import RequestRecord
from speedbench.stopping.looks import look_fields, point_looks, round_rows
from speedbench.stopping.schedule import look_level


def stopping_rows(records: Iterable[RequestRecord], points: dict, baseline: str | None,
                  alpha: float) -> list[dict[str, Any]]:
    """One entry per stopped round of a point (points.json entries carrying
    ``stop_reason``, typed: ``RunDir.rounds()``): why and after how many prompts it stopped, and the speedup (and AL)
    with its interval at the look level, as the run's last look found them. ``records``:
    a ``Requests`` (metrics/table.py) shares its request table, built only for an old folder."""
    requests = Requests.of(records)
    out = []
    for (key, rnd), p in sorted(points.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        if not p.stop_reason:
            continue
        n_looks = int(p.stop_looks or 1)
        level = look_level(alpha, n_looks)
        found = p.stop_intervals
        if found is None:  # an older run folder: the look is recomputed from its records
            table = requests.table
            base = round_rows(table, key._replace(arm=baseline), rnd) if baseline not in (None, key.arm) else None
            found = look_fields(point_looks(round_rows(table, key, rnd), base, level))
        out.append({"arm": key.arm, "concurrency": key.concurrency, "variant": key.variant, "repeat": rnd,
                    "reason": p.stop_reason, "prompts": p.stop_prompts, "look": p.stop_look,
                    "n_looks": n_looks, "level": level, **{k: _number(v) for k, v in found.items()}})
    return out


def _number(v: Any) -> float:
    """A stored interval end: null (unbounded, or none) reads as NaN, as a recomputed one."""
    return float(v) if v is not None else math.nan
