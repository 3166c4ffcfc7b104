"""vLLM's launch command: a scenario's server spec and an arm -> the argv and environment
that start vLLM, with the measurement flags speedbench adds.

Pure functions: no processes are started here, so ``--dry-run`` and the tests can show
exactly what would run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from speedbench.engine.base import LaunchSpec, argv_value, flag_value
from speedbench.engine.vllm.diagnose import DEATH_MARKS, read_death
from speedbench.errors import ScenarioError, UsageError
from speedbench.scenario import ArmSpec, Scenario, ServerSpec

def args_to_argv(args: dict[str, Any]) -> list[str]:
    """``{"trust-remote-code": True, "tensor-parallel-size": 4}`` -> ``--trust-remote-code --tensor-parallel-size 4``.

    ``True`` is a bare flag, ``False``/``None`` drop the flag, dicts become compact JSON
    and lists repeat the value after one flag (vLLM's nargs style).
    """
    argv: list[str] = []
    for key, value in args.items():
        flag = key if key.startswith("-") else "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value, separators=(",", ":"))]
        elif isinstance(value, list):
            argv += [flag, *[str(v) for v in value]]
        else:
            argv += [flag, str(value)]
    return argv


def _parallel_size(argv: list[str], *flags: str) -> int:
    # the first of the flags given counts; a bare flag or none is 1; a value that is not an
    # integer stops the plan (vLLM would refuse it)
    for flag in flags:
        value = argv_value(argv, flag)
        if value is None:
            continue
        if not isinstance(value, str):
            return 1
        try:
            return max(1, int(value))
        except ValueError:
            raise ScenarioError(f"argument '{flag.removeprefix('--')}' must be an integer, got {value!r}") from None
    return 1


def gpus_per_server(argv: list[str], env: Mapping[str, str]) -> int:
    """tensor x pipeline x data parallel sizes as vLLM reads them from ``argv`` (1 each by
    default); 0 for the CPU build (a "cpu" in the command, or vLLM's CPU KV-cache variable).
    Placement (engine/placement.py) asks this through the engine, so the sizes are checked
    even on the CPU."""
    gpus = (_parallel_size(argv, "--tensor-parallel-size", "-tp")
            * _parallel_size(argv, "--pipeline-parallel-size", "-pp")
            * _parallel_size(argv, "--data-parallel-size", "-dp"))
    if "cpu" in " ".join(argv).lower() or env.get("VLLM_CPU_KVCACHE_SPACE"):
        return 0
    return gpus


# The flag that takes an arm's speculative config, as compact JSON (args_to_argv).
SPECULATIVE_CONFIG = "speculative-config"

# Flags that vLLM rejects at start unless speculative decoding is on (0.32 raises in
# VllmConfig.__post_init__). A scenario sets them once in server.args; the baseline
# arm must not get them.
SPEC_ONLY_ARGS = ("per-request-spec-decode-metrics",)


# Measurement flags: they only make vLLM report more, so speedbench adds them to every
# server it launches (``server.measurement_flags: false`` runs the scenario's command
# exactly). Per-request engine timing for every arm; per-request acceptance for arms
# with a speculative_config (vLLM rejects it otherwise).
MEASUREMENT_FLAGS: dict[str, Any] = {"enable-per-request-metrics": True}
SPEC_MEASUREMENT_FLAGS: dict[str, Any] = {"per-request-spec-decode-metrics": "summary"}
# The measurement environment: a process that dies of a signal (SIGILL, SIGSEGV, ...)
# writes "Fatal Python error" and its Python stack to the log, so diagnose.py can
# name the op it died in. It changes nothing else.
MEASUREMENT_ENV: dict[str, str] = {"PYTHONFAULTHANDLER": "1"}
# Argv prefixes that start the OpenAI server; the image's entrypoint already is `vllm serve`.
_SERVER_MODULES = ("vllm.entrypoints.openai.api_server",)
# The variable vLLM reads its API key from (as --api-key): the client sends it, a container is passed it.
API_KEY_ENV = "VLLM_API_KEY"
# Flags that do not change what is measured, only what vLLM reports, where it listens and
# which draft it runs: a calibration of the step cost (calibration/store.py) ignores them.
NOT_SYSTEM_ARGS = frozenset({SPECULATIVE_CONFIG, *MEASUREMENT_FLAGS, *SPEC_MEASUREMENT_FLAGS,
                             "host", "port", "disable-log-requests"})
# --enable-per-request-metrics needs engine stats; vLLM refuses it with these.
_NO_STATS = ("disable-log-stats",)


def _given(args: dict[str, Any], key: str) -> bool:
    return key in args or key.replace("-", "_") in args


def measurement_args(server: ServerSpec, arm: ArmSpec) -> dict[str, Any]:
    """The measurement flags this arm's server gets on top of the scenario's own args
    (none the scenario already sets, none that would stop vLLM from starting)."""
    if not server.measurement_flags or arm.base_url:
        return {}
    own = {**server.args, **arm.args}
    flags = dict(MEASUREMENT_FLAGS)
    if any(own.get(k) or own.get(k.replace("-", "_")) for k in _NO_STATS):
        flags.pop("enable-per-request-metrics")
    if arm.speculative_config is not None:
        flags.update(SPEC_MEASUREMENT_FLAGS)
    return {k: v for k, v in flags.items() if not _given(own, k)}


def measurement_env(server: ServerSpec, arm: ArmSpec) -> dict[str, str]:
    """The measurement environment this arm's server gets (none the scenario sets)."""
    if not server.measurement_flags or arm.base_url:
        return {}
    own = {**server.env, **arm.env}
    return {k: v for k, v in MEASUREMENT_ENV.items() if k not in own}


def merged_args(server: ServerSpec, arm: ArmSpec) -> dict[str, Any]:
    args = dict(server.args)
    args.update(arm.args)
    if arm.speculative_config is not None:
        args[SPECULATIVE_CONFIG] = arm.speculative_config.to_dict()
    else:
        for key in SPEC_ONLY_ARGS:
            args.pop(key, None)
            args.pop(key.replace("-", "_"), None)
    return args


def _model_positional(server: ServerSpec) -> bool:
    if server.model_arg != "auto":
        return server.model_arg == "positional"
    return server.command[-1] == "serve"


def vllm_argv(server: ServerSpec, arm: ArmSpec) -> list[str]:
    """The scenario's own command for this arm (without the measurement flags)."""
    model = server.model or ""
    argv = list(server.command)
    argv += [model] if _model_positional(server) else ["--model", model]
    argv += args_to_argv(merged_args(server, arm))
    return argv


def image_args(argv: list[str]) -> list[str]:
    """argv without its command prefix (``vllm serve`` / ``python -m ...api_server``), for the
    image whose entrypoint is ``vllm serve`` (the launch's ``image_args``: engine/docker.py)."""
    if len(argv) >= 2 and Path(argv[0]).name == "vllm" and argv[1] == "serve":
        return argv[2:]
    for i, item in enumerate(argv[:4]):
        if item in _SERVER_MODULES:
            return argv[i + 1:]
    raise UsageError(
        f"the docker launcher runs the image's `vllm serve` entrypoint, but server.command "
        f"starts with {argv[:3]!r} -- fix: use command [vllm, serve] (the default) with launcher: docker"
    )


def launch_spec(sc: Scenario, arm: ArmSpec, gpus: list[int] | None = None) -> LaunchSpec:
    # validated to strings (scenario.base.env_strings); the field types also name the YAML input types
    env = {k: str(v) for k, v in {**sc.server.env, **arm.env}.items()}
    extra = args_to_argv(measurement_args(sc.server, arm))
    argv = [] if arm.base_url else vllm_argv(sc.server, arm) + extra
    return LaunchSpec(
        arm=arm.name,
        argv=argv,
        measurement=extra,
        measurement_env=measurement_env(sc.server, arm),
        env=env,
        host=sc.server.host,
        port=sc.server.port,
        gpus=gpus if gpus is not None else arm.gpus,
        base_url=arm.base_url,
        # vLLM's ZMQ IPC sockets (uuid-named, one set per start) and its distributed-init file
        # (vllm_dist_<uuid>, under tempfile.gettempdir()) otherwise stay in /tmp for good. vLLM
        # points inductor's cache at its own cache root, so a per-server TMPDIR costs no compile.
        scratch_env=("VLLM_RPC_BASE_PATH", "TMPDIR"),
        served_model=None if arm.base_url else (flag_value(argv, "--served-model-name") or sc.server.model or None),
        server_key=None if arm.base_url else (flag_value(argv, "--api-key") or env.get(API_KEY_ENV) or None),
        secret_env=(API_KEY_ENV,),
        death_marks=DEATH_MARKS,
        diagnose=read_death,
        image_args=image_args,
    )
