"""Facts about a run that reports print next to the numbers: target and draft models,
hardware, vLLM version. From the saved scenario and provenance.json."""

from __future__ import annotations

from typing import Any

from speedbench.results import Run


def _find(d: Any, names: tuple[str, ...], depth: int = 3) -> Any:
    """First value under any of ``names`` in a nested provenance dict (its exact shape
    belongs to engine/vllm/provenance.py; reports only need a few facts from it)."""
    if not isinstance(d, dict) or depth < 0:
        return None
    for n in names:
        if d.get(n) not in (None, "", [], {}):
            return d[n]
    for v in d.values():
        found = _find(v, names, depth - 1)
        if found not in (None, "", [], {}):
            return found
    return None


def target_model(run: Run) -> str:
    server = run.scenario.get("server") or {}
    if server.get("model"):
        return str(server["model"])
    for prov in run.provenance.values():
        m = _find(prov, ("target_model", "model"))
        if isinstance(m, str):
            return m
    return ""


def draft_model(run: Run, arm: str) -> str:
    for a in run.scenario.get("arms") or []:
        if isinstance(a, dict) and a.get("name") == arm:
            sc = a.get("speculative_config") or {}
            if sc.get("model"):
                return str(sc["model"])
            if sc.get("method"):
                return str(sc["method"])
    m = _find(run.provenance.get(arm) or {}, ("draft_model", "draft"))
    if isinstance(m, dict):
        m = m.get("model") or m.get("path")
    return str(m) if m else ""


def draft_weights(run: Run, arm: str) -> str:
    """The sha256 of the arm's draft weight files, as the run read them ("" when not recorded)."""
    draft = (run.provenance.get(arm) or {}).get("draft")
    return str(draft.get("weights_sha256") or "") if isinstance(draft, dict) else ""


def hardware(run: Run) -> str:
    if run.summary.get("hardware"):
        return str(run.summary["hardware"])
    for prov in run.provenance.values():
        h = _find(prov, ("hardware",))
        if isinstance(h, dict):  # engine/vllm/provenance.py: {"kind", "gpus" | "cpu", "summary"}
            h = h.get("summary") or h.get("cpu") or ", ".join(map(str, h.get("gpus") or []))
        if h:
            return str(h)
    return "unknown hardware"


def cpu_attention(run: Run) -> str:
    """The CPU attention kernel(s) vLLM ran, with their dtype: "vec (float16)"; "" off the CPU."""
    seen: list[str] = []
    for prov in run.provenance.values():
        att = prov.get("cpu_attention") if isinstance(prov, dict) else None
        if isinstance(att, dict) and att.get("kernel"):
            text = f"{att['kernel']} ({att.get('dtype') or 'dtype unknown'})"
            if text not in seen:
                seen.append(text)
    return ", ".join(seen)


def vllm_version(run: Run) -> str:
    versions = []
    for prov in run.provenance.values():
        v = _find(prov, ("vllm_version",))
        if v is None and isinstance(prov, dict) and isinstance(prov.get("vllm"), dict):
            v = prov["vllm"].get("version")
        if v and str(v) not in versions:
            versions.append(str(v))
    return ", ".join(versions)
