"""Where a checkpoint is: a local folder or the Hugging Face hub cache the engine will read
(HF_HUB_CACHE, HF_HOME, a docker mount). Nothing is downloaded; a model that is not here
is "will be downloaded". Shared by the doctor's model checks and the engines' draft and
quantization checks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from speedbench.engine.preflight import Context


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
