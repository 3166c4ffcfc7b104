"""Synthetic nightly histories made from real CPU run folders (tests/data/nightly/<dtype>/:
the summary, provenance and resolved scenario of one real vLLM CPU run of cpu_tiny).

Each night is the real run with its noise replaced: every figure the verdicts read
(speedup and its interval, per-user TPS, AL pooled and per category, per-position
acceptance) is multiplied by ``1 + sd · N(0, 1)``, drawn independently per night and per
figure, and each night's own 95% interval is set to what that noise implies (a
within-run share of 60-90% of it). The real run's own intervals (±15-30% on two shared
CPU cores) would hide every step this generator plants; what the generator keeps from
the real run is its structure: arms, points, categories, positions, provenance.

Plants, each on one arm from a given night on:
- a step in speedup (and so in the arm's per-user TPS) or in AL (pooled, per category);
- a slow drift (a relative change reached linearly over the rest of the history);
- a provenance change with it (e.g. a new vLLM version, another draft's provenance);
- a swap: from that night on the arm's rows, categories and provenance are another arm's
  of the same real run (the eagle3.1 slot loading the untrained draft).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REAL = Path(__file__).resolve().parent.parent / "data" / "nightly"
START = dt.datetime(2026, 11, 1, 2, 0, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class Plant:
    arm: str
    night: int  # first night with the change
    metric: str = "speedup"  # "speedup" or "al"
    size: float = -0.05  # relative change (negative: worse)
    drift: bool = False  # reached linearly by the last night instead of at once
    provenance: dict[str, Any] = field(default_factory=dict)  # provenance keys changed from that night
    swap_with: str = ""  # take this arm's rows and provenance from that night on


def real_run(dtype: str = "float16") -> tuple[dict[str, Any], dict[str, Any], str]:
    folder = REAL / dtype
    return (json.loads((folder / "summary.json").read_text()), json.loads((folder / "provenance.json").read_text()),
            (folder / "scenario.resolved.yaml").read_text())


def _factor(plant: Plant, night: int, nights: int) -> float:
    if night < plant.night:
        return 1.0
    if not plant.drift:
        return 1.0 + plant.size
    return 1.0 + plant.size * (night - plant.night + 1) / max(nights - plant.night, 1)


def _swap(summary: dict[str, Any], prov: dict[str, Any], arm: str, other: str) -> None:
    """The arm's slot carries the other arm's measurements and provenance."""
    for key in ("rows", "categories"):
        mine = [r for r in summary[key] if r.get("arm") == other]
        summary[key] = [r for r in summary[key] if r.get("arm") != arm]
        summary[key] += [{**copy.deepcopy(r), "arm": arm} for r in mine]
    prov[arm] = {**copy.deepcopy(prov[other]), "arm": arm}


def _noisy_rows(summary: dict[str, Any], rng, sd: float, speed: dict[str, float], al: dict[str, float]) -> None:
    def jitter() -> float:
        return 1.0 + sd * rng.normal()

    for r in summary["rows"]:
        arm, spec = r["arm"], r.get("speedup_mean") is not None
        s_fac = speed.get(arm, 1.0)
        if spec:
            value = r["speedup_mean"] * jitter() * s_fac
            hw = 1.96 * sd * value * rng.uniform(0.6, 0.9)
            r.update(speedup_mean=value, speedup_ci_low=value - hw, speedup_ci_high=value + hw)
        if r.get("per_user_tps_mean") is not None:
            r["per_user_tps_mean"] *= jitter() * s_fac
        for key in ("al_tokens", "al_requests"):
            if r.get(key) is not None:
                r[key] *= al.get(arm, 1.0)
        if r.get("per_position_joint"):
            # not clipped at 1: a clipped figure's nights pile up on 1.0 and fake a tiny spread
            r["per_position_joint"] = [p * jitter() * al.get(arm, 1.0) for p in r["per_position_joint"]]
    al_night = {arm: jitter() for arm in {r["arm"] for r in summary["rows"]}}  # AL: one draw per arm and night
    for r in summary["rows"]:
        for key in ("al_tokens", "al_requests"):
            if r.get(key) is not None:
                r[key] *= al_night[r["arm"]]
    for c in summary["categories"]:
        for key in ("al_tokens", "al_requests"):
            if c.get(key) is not None:
                c[key] *= al.get(c["arm"], 1.0) * jitter()


def night(summary: dict[str, Any], prov: dict[str, Any], i: int, nights: int, plants: list[Plant], rng,
          sd: float) -> tuple[dict[str, Any], dict[str, Any]]:
    s, p = copy.deepcopy(summary), copy.deepcopy(prov)
    speed: dict[str, float] = {}
    al: dict[str, float] = {}
    for plant in plants:
        if plant.swap_with and i >= plant.night:
            _swap(s, p, plant.arm, plant.swap_with)
        target = speed if plant.metric == "speedup" else al
        target[plant.arm] = target.get(plant.arm, 1.0) * _factor(plant, i, nights)
        if plant.provenance and i >= plant.night:
            for arm in ([plant.arm] if plant.provenance.get("_arm_only") else list(p)):
                p[arm].update({k: v for k, v in plant.provenance.items() if not k.startswith("_")})
    _noisy_rows(s, rng, sd, speed, al)
    return s, p


@dataclass(frozen=True)
class Nights:
    """The history's source run and folders: ``dtype`` picks the real run it starts from;
    ``report``: each folder with a small report.html of its own (the dashboard copies it
    instead of rendering one)."""

    dtype: str = "float16"
    scenario: str = "cpu_tiny"
    start: dt.datetime = START
    report: bool = True


def write_history(root: str | Path, nights: int = 30, plants: list[Plant] | tuple[Plant, ...] = (), sd: float = 0.015,
                  seed: int = 0, **options: Any) -> list[Path]:
    """``nights`` run folders under root/scenario/, one a day from ``start``; ``options``:
    :class:`Nights` fields."""
    o = Nights(**options)
    dtype, scenario, start, report = o.dtype, o.scenario, o.start, o.report
    summary, prov, resolved = real_run(dtype)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(nights):
        s, p = night(summary, prov, i, nights, list(plants), rng, sd)
        created = start + dt.timedelta(days=i)
        run_id = f"{created:%Y%m%dT%H%M%SZ}-{seed % 0xFFFFFF:06x}"
        s.update(scenario=scenario, run_id=run_id, created_utc=created.isoformat())
        folder = Path(root) / scenario / run_id
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps(s))
        (folder / "provenance.json").write_text(json.dumps(p))
        text = resolved.replace("name: cpu_tiny", f"name: {scenario}", 1)
        for plant in plants:  # a swapped slot's resolved scenario names the draft it loaded
            if plant.swap_with and i >= plant.night:
                text = text.replace(f"model: {prov[plant.arm]['draft']['model']}\n",
                                    f"model: {prov[plant.swap_with]['draft']['model']}\n")
        (folder / "scenario.resolved.yaml").write_text(text)
        if report:
            (folder / "report.html").write_text(f"<!DOCTYPE html>\n<html><head><title>{run_id}</title></head>"
                                                f"<body><p>synthetic night {i}</p></body></html>\n")
        out.append(folder)
    return out


# ---- scoring the detector over generated histories ----------------------------------

PLANTED_METRICS = {"speedup": ("speedup", "per-user TPS"), "al": ("AL", "acceptance (joint)")}


def load_nights(folders: list[Path]):
    from speedbench.report.nightly import Night
    from speedbench.results.loader import load_run

    runs = [load_run(f) for f in folders]
    return [Night(dt.datetime.fromisoformat(r.created_utc), r) for r in runs]


@dataclass
class Score:
    planted: int = 0  # planted series with a step of at least 3 night-to-night sd
    found: int = 0  # of those, a regression/improvement in the right direction within a night of the plant
    planted_small: int = 0  # planted series with a smaller step
    found_small: int = 0
    series_nights: int = 0  # of the no-change histories
    false_regressions: int = 0
    false_calls: int = 0  # any call (either direction, suspicious too) on the no-change histories
    drifts: int = 0
    drifts_called: int = 0

    @property
    def recall(self) -> float:
        return self.found / self.planted if self.planted else float("nan")

    @property
    def false_regressions_per_100(self) -> float:
        return 100 * self.false_regressions / self.series_nights if self.series_nights else float("nan")


def _planted(series, plants: list[Plant]) -> Plant | None:
    for p in plants:
        if series.deps[0] == p.arm and series.metric in PLANTED_METRICS[p.metric]:
            return p
    return None


def score_history(score: Score, root: Path, plants: list[Plant], seed: int, nights: int = 30,
                  sd: float = 0.015) -> None:
    from speedbench.analysis.changepoints import IMPROVEMENT, REGRESSION
    from speedbench.report import nightly

    folder = root / f"h{seed}"
    ns = load_nights(write_history(folder, nights, plants, sd=sd, seed=seed))
    for s in nightly.collect("cpu_tiny", ns):
        found, idx, _ = nightly.changes(s)
        plant = _planted(s, plants)
        if plant is None:
            if not plants:
                score.series_nights += len(s.values)
                score.false_regressions += sum(c.kind == REGRESSION for c in found)
                score.false_calls += len(found)
            continue
        if plant.drift:
            score.drifts += 1
            score.drifts_called += any(c.kind == REGRESSION for c in found)
            continue
        base = np.array(s.values[:plant.night])
        spread = float(np.std(base, ddof=1))
        if spread == 0:
            continue  # a constant figure (e.g. acceptance clipped at 1.0) carries no step
        want = REGRESSION if plant.size < 0 else IMPROVEMENT
        hit = any(c.kind == want and abs(idx[c.index] - plant.night) <= 1 for c in found)
        big = abs(plant.size) * abs(float(base.mean())) >= 3 * spread
        score.planted += big
        score.found += big and hit
        score.planted_small += not big
        score.found_small += (not big) and hit
    shutil.rmtree(folder)


def score_detector(root: Path, n_planted: int = 8, n_flat: int = 6, n_drift: int = 2, seed: int = 0,
                   nights: int = 30) -> Score:
    """Steps of 3-15% (either sign, mostly regressions) in eagle3's speedup and eagle3.1's
    AL at random nights; histories with no change; drifts of -10% over the last 20 nights."""
    rng = np.random.default_rng(seed)
    score = Score()
    for h in range(n_planted):
        plants = [Plant("eagle3", int(rng.integers(8, nights - 3)), "speedup",
                        float(rng.uniform(0.03, 0.15) * rng.choice([-1, -1, 1]))),
                  Plant("eagle3.1", int(rng.integers(8, nights - 3)), "al",
                        float(rng.uniform(0.03, 0.15) * rng.choice([-1, -1, 1])))]
        score_history(score, root, plants, seed=1000 * seed + h, nights=nights)
    for h in range(n_flat):
        score_history(score, root, [], seed=1000 * seed + 100 + h, nights=nights)
    for h in range(n_drift):
        score_history(score, root, [Plant("eagle3", nights - 20, "speedup", -0.10, drift=True)],
                      seed=1000 * seed + 200 + h, nights=nights)
    return score


def replay_flat(root: Path, histories: int = 4, nights: int = 30, seed: int = 500) -> dict[str, int]:
    """The nightly alert as it runs: the verdicts on each night's history so far (from
    night 6 on), over histories with no change. Counts the nights `speedbench changes`
    would exit 1 and the distinct false regressions behind them."""
    from speedbench.analysis.changepoints import REGRESSION
    from speedbench.report import nightly

    out = {"nights": 0, "nights_with_exit_1": 0, "false_regressions": 0, "series_nights": 0}
    for h in range(histories):
        ns = load_nights(write_history(root / f"replay{h}", nights, [], seed=seed + h))
        seen: set[tuple] = set()
        for n in range(6, nights + 1):
            vs = nightly.verdicts({"cpu_tiny": ns[:n]})
            regs = {(v.series.key, v.began) for v in vs if v.status == REGRESSION}
            out["nights"] += 1
            out["nights_with_exit_1"] += bool(regs)
            out["series_nights"] += len(vs)
            out["false_regressions"] += len(regs - seen)
            seen |= regs
        shutil.rmtree(root / f"replay{h}")
    return out
