"""Checkpoints: where the target and drafts are (local path or Hugging Face cache), which
EAGLE version a draft is, how the target is quantized, disk space and the HF token.

Nothing is downloaded: a model that is not local is reported as "will be downloaded".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from speedbench.doctor.base import Check, Context
from speedbench.engine.vllm.support import is_supported, support
from speedbench.engine.vllm.provenance import V31_FLAGS, draft_info

NO_DRAFT_METHODS = ("ngram", "suffix")
TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
GIB = 1024**3


def hf_cache_root(env: Mapping[str, str], docker_cache: str | None = None) -> Path:
    """The hub cache vLLM will use: the docker mount, HF_HUB_CACHE, HF_HOME/hub or the default."""
    home = env.get("HOME") or str(Path.home())

    def expand(p: str) -> Path:
        return Path(home + p[1:]) if p.startswith("~") else Path(p)

    if docker_cache:
        return expand(docker_cache) / "hub"
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(var):
            return expand(env[var])
    if env.get("HF_HOME"):
        return expand(env["HF_HOME"]) / "hub"
    base = expand(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else expand("~/.cache")
    return base / "huggingface" / "hub"


def hf_home(env: Mapping[str, str]) -> Path:
    return hf_cache_root({k: v for k, v in env.items() if k not in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE")}).parent


def is_local_ref(ref: str) -> bool:
    # Hub ids are "name" or "org/name"; a leading ./ ~ / or a second slash means a path.
    return ref.startswith(("/", ".", "~")) or ref.count("/") > 1 or Path(ref).exists()


def hf_snapshot(cache_root: Path, repo_id: str) -> Path | None:
    """The cached snapshot folder holding ``config.json`` (refs/main first, else the newest)."""
    repo = cache_root / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / "main"
    if ref.is_file():
        snap = repo / "snapshots" / ref.read_text().strip()
        if (snap / "config.json").is_file():
            return snap
    snaps = [p.parent for p in (repo / "snapshots").glob("*/config.json")]
    return max(snaps, key=lambda p: p.stat().st_mtime) if snaps else None


@dataclass
class Located:
    ref: str
    local: bool  # a filesystem path, not a hub id
    folder: Path | None  # the folder holding config.json, when it is here
    in_fixtures: bool  # under the scenario's fixtures folder (built on first run)

    @property
    def available(self) -> bool:
        return self.folder is not None


def locate(ctx: Context, ref: str) -> Located:
    fixtures = ctx.scenario.fixtures
    if is_local_ref(ref):
        p = Path(ref).expanduser()
        in_fix = bool(fixtures) and _under(p, Path(fixtures or ""))
        return Located(ref, True, p if (p / "config.json").is_file() else None, in_fix)
    return Located(ref, False, hf_snapshot(cache_root(ctx), ref), False)


def _under(p: Path, parent: Path) -> bool:
    try:
        p.resolve().relative_to(parent.resolve())
        return True
    except ValueError:
        return False


def cache_root(ctx: Context) -> Path:
    sc = ctx.scenario
    docker_cache = sc.server.docker.cache_dir if sc.server.launcher == "docker" else None
    return hf_cache_root(ctx.facts.env, docker_cache)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def draft_eagle(folder: Path, method: str) -> tuple[str, list[str], dict[str, Any]]:
    """(EAGLE version "3.1" / "3" / "", the 3.1 flags set, config.json) of a local draft.

    Delegates to provenance so that doctor and the recorded results always agree on
    which EAGLE version a draft is.
    """
    info = draft_info(str(folder), method)
    flags = [f for f in V31_FLAGS if info.get(f)]
    return info["eagle_version"], flags, read_json(folder / "config.json") or {}


def nvfp4_from_config(config: Mapping[str, Any], hf_quant: Mapping[str, Any] | None) -> tuple[bool, str]:
    """(is NVFP4, what the config says) from config.json and ModelOpt's hf_quant_config.json."""
    qc = config.get("quantization_config") or {}
    hq = (hf_quant or {}).get("quantization") or {}
    method = str(qc.get("quant_method", "")) if isinstance(qc, dict) else ""
    algo = str((qc.get("quant_algo") if isinstance(qc, dict) else None) or hq.get("quant_algo") or "")
    text = json.dumps(qc).lower() + json.dumps(hq).lower()
    said = ", ".join(x for x in (f"quant_method={method}" if method else "", f"quant_algo={algo}" if algo else "") if x)
    if method == "modelopt_fp4" or algo.upper() in ("NVFP4", "W4A16_NVFP4") or "nvfp4" in text:
        return True, said or "nvfp4 in quantization_config"
    return False, said or "not quantized"


# ---- checks ------------------------------------------------------------------------------


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
    per_request = [a.name for a in ctx.arms if "--per-request-spec-decode-metrics" in ctx.argv[a.name]]
    if per_request:
        ctx.required.append(("per-request-spec-decode-metrics", f"set for {', '.join(per_request)}", True))
    timing = [a.name for a in ctx.arms if "--enable-per-request-metrics" in ctx.argv[a.name]]
    if timing:
        ctx.required.append(("enable-per-request-metrics", f"set for {', '.join(timing)}", True))


