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


# Flags that vLLM rejects at start unless speculative decoding is on (0.32 raises in
# VllmConfig.__post_init__). A scenario sets them once in server.args; the baseline
# arm must not get them.
SPEC_ONLY_ARGS = ("per-request-spec-decode-metrics",)


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
    argv: list[str]  # without --host/--port
    env: dict[str, str] = field(default_factory=dict)  # only what the scenario sets
    host: str = "127.0.0.1"
    port: int | None = None
    gpus: list[int] | None = None
    base_url: str | None = None  # external endpoint: nothing to launch

    def argv_with_port(self, port: int) -> list[str]:
        return [*self.argv, "--host", self.host, "--port", str(port)]

    def env_with_gpus(self) -> dict[str, str]:
        env = dict(self.env)
        if self.gpus is not None and "CUDA_VISIBLE_DEVICES" not in env:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpus)
        return env

    def shell(self, port: int | None = None) -> str:
        argv = self.argv_with_port(port) if port is not None else self.argv
        return shlex.join(argv)


def vllm_argv(server: ServerSpec, arm: ArmSpec) -> list[str]:
    model = server.model or ""
    argv = list(server.command)
    argv += [model] if _model_positional(server) else ["--model", model]
    argv += args_to_argv(merged_args(server, arm))
    return argv


def launch_spec(sc: Scenario, arm: ArmSpec, gpus: list[int] | None = None) -> LaunchSpec:
    env = dict(sc.server.env)
    env.update(arm.env)
    return LaunchSpec(
        arm=arm.name,
        argv=[] if arm.base_url else vllm_argv(sc.server, arm),
        env=env,
        host=sc.server.host,
        port=sc.server.port,
        gpus=gpus if gpus is not None else arm.gpus,
        base_url=arm.base_url,
    )
