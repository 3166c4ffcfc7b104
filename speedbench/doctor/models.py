"""The target checkpoint: where it is (engine/checkpoints.py), disk space and the HF
token. How it is quantized, and the drafts, are the engine's checks (vLLM's:
engine/vllm/host_checks.py, engine/vllm/drafts.py).

Nothing is downloaded: a model that is not local is reported as "will be downloaded".
"""

from __future__ import annotations

from pathlib import Path

from speedbench.doctor.base import Check, Context
from speedbench.engine.checkpoints import cache_root, hf_home, is_local_ref, locate, read_json

TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
GIB = 1024**3


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