def check_model(ctx: Context) -> list[Check]:
    model = ctx.scenario.server.model
    if not ctx.arms or not model:
        return []
    loc = locate(ctx, model)
    if loc.available:
        return [Check("model", "ok",
                      f"{model}: {'local at ' + str(loc.folder) if loc.local else 'cached at ' + str(loc.folder)}")]
    if loc.in_fixtures:
        return [Check("model", "ok", f"{model} is built with the fixtures on first run")]
    if loc.local:
        return [Check("model", "fail", f"{model}: no config.json there",
                      "check server.model (relative paths start at the working directory)")]
    if _offline(ctx):
        return [Check("model", "fail",
                      f"{model} is not in the HF cache ({cache_root(ctx)}) and HF_HUB_OFFLINE is set: vLLM cannot "
                      "download it",
                      f"download it first (hf download {model}) or unset HF_HUB_OFFLINE")]
    return [Check("model", "warn",
                  f"{model} is not in the HF cache ({cache_root(ctx)}): vLLM downloads it at launch, which counts "
                  "against ready_timeout_s",
                  f"pre-fetch it: hf download {model}")]


def _offline(ctx: Context) -> bool:
    env = {**ctx.facts.env, **ctx.scenario.server.env}
    return str(env.get("HF_HUB_OFFLINE", "")).lower() in ("1", "true", "yes")


def _hub_refs(ctx: Context) -> list[str]:
    refs = [ctx.scenario.server.model] if ctx.scenario.server.model else []
    refs += [str(a.speculative_config.model) for a in ctx.arms if a.speculative_config and a.speculative_config.model]
    return [r for r in dict.fromkeys(refs) if not is_local_ref(r)] if ctx.arms else []


def shard_status(folder: Path) -> tuple[int, int, int]:
    """(missing shards, all shards, checkpoint bytes) from a sharded safetensors index; zeros when unsharded."""
    index = read_json(folder / "model.safetensors.index.json")
    if not index or not isinstance(index.get("weight_map"), dict):
        return 0, 0, 0
    shards = set(index["weight_map"].values())
    missing = sum(1 for s in shards if not (folder / s).exists())
    total = int((index.get("metadata") or {}).get("total_size") or 0)
    return missing, len(shards), total


def check_disk(ctx: Context) -> list[Check]:
    refs = _hub_refs(ctx)
    if not refs:
        return []
    root = cache_root(ctx)
    free = ctx.facts.disk_free(root)
    unknown, partial, need = [], [], 0
    for ref in refs:
        loc = locate(ctx, ref)
        if loc.folder is None:  # not available
            unknown.append(ref)
            continue
        missing, n, total = shard_status(loc.folder)
        if missing:
            partial.append(f"{ref} ({missing} of {n} shards missing)")
            need += total * missing // max(n, 1)  # shards are about equal in size
    have = f"{free / GIB:.0f} GiB free at {root}"
    if need and need > free:
        return [Check("disk", "fail", f"{have}; {', '.join(partial)} needs about {need / GIB:.0f} GiB more",
                      "free space there or point HF_HUB_CACHE at a larger disk")]
    if unknown:
        return [Check("disk", "warn", f"{have}; {', '.join(unknown)} not cached and the size is unknown offline"
                      + (f"; {', '.join(partial)} needs about {need / GIB:.0f} GiB more" if partial else ""),
                      "compare with the checkpoint size on the model card before launching")]
    if partial:
        return [Check("disk", "ok", f"{have}; {', '.join(partial)} needs about {need / GIB:.0f} GiB more")]
    return [Check("disk", "ok", f"every hub model is cached; {have}")]


def check_token(ctx: Context) -> list[Check]:
    """Presence only: a token's value is never read into a message."""
    out = []
    refs = _hub_refs(ctx)
    if refs:
        env = {**ctx.facts.env, **ctx.scenario.server.env}
        names = [v for v in TOKEN_VARS if env.get(v)]
        saved = (Path(ctx.facts.env["HF_TOKEN_PATH"]) if ctx.facts.env.get("HF_TOKEN_PATH")
                 else hf_home(ctx.facts.env) / "token")
        if names:
            out.append(Check("hf token", "ok", f"{' and '.join(names)} set (value not shown)"))
        elif saved.is_file():
            out.append(Check("hf token", "ok", f"a token is saved at {saved} (from `hf auth login`; value not shown)"))
        elif all(locate(ctx, r).available for r in refs):
            out.append(Check("hf token", "ok", "no HF token set; not needed, every hub model is cached"))
        else:
            out.append(Check("hf token", "warn",
                             f"neither {' nor '.join(TOKEN_VARS)} is set: gated or private repos will fail to download",
                             "export HF_TOKEN=... (a read token from huggingface.co/settings/tokens)"))
    key_env = ctx.scenario.server.api_key_env
    if key_env:
        present = bool(ctx.facts.env.get(key_env))
        out.append(Check("api key", "ok" if present else "fail",
                         f"{key_env} is {'set (value not shown)' if present else 'not set'} (server.api_key_env)",
                         "" if present else f"export {key_env}=..."))
    return out
