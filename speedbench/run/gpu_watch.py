"""The arm's GPUs while a point runs: SM clock, power, temperature, and compute
processes that are not the engine's, sampled by ``nvidia-smi`` every few seconds in a
thread of its own.

Read only at a point's two ends the figures would be those of an idle GPU (before the
first request, after the last): boost clocks and idle power, noise for any rule. Sampled
during the point they are what the requests ran under. The sampler never holds the
point up: each call has a timeout, and the point's end does not wait for a call in
flight (a wedged driver costs one sample, not the run).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import Any

from speedbench.run.conditions import PROC, group_pids

FIELDS = "index,uuid,clocks.sm,power.draw,temperature.gpu"
SAMPLE_S = 2.0
_TIMEOUT_S = 5.0

Runner = Callable[[list[str]], "str | None"]


def nvidia_smi(argv: list[str]) -> str | None:
    """One nvidia-smi call's output, or None (missing, failed, timed out)."""
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 else None


def _num(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None  # [N/A], [Not Supported]


def parse_gpus(text: str) -> list[dict[str, Any]]:
    """``--query-gpu=index,uuid,clocks.sm,power.draw,temperature.gpu`` CSV -> one dict per GPU."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 5 and parts[0].isdigit():
            out.append({"index": int(parts[0]), "uuid": parts[1], "sm_clock_mhz": _num(parts[2]),
                        "power_w": _num(parts[3]), "temperature_c": _num(parts[4])})
    return out


def parse_apps(text: str) -> list[tuple[int, str]]:
    """``--query-compute-apps=pid,gpu_uuid`` CSV -> (pid, GPU uuid) pairs."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            out.append((int(parts[0]), parts[1]))
    return out


class GpuWatch:
    """Samples ``gpus`` (nvidia-smi indices; empty: every GPU) from :meth:`start` to :meth:`stop`;
    :meth:`summary` gives each GPU's mean SM clock and power, its hottest reading, and the
    most compute processes outside ``pgid``'s group seen on them at once."""

    def __init__(self, gpus: Sequence[int], pgid: int | None, *, runner: Runner = nvidia_smi,
                 every_s: float = SAMPLE_S, own_pids: Callable[[], set[int]] | None = None):
        self.gpus, self.pgid, self.runner, self.every_s = list(gpus), pgid, runner, every_s
        self.own_pids = own_pids or (lambda: set(group_pids(pgid, PROC)) if pgid is not None else set())
        self.samples: list[list[dict[str, Any]]] = []
        self.others: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-watch", daemon=True)

    def _sample(self) -> None:
        which = ["-i", ",".join(map(str, self.gpus))] if self.gpus else []  # [] = every GPU
        text = self.runner(["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits", *which])
        gpus = parse_gpus(text or "")
        if not gpus:
            return
        self.samples.append(gpus)
        apps = self.runner(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid", "--format=csv,noheader,nounits"])
        if apps is not None:
            uuids, own = {g["uuid"] for g in gpus}, self.own_pids()
            self.others.append(sum(1 for pid, uuid in parse_apps(apps) if uuid in uuids and pid not in own))

    def _loop(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(self.every_s):
                return

    def start(self) -> GpuWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=0.5)  # a call in flight ends by its own timeout, unwaited

    def summary(self) -> dict[str, Any]:
        """``{"gpus": [{index, sm_clock_mhz, power_w, temperature_c, samples}], "gpu_other_processes"}``
        (``{}`` without a sample: no nvidia-smi, or none answered)."""
        by: dict[int, list[dict[str, Any]]] = {}
        for sample in list(self.samples):
            for g in sample:
                by.setdefault(g["index"], []).append(g)
        if not by:
            return {}

        def mean(rows: list[dict[str, Any]], key: str) -> float | None:
            vals = [r[key] for r in rows if r.get(key) is not None]
            return round(sum(vals) / len(vals), 1) if vals else None

        gpus = [{"index": i, "sm_clock_mhz": mean(rows, "sm_clock_mhz"), "power_w": mean(rows, "power_w"),
                 "temperature_c": max((r["temperature_c"] for r in rows if r.get("temperature_c") is not None),
                                      default=None), "samples": len(rows)} for i, rows in sorted(by.items())]
        return {"gpus": gpus, "gpu_other_processes": max(self.others) if self.others else None}
