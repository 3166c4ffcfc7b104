"""vLLM's provenance.json entry read as the typed record (speedbench/engine/provenance.py).

The entry keeps vLLM's shape on disk (``vllm_version``, ``num_speculative_tokens``,
``cpu_attention``), so new run folders write the same bytes as old ones, and every older
shape still loads: this is the one place that reads vLLM's keys back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from speedbench.engine.provenance import Draft, Provenance

NAME, LABEL = "vllm", "vLLM"
# What only vLLM's entry holds: read here, handed on in Provenance.engine_part.
ENGINE_KEYS = ("vllm_version_source", "env", "cpu_attention", "server_process")


def _str(v: Any) -> str:
    return "" if v is None else str(v)


def _version(saved: Mapping[str, Any]) -> str:
    v = saved.get("vllm_version")
    nested = saved.get("vllm")
    if not v and isinstance(nested, dict):  # an early shape: {"vllm": {"version": ...}}
        v = nested.get("version")
    return _str(v)


def _draft(saved: Mapping[str, Any]) -> Draft | None:
    d = saved.get("draft")
    if isinstance(d, str):  # an early shape: the draft's name alone
        d = {"model": d}
    if not isinstance(d, dict) or not d:
        return Draft(model=_str(saved.get("draft_model")),
                     eagle_version=_str(saved.get("eagle_version"))) if saved.get("draft_model") else None
    try:
        weights_bytes = int(d.get("weights_bytes") or 0)
    except (TypeError, ValueError):
        weights_bytes = 0
    return Draft(model=_str(d.get("model") or d.get("path")), method=_str(d.get("method")),
                 config_path=_str(d.get("config_path")), config_sha256=_str(d.get("config_sha256")),
                 weights_sha256=_str(d.get("weights_sha256")), weights_bytes=weights_bytes,
                 architectures=tuple(str(a) for a in d.get("architectures") or ()),
                 eagle_version=_str(saved.get("eagle_version") or d.get("eagle_version")))


def _hardware(saved: Mapping[str, Any]) -> dict[str, Any]:
    hw = saved.get("hardware")
    if isinstance(hw, dict):
        if hw.get("summary"):
            return dict(hw)
        return {**hw, "summary": _str(hw.get("cpu") or ", ".join(map(str, hw.get("gpus") or [])))}
    return {"summary": _str(hw)} if hw else {}


def _cpu_attention(saved: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    att = saved.get("cpu_attention")
    if isinstance(att, dict) and att.get("kernel"):
        return (("CPU attention kernel", f"{att['kernel']} ({att.get('dtype') or 'dtype unknown'})"),)
    return ()


def _mapping(v: Any) -> dict[str, Any]:
    return dict(v) if isinstance(v, dict) else {}


def read(saved: Mapping[str, Any]) -> Provenance:
    """One arm's provenance.json entry, any shape speedbench ever wrote, as the record."""
    spec = saved.get("speculative_config")
    gpus = saved.get("gpus")
    k = saved.get("num_speculative_tokens")
    return Provenance(
        engine=NAME, engine_label=LABEL, engine_version=_version(saved),
        arm=_str(saved.get("arm")), launcher=_str(saved.get("launcher")),
        target=_str(saved.get("model") or saved.get("target_model")),
        target_config_sha256=_str(saved.get("target_config_sha256")),
        argv=tuple(str(a) for a in saved.get("argv") or ()), command=_str(saved.get("command")),
        gpus=tuple(int(g) for g in gpus) if isinstance(gpus, list) else None,
        base_url=_str(saved.get("base_url")), speculative=bool(saved.get("speculative")),
        speculative_config=dict(spec) if isinstance(spec, dict) else None,
        method=_str(saved.get("method")), k=k if isinstance(k, int) else None,
        draft=_draft(saved), hardware=_hardware(saved), data=_mapping(saved.get("data")),
        speedbench_version=_str(saved.get("speedbench_version")), git_commit=_str(saved.get("git_commit")),
        git_dirty=bool(saved.get("git_dirty")), cluster=_mapping(saved.get("cluster")),
        facts=(("CPU attention kernel", saved.get("cpu_attention")),), notes=_cpu_attention(saved),
        engine_part={k: saved[k] for k in ENGINE_KEYS if k in saved}, saved=dict(saved),
    )
