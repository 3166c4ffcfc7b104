"""Facts about a run that reports print next to the numbers: target and draft models,
hardware, the engine and its version. From the saved scenario and the arms' provenance
(speedbench/engine/provenance.py's record, read back by the run's engine)."""

from __future__ import annotations

from speedbench.results import Run


def target_model(run: Run) -> str:
    if run.stored_scenario.server.model:
        return str(run.stored_scenario.server.model)
    for prov in run.provenance.values():
        if prov.target:
            return prov.target
    return ""


def draft_model(run: Run, arm: str) -> str:
    saved = run.stored_scenario.arm(arm)
    if saved is not None and (saved.draft_model or saved.draft_method):
        return saved.draft_model or saved.draft_method
    prov = run.provenance.get(arm)
    return prov.draft.model if prov and prov.draft else ""


def draft_weights(run: Run, arm: str) -> str:
    """The sha256 of the arm's draft weight files, as the run read them ("" when not recorded)."""
    prov = run.provenance.get(arm)
    return prov.draft.weights_sha256 if prov and prov.draft else ""


def hardware(run: Run) -> str:
    if run.hardware:
        return str(run.hardware)
    for prov in run.provenance.values():
        h = prov.machine  # engine hardware(): {"kind", "gpus" | "cpu", "summary"}
        text = h.summary or h.cpu or ", ".join(map(str, h.gpus or []))
        if text:
            return str(text)
    return "unknown hardware"


def engine_notes(run: Run) -> list[tuple[str, str]]:
    """What the engine says about how it ran, by label, each distinct text once across the
    arms (vLLM on a CPU: ``("CPU attention kernel", "vec (float16)")``)."""
    seen: dict[str, list[str]] = {}
    for prov in run.provenance.values():
        for label, text in prov.notes:
            if text not in seen.setdefault(label, []):
                seen[label].append(text)
    return [(label, ", ".join(texts)) for label, texts in seen.items()]


def engine_version(run: Run) -> tuple[str, str]:
    """(how reports name the engine, its versions across the arms): ("vLLM", "0.11.0")."""
    versions: list[str] = []
    label = ""
    for prov in run.provenance.values():
        label = label or prov.engine_label
        if prov.engine_version and prov.engine_version not in versions:
            versions.append(prov.engine_version)
    return label, ", ".join(versions)
