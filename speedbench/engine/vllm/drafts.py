"""The doctor's draft checks for vLLM: which EAGLE version each draft is, as vLLM will read
its config.json (the 3.1 flags), whether the vLLM that will run honours it, and which vLLM
features the scenario therefore needs. The doctor runs these first (what the drafts are
decides which vLLM is needed) and lists them after the engine's own checks.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from speedbench.engine.checkpoints import cache_root, locate, read_json
from speedbench.engine.preflight import Check, Context
from speedbench.engine.vllm.checks import PER_REQUEST_FLAG, TIMING_FLAG
from speedbench.engine.vllm.provenance import V31_FLAGS, draft_info
from speedbench.engine.vllm.support import is_supported, support

NO_DRAFT_METHODS = ("ngram", "suffix")


def draft_eagle(folder: Path, method: str) -> tuple[str, list[str], dict[str, Any]]:
    """(EAGLE version "3.1" / "3" / "", the 3.1 flags set, config.json) of a local draft.

    Delegates to provenance so that doctor and the recorded results always agree on
    which EAGLE version a draft is.
    """
    info = draft_info(str(folder), method)
    flags = [f for f in V31_FLAGS if info.get(f)]
    return info["eagle_version"], flags, read_json(folder / "config.json") or {}


def check_drafts(ctx: Context) -> list[Check]:
    """One row per speculative arm; also records each draft's EAGLE version in ``ctx``."""
    out = []
    for arm in ctx.arms:
        spec = arm.speculative_config
        if spec is None:
            continue
        method = spec.method
        model = spec.model
        if method in NO_DRAFT_METHODS or not model:
            ctx.draft_versions[arm.name] = ""
            out.append(Check("draft", "ok", f"method {method}: no draft checkpoint to check", "", arm.name))
            continue
        out.append(_draft(ctx, arm.name, method, str(model)))
    _record_requirements(ctx)
    return out


def _draft(ctx: Context, arm: str, method: str, model: str) -> Check:
    loc = locate(ctx, model)
    if loc.folder is None:  # not available
        ctx.draft_versions[arm] = "?" if method == "eagle3" else ""
        if loc.in_fixtures:
            return Check("draft", "ok",
                         f"{model} is built with the fixtures on first run; its EAGLE version is read then", "", arm)
        if loc.local:
            return Check("draft", "fail", f"{model}: no config.json there",
                         "check the path (relative paths start at the working directory)", arm)
        hint = " (the name says 3.1)" if re.search(r"eagle-?3[._-]?1", model.lower()) else ""
        return Check("draft", "warn",
                     f"{model} is not in the HF cache ({cache_root(ctx)}): it will be downloaded at launch; "
                     f"cannot verify the EAGLE version now{hint}",
                     f"pre-fetch it to check: hf download {model} --include config.json", arm)
    version, flags, config = draft_eagle(loc.folder, method)
    ctx.draft_versions[arm] = version
    where = str(loc.folder) if loc.local else f"HF cache {loc.folder}"
    archs = ", ".join(config.get("architectures") or []) or "no architectures"
    if method == "eagle3" and version == "3" and "3.1" in arm + model:
        return Check("draft", "warn",
                     f"{model} ({archs}) has none of {', '.join(V31_FLAGS)}: it is EAGLE 3, though the arm or path "
                     "says 3.1",
                     "point the arm at the EAGLE 3.1 checkpoint, or rename the arm", arm)
    if version == "3.1":
        ok = is_supported(ctx.engine.usable_version, "eagle3.1")
        said = f"EAGLE 3.1 ({', '.join(flags)} true) at {where}"
        if ok is False:
            return Check("draft", "fail",
                         f"{said}; {ctx.engine.origin} would ignore these flags and run it as EAGLE 3. "
                         f"{support('eagle3.1').reason}",
                         "use vLLM >= 0.32 (table in speedbench/engine/vllm/support.py)", arm)
        if ok is None:
            return Check("draft", "warn",
                         f"{said}; could not verify that the vLLM that will run ({ctx.engine.origin}) honours them",
                         "use vLLM >= 0.32", arm)
        return Check("draft", "ok", f"{said}; honoured by vLLM {ctx.engine.version}", "", arm)
    if version == "3":
        return Check("draft", "ok", f"EAGLE 3 ({archs}; no 3.1 flags) at {where}", "", arm)
    return Check("draft", "ok", f"{method} draft ({archs}) at {where}", "", arm)


def _record_requirements(ctx: Context) -> None:
    for arm, version in ctx.draft_versions.items():
        if version == "3.1":
            ctx.required.append(("eagle3.1", f"arm {arm}'s draft is EAGLE 3.1", True))
    unknown = [a for a, v in ctx.draft_versions.items() if v == "?"]
    if unknown and not any(f == "eagle3.1" for f, _, _ in ctx.required):
        ctx.required.append(("eagle3.1",
                             f"in case the draft of arm {', '.join(unknown)} is EAGLE 3.1, which cannot be read yet",
                             False))
    per_request = [a.name for a in ctx.arms if PER_REQUEST_FLAG in ctx.argv[a.name]]
    if per_request:
        ctx.required.append(("per-request-spec-decode-metrics", f"set for {', '.join(per_request)}", True))
    timing = [a.name for a in ctx.arms if TIMING_FLAG in ctx.argv[a.name]]
    if timing:
        ctx.required.append(("enable-per-request-metrics", f"set for {', '.join(timing)}", True))
