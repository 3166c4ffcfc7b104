"""Turn a scenario's server spec and an arm into the argv and environment that start vLLM.

Pure functions: no processes are started here, so ``--dry-run`` and the tests can show
exactly what would run.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

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


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value given to ``flag`` in ``argv`` (``--flag v`` or ``--flag=v``), or None."""
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


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
# writes "Fatal Python error" and its Python stack to the log, so engine/diagnose.py can
# name the op it died in. It changes nothing else.
MEASUREMENT_ENV: dict[str, str] = {"PYTHONFAULTHANDLER": "1"}
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
        args["speculative-config"] = arm.speculative_config.to_dict()
    else:
        for key in SPEC_ONLY_ARGS:
            args.pop(key, None)
            args.pop(key.replace("-", "_"), None)
    return args


def _model_positional(server: ServerSpec) -> bool:
    if server.model_arg != "auto":
        return server.model_arg == "positional"
    return server.command[-1] == "serve"


@dataclass
class LaunchSpec:
    """Everything needed to start one arm's server, before a port is chosen."""

    arm: str
    argv: list[str]  # without --host/--port; the measurement flags come last
    env: dict[str, str] = field(default_factory=dict)  # only what the scenario sets
    host: str = "127.0.0.1"
    port: int | None = None
    gpus: list[int] | None = None
    base_url: str | None = None  # external endpoint: nothing to launch
    measurement: list[str] = field(default_factory=list)  # the measurement flags at argv's end
    measurement_env: dict[str, str] = field(default_factory=dict)  # speedbench's, apart from env

    def argv_with_port(self, port: int) -> list[str]:
        return [*self.argv, "--host", self.host, "--port", str(port)]

    def env_with_gpus(self) -> dict[str, str]:
        env = {**self.measurement_env, **self.env}
        if self.gpus is not None and "CUDA_VISIBLE_DEVICES" not in env:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpus)
        return env

    def shell(self, port: int | None = None) -> str:
        argv = self.argv_with_port(port) if port is not None else self.argv
        return shlex.join(argv)


def vllm_argv(server: ServerSpec, arm: ArmSpec) -> list[str]:
    """The scenario's own command for this arm (without the measurement flags)."""
    model = server.model or ""
    argv = list(server.command)
    argv += [model] if _model_positional(server) else ["--model", model]
    argv += args_to_argv(merged_args(server, arm))
    return argv


def launch_spec(sc: Scenario, arm: ArmSpec, gpus: list[int] | None = None) -> LaunchSpec:
    # validated to strings (scenario.base.env_strings); the field types also name the YAML input types
    env = {k: str(v) for k, v in {**sc.server.env, **arm.env}.items()}
    extra = args_to_argv(measurement_args(sc.server, arm))
    return LaunchSpec(
        arm=arm.name,
        argv=[] if arm.base_url else vllm_argv(sc.server, arm) + extra,
        measurement=extra,
        measurement_env=measurement_env(sc.server, arm),
        env=env,
        host=sc.server.host,
        port=sc.server.port,
        gpus=gpus if gpus is not None else arm.gpus,
        base_url=arm.base_url,
    )
